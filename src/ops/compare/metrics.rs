//! The metrics derived from a comparison's exact counts: MAE, RMSE, PSNR, with SSIM beside.

use serde::Serialize;

use super::{channel_names, ignored_in, ChannelSums, Counts, Rect};
use crate::io::image::Header;

/// One channel's metrics, in sample units (0..255 or 0..65535).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelMetrics {
    pub name: &'static str,
    /// Compared pixels where this channel differs.
    pub differing: u64,
    pub max_abs_diff: u32,
    pub mae: f64,
    pub rmse: f64,
    /// 10 log10(max² / MSE); null when the channel is identical (infinite).
    pub psnr: Option<f64>,
    /// Null unless SSIM was asked for.
    pub ssim: Option<f64>,
}

/// The metrics of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub pixels: u64,
    /// Pixels compared: all but the ignored ones.
    pub compared: u64,
    pub ignored: u64,
    /// Compared pixels that differ (by the threshold), anti-aliased ones excepted.
    pub differing: u64,
    /// `differing` / `compared` (0 when nothing was compared).
    pub differing_fraction: f64,
    pub antialiased: u64,
    /// Pixels only one image has (different sizes with `--allow-size-change`), not ignored:
    /// counted in `pixels`, `compared` and `differing`.
    pub outside: u64,
    pub max_abs_diff: u32,
    pub mae: f64,
    pub rmse: f64,
    pub psnr: Option<f64>,
    pub ssim: Option<f64>,
    pub channels: Vec<ChannelMetrics>,
}

/// 10 log10(max² / MSE), `None` for MSE 0.
fn psnr(max_value: u32, sum_sq: u128, samples: u64) -> Option<f64> {
    (sum_sq > 0).then(|| {
        let mse = sum_sq as f64 / samples as f64;
        10.0 * (f64::from(max_value).powi(2) / mse).log10()
    })
}

/// The metrics of `counts` for images of `channels` channels whose largest sample is
/// `max_value`, with SSIM (overall, per channel) when computed.
pub fn metrics(
    counts: &Counts,
    channels: u8,
    max_value: u32,
    ssim: Option<(f64, Vec<f64>)>,
) -> Metrics {
    let compared = counts.pixels - counts.ignored;
    // The sample sums cover the pixels both images have.
    let common = compared - counts.outside;
    let names = channel_names(channels);
    let n = common.max(1);
    let per: Vec<ChannelMetrics> = counts
        .channels
        .iter()
        .enumerate()
        .map(|(ch, s)| ChannelMetrics {
            name: names[ch],
            differing: s.differing,
            max_abs_diff: s.max_abs,
            mae: s.sum_abs as f64 / n as f64,
            rmse: (s.sum_sq as f64 / n as f64).sqrt(),
            psnr: if common == 0 {
                None
            } else {
                psnr(max_value, s.sum_sq, common)
            },
            ssim: ssim.as_ref().map(|(_, v)| v[ch]),
        })
        .collect();
    let samples = n * counts.channels.len() as u64;
    let sum_abs: u64 = counts.channels.iter().map(|s| s.sum_abs).sum();
    let sum_sq: u128 = counts.channels.iter().map(|s| s.sum_sq).sum();
    Metrics {
        pixels: counts.pixels,
        compared,
        ignored: counts.ignored,
        differing: counts.differing,
        differing_fraction: if compared == 0 {
            0.0
        } else {
            counts.differing as f64 / compared as f64
        },
        antialiased: counts.antialiased,
        outside: counts.outside,
        max_abs_diff: counts.channels.iter().map(|s| s.max_abs).max().unwrap_or(0),
        mae: sum_abs as f64 / samples as f64,
        rmse: (sum_sq as f64 / samples as f64).sqrt(),
        psnr: if common == 0 {
            None
        } else {
            psnr(max_value, sum_sq, samples)
        },
        ssim: ssim.map(|(s, _)| s),
        channels: per,
    }
}

/// The metrics of two byte-identical images of `header`'s size and layout, known without
/// decoding them: nothing differs, and SSIM (when `ssim`) is 1 if any pixel is compared.
pub fn identical(header: &Header, ignore: &[Rect], ssim: bool) -> Metrics {
    let (w, h, c) = (header.width, header.height, header.channels);
    let counts = Counts {
        pixels: u64::from(w) * u64::from(h),
        ignored: ignored_in(ignore, 0..w, 0..h),
        differing: 0,
        antialiased: 0,
        outside: 0,
        channels: vec![ChannelSums::default(); usize::from(c)],
    };
    let compared = counts.pixels > counts.ignored;
    let ssim = (ssim && compared).then(|| (1.0, vec![1.0; usize::from(c)]));
    metrics(&counts, c, (1u32 << header.bit_depth) - 1, ssim)
}
