//! Pixels as four lanes, packed into words for the GPU and unpacked from them.
//! 8-bit images travel as one word per pixel (lane k in byte k), 16-bit
//! ones as two words; missing lanes are zero. The alpha lane is 1 (gray+alpha) or 3 (RGBA).

use rayon::prelude::*;

use crate::gpu::WriteView;
use crate::io::image::{Image, Samples};

pub(super) fn alpha_lane(channels: u8) -> Option<usize> {
    match channels {
        2 => Some(1),
        4 => Some(3),
        _ => None,
    }
}

/// Writes `img` packed (one word a pixel for 8-bit images, two for 16-bit) into `out`, which
/// holds exactly that many bytes; pixels of fewer than 4 channels are packed a chunk at a
/// time, so no packed copy of the whole image is made.
pub(super) fn write_words(img: &Image, out: &mut WriteView) {
    const CHUNK: usize = 1 << 14; // pixels
    let c = img.channels as usize;
    let mut words: Vec<u32> = Vec::with_capacity(2 * CHUNK);
    // Chunk i of `words_per_px`-word pixels.
    let mut put = |i: usize, words_per_px: usize, words: &[u32]| {
        let at = i * CHUNK * words_per_px * 4;
        out.slice(at..at + 4 * words.len())
            .copy_from_slice(bytemuck::cast_slice(words));
    };
    match &img.samples {
        Samples::U8(s) if c == 4 => out.copy_from_slice(s),
        Samples::U16(s) if c == 4 => out.copy_from_slice(bytemuck::cast_slice(s)),
        Samples::U8(s) => {
            for (i, chunk) in s.chunks(c * CHUNK).enumerate() {
                words.clear();
                words.extend(chunk.chunks(c).map(|px| {
                    px.iter()
                        .enumerate()
                        .fold(0u32, |w, (k, &v)| w | (v as u32) << (8 * k))
                }));
                put(i, 1, &words);
            }
        }
        Samples::U16(s) => {
            for (i, chunk) in s.chunks(c * CHUNK).enumerate() {
                words.clear();
                words.extend(chunk.chunks(c).flat_map(|px| {
                    let mut lanes = [0u32; 4];
                    for (k, &v) in px.iter().enumerate() {
                        lanes[k] = v as u32;
                    }
                    [lanes[0] | lanes[1] << 16, lanes[2] | lanes[3] << 16]
                }));
                put(i, 2, &words);
            }
        }
    }
}

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
