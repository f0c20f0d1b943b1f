//! Any bytes through gpukit's array readers (.npy, JSON, text, raw), with and without a dtype:
//! an array or an error, never a panic, and an array's shape always matches its data.
#![no_main]

use gpukit::io::array::{parse, DType, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [Format::Npy, Format::Json, Format::Text, Format::Bin] {
        for dtype in [None, Some(DType::U32), Some(DType::I32), Some(DType::F32), Some(DType::F16)] {
            if let Ok(a) = parse(data, format, dtype) {
                let n = a.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
                assert_eq!(n, Some(a.data.len()), "{format:?} {dtype:?}");
            }
        }
    }
});
