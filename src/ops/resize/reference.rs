//! The CPU reference: Pillow's resampling written out plainly, one sample at a time, on
//! samples widened to u32 (8- and 16-bit alike). Premultiply (images with alpha, not for
//! NEAREST), the 1-D passes of `coeffs::passes` each rounded and clipped to the image's
//! depth, unpremultiply.

use super::coeffs::{passes, Dir, Pass, PRECISION_BITS};
use super::{Filter, Options};
use crate::io::image::{Image, Samples};

/// `c * a / max` rounded: Pillow's `MULDIV255` (`t = c * a + 128; ((t >> 8) + t) >> 8`), and
/// the same with 16 for 8 at 16 bits.
pub fn premultiply(c: u32, a: u32, bits: u32) -> u32 {
    let t = u64::from(c) * u64::from(a) + (1 << (bits - 1));
    (((t >> bits) + t) >> bits) as u32
}

/// Pillow's `rgba2rgbA`: a colour kept as it is where alpha is 0 or full, else
/// `min(max * c / a, max)`.
pub fn unpremultiply(c: u32, a: u32, max: u32) -> u32 {
    if a == 0 || a == max {
        c
    } else {
        (u64::from(max) * u64::from(c) / u64::from(a)).min(u64::from(max)) as u32
    }
}

/// A sum of samples times weights, rounded half up and clipped to `0..=max`: Pillow's
/// `clip8((1 << 21) + sum)` (the sum is exact here in i64; Pillow's i32 never overflows).
pub fn round_clip(sum: i64, max: u32) -> u32 {
    ((sum + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS).clamp(0, i64::from(max)) as u32
}

/// The resized image, as [`super::run`] makes it on any engine.
pub fn reference(img: &Image, options: &Options) -> anyhow::Result<Image> {
    let (out_w, out_h) = options.size.resolve(img.width, img.height)?;
    let depth = img.bit_depth();
    let plan = passes(img.width, img.height, out_w, out_h, options.filter, depth);
    if plan.is_empty() {
        return Ok(img.clone());
    }
    let c = img.channels as usize;
    let max = img.max_value();
    let mut s: Vec<u32> = match &img.samples {
        Samples::U8(v) => v.iter().map(|&x| u32::from(x)).collect(),
        Samples::U16(v) => v.iter().map(|&x| u32::from(x)).collect(),
    };
    let alpha = img.has_alpha() && options.filter != Filter::Nearest;
    if alpha {
        for px in s.chunks_mut(c) {
            let a = px[c - 1];
            for v in &mut px[..c - 1] {
                *v = premultiply(*v, a, depth);
            }
        }
    }
    let (mut w, mut h) = (img.width as usize, img.height as usize);
    for pass in &plan {
        (s, w, h) = one_pass(&s, w, h, c, pass, max);
    }
    if alpha {
        for px in s.chunks_mut(c) {
            let a = px[c - 1];
            for v in &mut px[..c - 1] {
                *v = unpremultiply(*v, a, max);
            }
        }
    }
    Ok(match img.samples {
        Samples::U8(_) => Image::new_u8(
            w as u32,
            h as u32,
            img.channels,
            s.iter().map(|&v| v as u8).collect(),
        ),
        Samples::U16(_) => Image::new_u16(
            w as u32,
            h as u32,
            img.channels,
            s.iter().map(|&v| v as u16).collect(),
        ),
    })
}

/// One pass over `w` x `h` pixels of `c` samples: the new samples and size.
fn one_pass(
    s: &[u32],
    w: usize,
    h: usize,
    c: usize,
    pass: &Pass,
    max: u32,
) -> (Vec<u32>, usize, usize) {
    let n = pass.axis.len();
    let (ow, oh) = match pass.dir {
        Dir::Horizontal => (n, h),
        Dir::Vertical => (w, n),
    };
    let mut out = vec![0u32; ow * oh * c];
    for y in 0..oh {
        for x in 0..ow {
            for ch in 0..c {
                let pos = match pass.dir {
                    Dir::Horizontal => x,
                    Dir::Vertical => y,
                };
                let (first, weights) = pass.axis.taps(pos);
                let mut sum = 0i64;
                for (j, &k) in weights.iter().enumerate() {
                    let (sx, sy) = match pass.dir {
                        Dir::Horizontal => (first + j, y),
                        Dir::Vertical => (x, first + j),
                    };
                    sum += i64::from(s[(sy * w + sx) * c + ch]) * i64::from(k);
                }
                out[(y * ow + x) * c + ch] = round_clip(sum, max);
            }
        }
    }
    (out, ow, oh)
}
