//! Pixels turned upright by the EXIF orientation (`Metadata::auto_orient`, `--auto-orient`),
//! as ImageMagick's `-auto-orient` and `vips autorot` do.

use super::{Image, Samples};
use crate::io::metadata::Metadata;

impl Metadata {
    /// Turns `image` upright by the EXIF orientation and sets the tag to 1, as ImageMagick's
    /// `-auto-orient` and `vips autorot` do. Without an orientation nothing changes.
    pub fn auto_orient(&mut self, image: Image) -> Image {
        let Some(o) = self.take_orientation() else {
            return image;
        };
        orient(image, o)
    }
}

/// Turns the pixels upright for EXIF orientation `o`: 2 mirrors, 3 turns 180 degrees, 4 flips,
/// 5 transposes, 6 turns 90 degrees clockwise, 7 transverses, 8 turns 90 degrees
/// counter-clockwise; 1 (and anything else) leaves them.
pub fn orient(image: Image, o: u8) -> Image {
    if !(2..=8).contains(&o) {
        return image;
    }
    let (w, h) = (image.width as usize, image.height as usize);
    let (ow, oh) = if o >= 5 { (h, w) } else { (w, h) };
    // The stored pixel shown at (x, y) of the upright image.
    let source = |x: usize, y: usize| -> usize {
        let (sx, sy) = match o {
            2 => (w - 1 - x, y),
            3 => (w - 1 - x, h - 1 - y),
            4 => (x, h - 1 - y),
            5 => (y, x),
            6 => (y, h - 1 - x),
            7 => (w - 1 - y, h - 1 - x),
            _ => (w - 1 - y, x),
        };
        sy * w + sx
    };
    let c = usize::from(image.channels);
    fn remap<T: Copy>(
        d: &[T],
        c: usize,
        ow: usize,
        oh: usize,
        src: impl Fn(usize, usize) -> usize,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(d.len());
        for y in 0..oh {
            for x in 0..ow {
                let s = src(x, y) * c;
                out.extend_from_slice(&d[s..s + c]);
            }
        }
        out
    }
    let (ow32, oh32) = (ow as u32, oh as u32);
    match &image.samples {
        Samples::U8(d) => Image::new_u8(ow32, oh32, image.channels, remap(d, c, ow, oh, source)),
        Samples::U16(d) => Image::new_u16(ow32, oh32, image.channels, remap(d, c, ow, oh, source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::metadata::exif_with_orientation;

    #[test]
    fn orientation_is_read_and_reset_in_either_byte_order() {
        for o in 1..=8u8 {
            let mut m = Metadata {
                exif: Some(exif_with_orientation(o)),
                ..Metadata::default()
            };
            assert_eq!(m.orientation(), Some(o));
            let img = Image::new_u8(3, 2, 1, (0..6).collect());
            let out = m.auto_orient(img);
            assert_eq!(m.orientation(), Some(1));
            assert_eq!(
                (out.width, out.height),
                if o >= 5 { (2, 3) } else { (3, 2) }
            );
        }
        // Big-endian: MM, IFD at 8, one entry, orientation 6.
        let mut be = b"MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0".to_vec();
        let mut m = Metadata {
            exif: Some(be.clone()),
            ..Metadata::default()
        };
        assert_eq!(m.orientation(), Some(6));
        m.auto_orient(Image::new_u8(1, 1, 1, vec![0]));
        be[19] = 1;
        assert_eq!(m.exif, Some(be));
    }
}
