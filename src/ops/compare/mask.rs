//! Masks: pixels left out of a comparison, given as a mask image (`--mask`: its non-black
//! pixels) or as rectangles per file (`--ignore-regions`). A mask is applied on the host
//! before the engine runs: the actual image takes the expected image's pixels where masked,
//! so no engine needs to know about it, and the masked pixels are then counted as ignored.

use super::Rect;
use crate::io::image::{Image, Samples};

/// Which pixels of an image of `width` x `height` are left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    pub width: u32,
    pub height: u32,
    bits: Vec<bool>,
}

impl Mask {
    /// No pixel masked.
    pub fn empty(width: u32, height: u32) -> Mask {
        Mask {
            width,
            height,
            bits: vec![false; width as usize * height as usize],
        }
    }

    /// The pixels of `img` that are not black: a colour sample (gray, or R, G or B) is
    /// non-zero, and the alpha, where there is one, is non-zero too (a transparent pixel is
    /// not masked).
    pub fn from_image(img: &Image) -> Mask {
        let c = usize::from(img.channels);
        let alpha = c == 2 || c == 4;
        let colours = if alpha { c - 1 } else { c };
        let set = |p: &[u32]| p[..colours].iter().any(|&v| v != 0) && (!alpha || p[c - 1] != 0);
        let mut px = [0u32; 4];
        let bits = match &img.samples {
            Samples::U8(s) => s
                .chunks_exact(c)
                .map(|p| {
                    for (d, &v) in px.iter_mut().zip(p) {
                        *d = u32::from(v);
                    }
                    set(&px[..c])
                })
                .collect(),
            Samples::U16(s) => s
                .chunks_exact(c)
                .map(|p| {
                    for (d, &v) in px.iter_mut().zip(p) {
                        *d = u32::from(v);
                    }
                    set(&px[..c])
                })
                .collect(),
        };
        Mask {
            width: img.width,
            height: img.height,
            bits,
        }
    }

    /// Adds the pixels of `rects` (clipped to the mask).
    pub fn add_rects(&mut self, rects: &[Rect]) {
        for r in rects {
            if r.x1 >= self.width || r.y1 >= self.height {
                continue;
            }
            let x2 = r.x2.min(self.width - 1);
            for y in r.y1..=r.y2.min(self.height - 1) {
                let row = y as usize * self.width as usize;
                self.bits[row + r.x1 as usize..=row + x2 as usize].fill(true);
            }
        }
    }

    /// Whether pixel (x, y) is masked; pixels outside the mask are not.
    pub fn contains(&self, x: u32, y: u32) -> bool {
        x < self.width && y < self.height && self.bits[(y * self.width + x) as usize]
    }

    /// Whether no pixel is masked.
    pub fn is_empty(&self) -> bool {
        !self.bits.iter().any(|&b| b)
    }

    /// Gives `b` (actual) `a`'s (expected) pixels where masked, so that they compare equal,
    /// over the images' area (one size and layout, the top-left part of the mask's area).
    /// Returns the masked pixels of that area that no rectangle of `ignore` holds: those the
    /// engine's counts must add to `ignored`.
    pub fn apply(&self, a: &Image, b: &mut Image, ignore: &[Rect]) -> u64 {
        let (w, h, c) = (a.width, a.height, usize::from(a.channels));
        let mut extra = 0;
        fn copy<T: Copy>(from: &[T], to: &mut [T], at: usize, c: usize) {
            to[at * c..at * c + c].copy_from_slice(&from[at * c..at * c + c]);
        }
        for y in 0..h.min(self.height) {
            for x in 0..w.min(self.width) {
                if !self.contains(x, y) {
                    continue;
                }
                let at = y as usize * w as usize + x as usize;
                match (&a.samples, &mut b.samples) {
                    (Samples::U8(s), Samples::U8(d)) => copy(s, d, at, c),
                    (Samples::U16(s), Samples::U16(d)) => copy(s, d, at, c),
                    _ => unreachable!("aligned images have one depth"),
                }
                extra += u64::from(!ignore.iter().any(|r| r.contains(x, y)));
            }
        }
        extra
    }
}

/// What a comparison leaves out: rectangles, and a mask.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ignored<'a> {
    pub rects: &'a [Rect],
    pub mask: Option<&'a Mask>,
}

impl Ignored<'_> {
    pub fn contains(&self, x: u32, y: u32) -> bool {
        self.rects.iter().any(|r| r.contains(x, y)) || self.mask.is_some_and(|m| m.contains(x, y))
    }

    pub fn is_empty(&self) -> bool {
        self.rects.is_empty() && self.mask.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_black_visible_pixels_are_masked() {
        // RGBA: black opaque, red opaque, red transparent, white half-transparent.
        let img = Image::new_u8(
            4,
            1,
            4,
            vec![
                0, 0, 0, 255, 255, 0, 0, 255, 255, 0, 0, 0, 255, 255, 255, 128,
            ],
        );
        let m = Mask::from_image(&img);
        let got: Vec<bool> = (0..4).map(|x| m.contains(x, 0)).collect();
        assert_eq!(got, [false, true, false, true]);
        let gray = Image::new_u16(2, 1, 1, vec![0, 1]);
        let m = Mask::from_image(&gray);
        assert_eq!((m.contains(0, 0), m.contains(1, 0)), (false, true));
    }

    #[test]
    fn apply_copies_and_counts_outside_the_rectangles() {
        let a = Image::new_u8(3, 2, 1, vec![1, 2, 3, 4, 5, 6]);
        let mut b = Image::new_u8(3, 2, 1, vec![9; 6]);
        let mut m = Mask::empty(4, 3);
        m.add_rects(&[Rect {
            x1: 1,
            y1: 0,
            x2: 9,
            y2: 0,
        }]);
        let ignore = [Rect {
            x1: 2,
            y1: 0,
            x2: 2,
            y2: 1,
        }];
        assert_eq!(m.apply(&a, &mut b, &ignore), 1);
        assert_eq!(b, Image::new_u8(3, 2, 1, vec![9, 2, 3, 9, 9, 9]));
    }
}
