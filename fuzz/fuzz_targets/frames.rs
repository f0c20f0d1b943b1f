//! Any bytes through the stream splitter (`histogram -`): frames or an error, never a panic
//! or a hang; every frame within the cap, and the frames, laid end to end, are the stream's
//! bytes less only the blank space (and a TIFF's pad byte) between them.
#![no_main]

use gpukit::io::image::stream::FrameStream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cap = 1 << 20;
    let mut stream = FrameStream::new(data, cap);
    let mut total = 0usize;
    while let Ok(Some(frame)) = stream.next_frame() {
        assert!(!frame.is_empty() && frame.len() as u64 <= cap);
        total += frame.len();
        assert!(total <= data.len());
    }
});
