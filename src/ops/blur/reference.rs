//! The CPU reference. Mirrors wgsl/blur_*.wgsl: the same premultiply, window sums, rounding,
//! transposed output and unpremultiply.

use anyhow::Result;
use rayon::prelude::*;

use super::arith::{arith, Arith, Premultiply};
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

/// Colour lanes (c * a + div / 2) / div, the alpha lane a * scale.
fn premultiply(px: &mut [Px], p: &Premultiply) {
    px.par_iter_mut().for_each(|v| {
        let a = v[p.lane];
        for (k, x) in v.iter_mut().enumerate() {
            *x = if k == p.lane {
                a * p.scale as u64
            } else {
                p.colour(*x as u32, a as u32) as u64
            };
        }
    });
}

/// The last column pass of an image with alpha, from its window sums: the alpha lane
/// rounded by `(mul, add, div)`, the colour lanes divided by the alpha sum; all zero where
/// the alpha out is 0.
fn unpremultiply(sums: &[Px], (mul, add, div): (u32, u32, u32), p: &Premultiply) -> Vec<Px> {
    sums.par_iter()
        .map(|s| {
            let a = (s[p.lane] * mul as u64 + add as u64) / div as u64;
            if a == 0 {
                return [0; 4];
            }
            let mut out = s.map(|v| p.unpremultiply(v as u32, s[p.lane] as u32) as u64);
            out[p.lane] = a;
            out
        })
        .collect()
}

/// (S * mul + add) / div for every lane of every sum.
fn finish(sums: Vec<Px>, (mul, add, div): (u32, u32, u32)) -> Vec<Px> {
    sums.into_par_iter()
        .map(|s| s.map(|v| (v * mul as u64 + add as u64) / div as u64))
        .collect()
}

/// One pass: the window sums along each of `lines` lines of `len` pixels, transposed
/// (`len` lines of `lines` pixels).
fn pass_cpu(src: &[Px], lines: usize, len: usize, radius: u32, kind: &Arith) -> Vec<Px> {
    let r = radius as i64;
    let at = |line: &[Px], i: i64| line[i.clamp(0, len as i64 - 1) as usize];
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
                        s
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
                        s
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
    let ar = arith(params, max, alpha_lane(img.channels))?;
    let (w, h) = (img.width as usize, img.height as usize);
    if w == 0 || h == 0 {
        return Ok(img.clone());
    }
    let mut px = lanes(img);
    if let Some(p) = &ar.alpha {
        premultiply(&mut px, p);
    }
    let n = params.iterations;
    for it in 0..n {
        let mid = finish(
            pass_cpu(&px, h, w, params.radius, &ar),
            ar.pass(it, n, false),
        );
        let sums = pass_cpu(&mid, w, h, params.radius, &ar);
        px = match &ar.alpha {
            Some(p) if it + 1 == n => unpremultiply(&sums, ar.pass(it, n, true), p),
            _ => finish(sums, ar.pass(it, n, true)),
        };
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
