//! The CPU reference. Mirrors wgsl/blur_*.wgsl: the same premultiply, window sums, rounding,
//! transposed output and unpremultiply.

use anyhow::Result;
use rayon::prelude::*;

use super::arith::{arith, Arith};
use super::pack::{alpha_lane, from_words};
use super::Options;
use crate::io::image::{Image, Samples};

type Px = [u64; 4];

fn lanes(img: &Image) -> Vec<Px> {
    let c = img.channels as usize;
    let mut out = vec![[0u64; 4]; img.pixels()];
    match &img.samples {
        Samples::U8(s) => out.par_iter_mut().zip(s.par_chunks(c)).for_each(|(o, px)| {
            for k in 0..c {
                o[k] = px[k] as u64;
            }
        }),
        Samples::U16(s) => out.par_iter_mut().zip(s.par_chunks(c)).for_each(|(o, px)| {
            for k in 0..c {
                o[k] = px[k] as u64;
            }
        }),
    }
    out
}

/// (c * a + max / 2) / max for colour lanes.
fn premultiply(px: &mut [Px], alpha: usize, max: u64) {
    px.par_iter_mut().for_each(|p| {
        let a = p[alpha];
        for (k, v) in p.iter_mut().enumerate() {
            if k != alpha {
                *v = (*v * a + max / 2) / max;
            }
        }
    });
}

/// (c * max + a / 2) / a, at most max, for colour lanes; all zero where a = 0.
fn unpremultiply(px: &mut [Px], alpha: usize, max: u64) {
    px.par_iter_mut().for_each(|p| {
        let a = p[alpha];
        for (k, v) in p.iter_mut().enumerate() {
            if a == 0 {
                *v = 0;
            } else if k != alpha {
                *v = ((*v * max + a / 2) / a).min(max);
            }
        }
    });
}

/// One pass: blurs each of `lines` lines of `len` pixels and returns the result transposed
/// (`len` lines of `lines` pixels).
fn pass_cpu(
    src: &[Px],
    lines: usize,
    len: usize,
    radius: u32,
    kind: &Arith,
    second: bool,
) -> Vec<Px> {
    let (mul, add, div) = if second { kind.second } else { kind.first };
    let r = radius as i64;
    let at = |line: &[Px], i: i64| line[i.clamp(0, len as i64 - 1) as usize];
    let finish = |s: Px| s.map(|v| (v * mul as u64 + add as u64) / div as u64);
    let rows: Vec<Vec<Px>> = src
        .par_chunks(len)
        .map(|line| {
            if kind.weights.is_empty() {
                // Box: the window sum slides along the line.
                let mut s = [0u64; 4];
                for i in -1 - r..=-1 + r {
                    let p = at(line, i);
                    (0..4).for_each(|k| s[k] += p[k]);
                }
                (0..len as i64)
                    .map(|x| {
                        let (add, sub) = (at(line, x + r), at(line, x - r - 1));
                        (0..4).for_each(|k| s[k] = s[k] + add[k] - sub[k]);
                        finish(s)
                    })
                    .collect()
            } else {
                // Gaussian: weights[k] applies to the sample at offset k - r.
                (0..len as i64)
                    .map(|x| {
                        let mut s = [0u64; 4];
                        for (k, &w) in kind.weights.iter().enumerate() {
                            let p = at(line, x + k as i64 - r);
                            (0..4).for_each(|c| s[c] += w as u64 * p[c]);
                        }
                        finish(s)
                    })
                    .collect()
            }
        })
        .collect();
    let mut out = vec![[0u64; 4]; lines * len];
    for (y, row) in rows.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            out[x * lines + y] = *v;
        }
    }
    out
}

/// The CPU reference blur: what every GPU result must equal, bit for bit.
pub fn reference(img: &Image, params: &Options) -> Result<Image> {
    let max = img.max_value();
    let ar = arith(params, max)?;
    let (w, h) = (img.width as usize, img.height as usize);
    if w == 0 || h == 0 {
        return Ok(img.clone());
    }
    let mut px = lanes(img);
    let alpha = alpha_lane(img.channels);
    if let Some(a) = alpha {
        premultiply(&mut px, a, max as u64);
    }
    for _ in 0..params.iterations {
        let mid = pass_cpu(&px, h, w, params.radius, &ar, false);
        px = pass_cpu(&mid, w, h, params.radius, &ar, true);
    }
    if let Some(a) = alpha {
        unpremultiply(&mut px, a, max as u64);
    }
    let words: Vec<u32> = match img.samples {
        Samples::U8(_) => px
            .iter()
            .map(|p| (p[0] | p[1] << 8 | p[2] << 16 | p[3] << 24) as u32)
            .collect(),
        Samples::U16(_) => px
            .iter()
            .flat_map(|p| [(p[0] | p[1] << 16) as u32, (p[2] | p[3] << 16) as u32])
            .collect(),
    };
    Ok(from_words(&words, img))
}
