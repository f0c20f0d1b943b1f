//! The TIFF reader's tests: layouts, palettes, alpha, sub-byte rows, refused variants.

use super::*;
use crate::io::image::{decode, decode_with, Samples};
use ::tiff::encoder::{colortype, TiffEncoder};
use ::tiff::tags::ExtraSamples;

type Encoder<'a> = TiffEncoder<&'a mut Cursor<Vec<u8>>>;

fn tiff_bytes(write: impl FnOnce(&mut Encoder)) -> Vec<u8> {
    let mut cur = Cursor::new(Vec::new());
    write(&mut TiffEncoder::new(&mut cur).unwrap());
    cur.into_inner()
}

fn u8s(samples: Samples) -> Vec<u8> {
    match samples {
        Samples::U8(v) => v,
        Samples::U16(_) => panic!("16-bit samples"),
    }
}

#[test]
fn palette_indices_are_expanded_through_the_colormap() {
    // ColorMap: all reds, then all greens, then all blues, 16-bit (entry i = (i, 255 - i, 7)).
    let map: Vec<u16> = (0..256u16)
        .map(|i| i * 257)
        .chain((0..256u16).map(|i| (255 - i) * 257))
        .chain((0..256).map(|_| 7 * 257 + 200))
        .collect();
    let bytes = tiff_bytes(|e| {
        let mut img = e.new_image::<colortype::Gray8>(3, 1).unwrap();
        img.encoder()
            .write_tag(Tag::PhotometricInterpretation, 3u16)
            .unwrap();
        img.encoder().write_tag(Tag::ColorMap, &map[..]).unwrap();
        img.write_data(&[0, 9, 255]).unwrap();
    });
    let img = decode(&bytes).unwrap();
    assert_eq!((img.width, img.height, img.channels), (3, 1, 3));
    assert_eq!(u8s(img.samples), [0, 255, 7, 9, 246, 7, 255, 0, 7]);
}

#[test]
fn gray_alpha_is_kept_and_associated_alpha_divided_out() {
    let data = [200u8, 255, 64, 128, 9, 0];
    let read = |extra: ExtraSamples| {
        let bytes = tiff_bytes(|e| {
            let mut img = e.new_image::<colortype::Gray8>(3, 1).unwrap();
            img.extra_samples(&[extra]).unwrap();
            img.write_data(&data).unwrap();
        });
        let img = decode(&bytes).unwrap();
        assert_eq!(img.channels, 2);
        u8s(img.samples)
    };
    assert_eq!(read(ExtraSamples::UnassociatedAlpha), data);
    // 64 premultiplied by 128/255 is 128 straight; colour under alpha 0 is 0.
    assert_eq!(
        read(ExtraSamples::AssociatedAlpha),
        [200, 255, 128, 128, 0, 0]
    );
}

#[test]
fn cmyk_is_refused_not_converted() {
    let bytes = tiff_bytes(|e| {
        e.write_image::<colortype::CMYK8>(2, 1, &[0, 255, 100, 37, 1, 2, 3, 254])
            .unwrap();
    });
    let err = decode(&bytes).unwrap_err().to_string();
    assert!(err.starts_with("CMYK TIFF: not supported"), "{err}");
}

#[test]
fn sixteen_bit_rgb_is_read_as_stored() {
    let data = [1u16, 2, 65535, 300, 40000, 0];
    let bytes = tiff_bytes(|e| {
        e.write_image::<colortype::RGB16>(2, 1, &data).unwrap();
    });
    assert_eq!(decode(&bytes).unwrap().samples, Samples::U16(data.to_vec()));
}

#[test]
fn a_strip_past_the_end_of_the_file_is_damage() {
    let mut bytes = tiff_bytes(|e| {
        e.write_image::<colortype::Gray8>(4, 2, &[1, 2, 3, 4, 5, 6, 7, 8])
            .unwrap();
    });
    let (at, ty) = first_ifd_value(&bytes, Tag::StripByteCounts.to_u16()).unwrap();
    assert_eq!(ty, 4, "a LONG");
    bytes[at..at + 4].copy_from_slice(&0x4000_0001u32.to_le_bytes());
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(
        e.starts_with("corrupt TIFF: strip 0 ") && e.contains("past the end"),
        "{e}"
    );
    let opts = ReadOptions {
        allow_damaged: true,
        ..ReadOptions::default()
    };
    let d = decode_with(&bytes, &opts).unwrap();
    assert_eq!(u8s(d.image.samples), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(d.damage.is_some());
}

#[test]
fn refused_variants_are_named() {
    let bytes = tiff_bytes(|e| {
        e.write_image::<colortype::GrayI8>(1, 1, &[-3]).unwrap();
    });
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(
        e.starts_with("unsupported TIFF: signed integer samples"),
        "{e}"
    );
}

#[test]
fn unpacks_sub_byte_rows() {
    // 3 pixels of 2 bits: 01 10 11 (then 2 bits of row padding), twice.
    assert_eq!(
        unpack(&[0b0110_1100, 0b0110_1100], 3, 2),
        [1, 2, 3, 1, 2, 3]
    );
    assert_eq!(unpack(&[0b1010_0000], 3, 1), [1, 0, 1]);
    assert_eq!(unpack(&[0xF0, 0x10], 3, 4), [15, 0, 1]);
}

#[test]
fn conversions_round_like_the_references() {
    // libjpeg's jdcolor.c: gray stays gray; (76, 85, 255) is nearly pure red.
    assert_eq!(ycbcr_to_rgb(77, 128, 128), [77, 77, 77]);
    assert_eq!(ycbcr_to_rgb(76, 85, 255), [254, 0, 0]);
    assert_eq!(unpremultiply(64, 128, 255), 128);
    assert_eq!(unpremultiply(9, 0, 255), 0);
}
