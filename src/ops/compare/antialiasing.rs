//! pixelmatch's anti-aliasing detection, the mirror of `antialiased` in wgsl/compare.wgsl:
//! a differing pixel is taken for anti-aliasing when its neighbourhood has both a darker
//! and a brighter neighbour, either of which sits in a flat area of both images. Pixels are
//! seen as pixelmatch sees them, 8-bit RGBA, and brightness is its Y exactly (no rounding
//! that could make two neighbours tie or swap).

use super::reference::{brightness, rgba8, View};

/// Pixel (x, y) of `v` as 8-bit RGBA, the pixels pixelmatch sees.
fn rgba(v: &View, x: u32, y: u32) -> [u32; 4] {
    rgba8(v.pixel(x, y), v.channels, v.sixteen())
}

/// pixelmatch's brightness delta of two pixels of one image: 0 when they are equal.
fn brightness_delta(p: [u32; 4], q: [u32; 4]) -> i64 {
    if p == q {
        return 0;
    }
    brightness(p, q)
}

/// The 3x3 neighbourhood of (x, y) clipped to the image, and whether (x, y) is on its edge.
fn around(v: &View, x: u32, y: u32) -> (u32, u32, u32, u32, u32) {
    let (x0, y0) = (x.saturating_sub(1), y.saturating_sub(1));
    let (x2, y2) = ((x + 1).min(v.width - 1), (y + 1).min(v.height - 1));
    let edge = x == x0 || x == x2 || y == y0 || y == y2;
    (x0, y0, x2, y2, u32::from(edge))
}

/// Whether pixel (x1, y1) has 3 or more neighbours of exactly its value (pixels on the
/// image's edge count one extra): pixelmatch's `hasManySiblings`.
fn has_many_siblings(v: &View, x1: u32, y1: u32) -> bool {
    let (x0, y0, x2, y2, mut zeroes) = around(v, x1, y1);
    let centre = rgba(v, x1, y1);
    for x in x0..=x2 {
        for y in y0..=y2 {
            if x == x1 && y == y1 {
                continue;
            }
            if rgba(v, x, y) == centre {
                zeroes += 1;
            }
            if zeroes > 2 {
                return true;
            }
        }
    }
    false
}

/// Whether pixel (x1, y1) of `img` looks anti-aliased: pixelmatch's `antialiased`, with
/// `other` the other image. Its brightest and darkest neighbours are found in x-major
/// order, first one kept on ties, as pixelmatch does.
pub(super) fn antialiased(img: &View, other: &View, x1: u32, y1: u32) -> bool {
    let (x0, y0, x2, y2, mut zeroes) = around(img, x1, y1);
    let centre = rgba(img, x1, y1);
    let (mut lo, mut hi) = (0i64, 0i64);
    let (mut lo_at, mut hi_at) = ((0, 0), (0, 0));
    for x in x0..=x2 {
        for y in y0..=y2 {
            if x == x1 && y == y1 {
                continue;
            }
            let delta = brightness_delta(centre, rgba(img, x, y));
            if delta == 0 {
                zeroes += 1;
                if zeroes > 2 {
                    return false;
                }
            } else if delta < lo {
                lo = delta;
                lo_at = (x, y);
            } else if delta > hi {
                hi = delta;
                hi_at = (x, y);
            }
        }
    }
    if lo == 0 || hi == 0 {
        return false;
    }
    (has_many_siblings(img, lo_at.0, lo_at.1) && has_many_siblings(other, lo_at.0, lo_at.1))
        || (has_many_siblings(img, hi_at.0, hi_at.1) && has_many_siblings(other, hi_at.0, hi_at.1))
}
