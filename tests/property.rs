//! Property tests: random shapes, layouts, depths, radii, iterations and bin counts through
//! the GPU (lavapipe here and in CI) against the CPU reference, bit for bit. The cases are
//! few and small, so the whole file runs in seconds on two cores; proptest shrinks a failure
//! to the smallest case and prints its seed.

use gpukit::gpu::Timings;
use gpukit::io::image::Image;
use gpukit::ops::blur::{self, Kind, Options as BlurParams};
use gpukit::ops::histogram::{self, max_bins, Channels, HistogramGpu};
use proptest::prelude::*;

use crate::util::{engine, shared_gpu};

/// An image of any layout and depth, up to 40x40, with samples from the strategy's seed:
/// a mix of extremes (0, max) and any value, so alpha 0 and max both occur.
fn image() -> impl Strategy<Value = Image> {
    (1u32..=40, 1u32..=40, 1u8..=4, any::<bool>(), any::<u64>()).prop_map(
        |(w, h, channels, sixteen, seed)| {
            let n = (w * h * u32::from(channels)) as usize;
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let max = if sixteen { 65535u64 } else { 255 };
            let mut sample = move || match next() % 8 {
                0 => 0,
                1 => max,
                _ => next() % (max + 1),
            };
            if sixteen {
                Image::new_u16(w, h, channels, (0..n).map(|_| sample() as u16).collect())
            } else {
                Image::new_u8(w, h, channels, (0..n).map(|_| sample() as u8).collect())
            }
        },
    )
}

fn params() -> impl Strategy<Value = BlurParams> {
    prop_oneof![
        (0u32..=45, 1u32..=3).prop_map(|(r, it)| BlurParams::new(Kind::Box, r, it)),
        (1u32..=20, 0.3f64..8.0, 1u32..=2).prop_map(|(r, sigma, it)| BlurParams::new(
            Kind::Gaussian { sigma },
            r,
            it
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn blur_on_the_gpu_and_the_native_engine_equals_the_cpu_reference(img in image(), params in params()) {
        let want = blur::reference(&img, &params).unwrap();
        let got = blur::run(engine(), &img, &params, &mut Timings::default()).unwrap();
        let native = blur::engine::blur(&img, &params).unwrap();
        prop_assert!(
            native == want,
            "native engine: {} {:?} r={} x{}",
            img.describe(),
            params.kind,
            params.radius,
            params.iterations
        );
        prop_assert!(
            got == want,
            "{} {:?} r={} x{}",
            img.describe(),
            params.kind,
            params.radius,
            params.iterations
        );
    }

    #[test]
    fn histogram_on_the_gpu_equals_the_cpu_reference(
        img in image(),
        bins_seed in any::<u32>(),
        alpha in any::<bool>(),
    ) {
        // Any bin count the depth allows, with the ends (1, the maximum) likely.
        let max = max_bins(img.bit_depth());
        let bins = match bins_seed % 4 {
            0 => 1,
            1 => max,
            _ => 1 + bins_seed % max,
        };
        let channels = Channels::of(img.channels, alpha);
        let mut hg = HistogramGpu::new(shared_gpu(), bins);
        let got = hg.histogram(&img, channels, &mut Timings::default()).unwrap();
        let want = histogram::reference(&img, channels, bins);
        prop_assert_eq!(got.pixels, want.pixels);
        for c in 0..channels.count() as usize {
            prop_assert!(
                got.channel(c) == want.channel(c),
                "{} {bins} bins {:?}: channel {c} differs",
                img.describe(),
                channels
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    // Issue 24: images of every format whose end can be found, one after another with any
    // blank space between, split back into exactly those images (BMP, WebP and TIFF frames
    // used to run to the end of the stream).
    #[test]
    fn a_stream_of_images_splits_back_into_them(
        parts in prop::collection::vec((0usize..6, 1u32..9, 1u32..9, any::<u32>(), 0usize..4), 1..6)
    ) {
        use gpukit::io::image::stream::FrameStream;
        use image::ImageFormat as F;
        const FORMATS: [F; 6] = [F::Png, F::Jpeg, F::Bmp, F::WebP, F::Tiff, F::Pnm];
        const BLANK: [&[u8]; 4] = [b"", b"\n", b"\r\n\n", b" \t\n"];
        let mut stream = Vec::new();
        let mut frames = Vec::new();
        for (f, w, h, seed, blank) in parts {
            let mut next = crate::util::xorshift(seed);
            let img = Image::new_u8(w, h, 3, (0..w * h * 3).map(|_| next() as u8).collect());
            let mut bytes = Vec::new();
            gpukit::io::image::encode(img, FORMATS[f], &mut bytes).unwrap();
            stream.extend_from_slice(BLANK[blank]);
            stream.extend_from_slice(&bytes);
            frames.push(bytes);
        }
        let mut s = FrameStream::new(&stream[..], 1 << 24);
        let got: Vec<Vec<u8>> = std::iter::from_fn(|| s.next_frame().unwrap()).collect();
        prop_assert_eq!(got, frames);
    }
}
