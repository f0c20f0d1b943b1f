//! Any bytes through gpukit's image reader: it must return an image or an error, never panic,
//! hang or allocate past its limits. The limits are small so that a bomb is found quickly.
#![no_main]

use gpukit::io::image::{decode_with, DecodeLimits, ReadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for allow_damaged in [false, true] {
        let opts = ReadOptions {
            limits: DecodeLimits {
                max_width: 4096,
                max_height: 4096,
                max_bytes: 16 << 20,
            },
            allow_damaged,
        };
        if let Ok(d) = decode_with(data, &opts) {
            let img = d.image;
            let samples = img.pixels() * img.channels as usize;
            assert!(samples as u64 * u64::from(img.bit_depth() / 8) <= 16 << 20);
        }
    }
});
