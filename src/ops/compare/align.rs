//! Two decoded images made comparable, as pixelmatch and odiff compare them: pixels, not
//! layouts. Images of different layouts are both promoted to RGBA at the deeper bit depth;
//! images of different sizes (where allowed) are compared over their common top-left area,
//! and the pixels only one of them has count as differing ([`SizeChange`]).

use super::{Comparison, Ignored, RED};
use crate::io::image::{Image, Samples};

/// Two images of one layout and size, ready for [`super::run`], and what was done to them.
pub struct Aligned {
    pub a: Image,
    pub b: Image,
    /// The layouts as decoded, like "RGB 8-bit": the expected image's and the actual's.
    pub layouts: [String; 2],
    /// Whether the layouts differed, so that both were promoted to RGBA.
    pub promoted: bool,
    /// With a size change allowed and sizes that differ: the sizes.
    pub size_change: Option<SizeChange>,
}

/// Two images' sizes where they differ: the common top-left area is compared, and each pixel
/// only one image has counts as differing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeChange {
    pub expected: (u32, u32),
    pub actual: (u32, u32),
}

/// A layout as the reports name it: "gray", "gray+alpha", "RGB" or "RGBA", and the depth.
pub fn layout_name(channels: u8, bit_depth: u32) -> String {
    let name = match channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    };
    format!("{name} {bit_depth}-bit")
}

/// Makes `a` (expected) and `b` (actual) comparable. Sizes that differ are an error (its
/// reason) unless `allow_size_change`.
pub fn align(a: Image, b: Image, allow_size_change: bool) -> Result<Aligned, String> {
    let layouts = [
        layout_name(a.channels, a.bit_depth()),
        layout_name(b.channels, b.bit_depth()),
    ];
    let resized = (a.width, a.height) != (b.width, b.height);
    if resized && !allow_size_change {
        return Err(format!(
            "size differs: {}x{} expected, {}x{} actual",
            a.width, a.height, b.width, b.height
        ));
    }
    let promoted = layouts[0] != layouts[1];
    let (mut a, mut b) = if promoted {
        let sixteen = a.bit_depth() == 16 || b.bit_depth() == 16;
        (rgba(&a, sixteen), rgba(&b, sixteen))
    } else {
        (a, b)
    };
    let size_change = resized.then_some(SizeChange {
        expected: (a.width, a.height),
        actual: (b.width, b.height),
    });
    if resized {
        let (w, h) = (a.width.min(b.width), a.height.min(b.height));
        a = crop(&a, w, h);
        b = crop(&b, w, h);
    }
    Ok(Aligned {
        a,
        b,
        layouts,
        promoted,
        size_change,
    })
}

/// `img` as RGBA, 16-bit if `sixteen` (8-bit samples v become 257 v): gray spread to R, G
/// and B, opaque where it has no alpha.
pub fn rgba(img: &Image, sixteen: bool) -> Image {
    let c = usize::from(img.channels);
    let (w, h) = (img.width, img.height);
    let expand = |p: &[u32], max: u32| -> [u32; 4] {
        match c {
            1 => [p[0], p[0], p[0], max],
            2 => [p[0], p[0], p[0], p[1]],
            3 => [p[0], p[1], p[2], max],
            _ => [p[0], p[1], p[2], p[3]],
        }
    };
    let mut px = [0u32; 4];
    match (&img.samples, sixteen) {
        (Samples::U8(s), false) => {
            let mut out = Vec::with_capacity(img.pixels() * 4);
            for p in s.chunks_exact(c) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                out.extend(expand(&px[..c], 255).map(|v| v as u8));
            }
            Image::new_u8(w, h, 4, out)
        }
        (Samples::U8(s), true) => {
            let mut out = Vec::with_capacity(img.pixels() * 4);
            for p in s.chunks_exact(c) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v) * 257;
                }
                out.extend(expand(&px[..c], 65535).map(|v| v as u16));
            }
            Image::new_u16(w, h, 4, out)
        }
        (Samples::U16(s), _) => {
            let mut out = Vec::with_capacity(img.pixels() * 4);
            for p in s.chunks_exact(c) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                out.extend(expand(&px[..c], 65535).map(|v| v as u16));
            }
            Image::new_u16(w, h, 4, out)
        }
    }
}

/// The top-left `width` x `height` of `img`.
pub fn crop(img: &Image, width: u32, height: u32) -> Image {
    let stride = img.width as usize * img.channels as usize;
    let row = width as usize * img.channels as usize;
    // The first `row` samples of each of the first `height` rows.
    fn rows<T: Copy>(s: &[T], stride: usize, row: usize, height: u32) -> Vec<T> {
        (0..height as usize)
            .flat_map(|y| &s[y * stride..y * stride + row])
            .copied()
            .collect()
    }
    match &img.samples {
        Samples::U8(s) => Image::new_u8(width, height, img.channels, rows(s, stride, row, height)),
        Samples::U16(s) => {
            Image::new_u16(width, height, img.channels, rows(s, stride, row, height))
        }
    }
}

impl SizeChange {
    /// The area covering both images: the diff image's size.
    pub fn canvas(&self) -> (u32, u32) {
        (
            self.expected.0.max(self.actual.0),
            self.expected.1.max(self.actual.1),
        )
    }

    /// Whether exactly one of the images has pixel (x, y).
    fn only_one(&self, x: u32, y: u32) -> bool {
        let has = |(w, h): (u32, u32)| x < w && y < h;
        has(self.expected) != has(self.actual)
    }

    /// Adds the pixels only one image has to a comparison of the common area: outside an
    /// ignored rectangle they count as differing (and in `outside`), inside one as ignored.
    /// The diff image grows to the canvas: those pixels red (white where ignored), the
    /// pixels neither image has white.
    pub fn extend(&self, mut cmp: Comparison, ignore: Ignored) -> Comparison {
        let (cw, ch) = self.canvas();
        let common = (
            self.expected.0.min(self.actual.0),
            self.expected.1.min(self.actual.1),
        );
        let mut diff = cmp
            .diff
            .as_ref()
            .map(|_| vec![255u8; cw as usize * ch as usize * 3]);
        if let (Some(out), Some(d)) = (&mut diff, &cmp.diff) {
            let Samples::U8(s) = &d.samples else {
                unreachable!("diff images are 8-bit")
            };
            let row = common.0 as usize * 3;
            for y in 0..common.1 as usize {
                let at = y * cw as usize * 3;
                out[at..at + row].copy_from_slice(&s[y * row..y * row + row]);
            }
        }
        let k = &mut cmp.counts;
        for y in 0..ch {
            for x in 0..cw {
                if !self.only_one(x, y) {
                    continue;
                }
                k.pixels += 1;
                if ignore.contains(x, y) {
                    k.ignored += 1;
                    continue;
                }
                k.differing += 1;
                k.outside += 1;
                if let Some(out) = &mut diff {
                    let at = (y as usize * cw as usize + x as usize) * 3;
                    out[at..at + 3].copy_from_slice(&RED);
                }
            }
        }
        cmp.diff = diff.map(|rgb| Image::new_u8(cw, ch, 3, rgb));
        cmp
    }
}
