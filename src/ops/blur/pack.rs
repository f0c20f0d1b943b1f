//! Pixels as four lanes packed into words, the layout the blur passes work in: 8-bit images
//! take one word per pixel (lane k in byte k), 16-bit ones two words; missing lanes are zero.
//! The alpha lane is 1 (gray+alpha) or 3 (RGBA). Images travel to and from the GPU in the
//! host's own layout (wgsl/blur_pack.wgsl converts them there); the reference packs its
//! result the passes' way.

use rayon::prelude::*;

use crate::io::image::{Image, Samples};

pub(super) fn alpha_lane(channels: u8) -> Option<usize> {
    match channels {
        2 => Some(1),
        4 => Some(3),
        _ => None,
    }
}

/// An image like `like` from its samples in the host's layout as the GPU wrote them: 8-bit
/// as they are, 16-bit little-endian (one copy).
pub(super) fn image_from_bytes(bytes: &[u8], like: &Image) -> Image {
    let (w, h, c) = (like.width, like.height, like.channels);
    match like.samples {
        Samples::U8(_) => Image::new_u8(w, h, c, bytes.to_vec()),
        Samples::U16(_) => {
            let mut samples: Vec<u16> = bytemuck::pod_collect_to_vec(bytes);
            if cfg!(target_endian = "big") {
                samples.iter_mut().for_each(|v| *v = u16::from_le(*v));
            }
            Image::new_u16(w, h, c, samples)
        }
    }
}

/// The image like `like` whose pixels are `words`, four lanes each (the reference's output).
pub(super) fn from_words(words: &[u32], like: &Image) -> Image {
    let c = like.channels as usize;
    let (w, h) = (like.width, like.height);
    match like.samples {
        Samples::U8(_) if c == 4 => Image::new_u8(w, h, 4, bytemuck::pod_collect_to_vec(words)),
        Samples::U8(_) => {
            let mut out = vec![0u8; words.len() * c];
            out.par_chunks_mut(c)
                .zip(words.par_iter())
                .for_each(|(px, &word)| px.copy_from_slice(&word.to_le_bytes()[..c]));
            Image::new_u8(w, h, like.channels, out)
        }
        Samples::U16(_) if c == 4 => Image::new_u16(w, h, 4, bytemuck::pod_collect_to_vec(words)),
        Samples::U16(_) => {
            let mut out = vec![0u16; words.len() / 2 * c];
            out.par_chunks_mut(c)
                .zip(words.par_chunks(2))
                .for_each(|(px, pair)| {
                    for (k, v) in px.iter_mut().enumerate() {
                        *v = (pair[k / 2] >> (16 * (k % 2))) as u16;
                    }
                });
            Image::new_u16(w, h, like.channels, out)
        }
    }
}
