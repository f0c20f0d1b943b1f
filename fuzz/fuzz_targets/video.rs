//! Any bytes through the Y4M reader (`blur -`, `histogram - --per-frame`): frames or an error,
//! never a panic or a hang; every frame within the cap and exactly its format's size, no more
//! frame bytes out than went in, and each frame's planes split, joined back to the same bytes,
//! and converted to the image the histogram counts.
#![no_main]

use gpukit::io::video::VideoReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cap = 1 << 20;
    let Ok(mut reader) = VideoReader::y4m(data, cap) else {
        return;
    };
    let format = reader.format().clone();
    let mut total = 0usize;
    while let Ok(Some((_, frame))) = reader.next_frame() {
        assert_eq!(frame.len() as u64, format.frame_bytes());
        assert!(frame.len() as u64 <= cap);
        total += frame.len();
        assert!(total <= data.len());
        assert_eq!(format.join(&format.split(&frame)), frame);
        let img = format.to_image(&frame);
        assert_eq!((img.width, img.height), (format.width, format.height));
    }
});
