//! Where two images differ: the bounding boxes of the differing regions, found on the diff
//! image by a coarse grid merge. The image is cut into cells of [`CELL`] x [`CELL`] pixels; a
//! cell holding a differing (red) pixel is marked, and marked cells that touch (sides or
//! corners) form one region, whose box is the exact extent of its differing pixels. At most
//! [`MAX_REGIONS`] are listed, the largest first.

use serde::Serialize;

use super::RED;
use crate::io::image::{Image, Samples};

/// The side of a grid cell, in pixels: differing pixels up to about this far apart merge.
pub const CELL: u32 = 16;
/// The most regions a report lists.
pub const MAX_REGIONS: usize = 100;

/// One region: its box (corners included, as `--ignore` takes them) and its differing
/// pixels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    pub x1: u32,
    pub y1: u32,
    pub x2: u32,
    pub y2: u32,
    pub pixels: u64,
}

/// The regions of the red pixels of `diff` (an RGB 8-bit diff image), the largest (most
/// pixels) first, then by top and left; at most [`MAX_REGIONS`], with how many there were.
pub fn regions(diff: &Image) -> (Vec<Region>, usize) {
    let Samples::U8(s) = &diff.samples else {
        unreachable!("diff images are 8-bit")
    };
    let (w, h) = (diff.width, diff.height);
    let (gw, gh) = (w.div_ceil(CELL), h.div_ceil(CELL));
    let cell = |x: u32, y: u32| (y / CELL * gw + x / CELL) as usize;
    // Per cell: the box and count of its red pixels.
    let mut boxes: Vec<Option<Region>> = vec![None; gw as usize * gh as usize];
    for (i, p) in s.chunks_exact(3).enumerate() {
        if p != RED {
            continue;
        }
        let (x, y) = (i as u32 % w, i as u32 / w);
        let b = boxes[cell(x, y)].get_or_insert(Region {
            x1: x,
            y1: y,
            x2: x,
            y2: y,
            pixels: 0,
        });
        b.x1 = b.x1.min(x);
        b.y1 = b.y1.min(y);
        b.x2 = b.x2.max(x);
        b.y2 = b.y2.max(y);
        b.pixels += 1;
    }
    // Connected marked cells, by a flood fill over the grid.
    let mut seen = vec![false; boxes.len()];
    let mut out = Vec::new();
    for start in 0..boxes.len() {
        if seen[start] || boxes[start].is_none() {
            continue;
        }
        seen[start] = true;
        let mut stack = vec![start];
        let mut region: Option<Region> = None;
        while let Some(i) = stack.pop() {
            let b = boxes[i].clone().expect("only marked cells are pushed");
            region = Some(match region {
                None => b,
                Some(r) => Region {
                    x1: r.x1.min(b.x1),
                    y1: r.y1.min(b.y1),
                    x2: r.x2.max(b.x2),
                    y2: r.y2.max(b.y2),
                    pixels: r.pixels + b.pixels,
                },
            });
            let (cx, cy) = ((i as u32 % gw) as i64, (i as u32 / gw) as i64);
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (nx, ny) = (cx + dx, cy + dy);
                    if nx < 0 || ny < 0 || nx >= i64::from(gw) || ny >= i64::from(gh) {
                        continue;
                    }
                    let n = (ny * i64::from(gw) + nx) as usize;
                    if !seen[n] && boxes[n].is_some() {
                        seen[n] = true;
                        stack.push(n);
                    }
                }
            }
        }
        out.extend(region);
    }
    out.sort_by_key(|r| (std::cmp::Reverse(r.pixels), r.y1, r.x1));
    let total = out.len();
    out.truncate(MAX_REGIONS);
    (out, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A white diff image of `w` x `h` with the given pixels red.
    fn diff(w: u32, h: u32, red: &[(u32, u32)]) -> Image {
        let mut v = vec![255u8; (w * h * 3) as usize];
        for &(x, y) in red {
            let i = ((y * w + x) * 3) as usize;
            v[i..i + 3].copy_from_slice(&RED);
        }
        Image::new_u8(w, h, 3, v)
    }

    #[test]
    fn touching_cells_merge_and_far_ones_do_not() {
        // (15, 15) and (16, 16) lie in diagonal cells: one region; (60, 5) is alone; the
        // yellow-free image has nothing else.
        let img = diff(80, 40, &[(15, 15), (16, 16), (17, 16), (60, 5)]);
        let (r, total) = regions(&img);
        assert_eq!(total, 2);
        assert_eq!(
            r,
            [
                Region {
                    x1: 15,
                    y1: 15,
                    x2: 17,
                    y2: 16,
                    pixels: 3
                },
                Region {
                    x1: 60,
                    y1: 5,
                    x2: 60,
                    y2: 5,
                    pixels: 1
                }
            ]
        );
    }

    #[test]
    fn the_list_is_bounded() {
        // A red pixel every 3 cells: 20 x 10 regions of one pixel each.
        let red: Vec<(u32, u32)> = (0..10)
            .flat_map(|j| (0..20).map(move |i| (i * 48, j * 48)))
            .collect();
        let (r, total) = regions(&diff(20 * 48, 10 * 48, &red));
        assert_eq!((r.len(), total), (MAX_REGIONS, 200));
        assert_eq!((r[0].x1, r[0].y1), (0, 0));
    }
}
