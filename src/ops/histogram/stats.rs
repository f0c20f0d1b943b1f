//! Per-channel statistics of a histogram's counts.

use serde::Serialize;

/// One channel's statistics, in bins (with 256 bins on an 8-bit image a bin is a value).
/// `None` (null in JSON) when nothing was counted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelStats {
    /// The lowest and highest bin with a count.
    pub min: Option<u32>,
    pub max: Option<u32>,
    /// The mean bin: sum of bin * count over the total count.
    pub mean: Option<f64>,
    /// The 50th, 1st and 99th percentiles: the lowest bin at which the running count
    /// reaches ceil(p% of the total) (at least 1).
    pub median: Option<u32>,
    pub p1: Option<u32>,
    pub p99: Option<u32>,
}

/// The statistics of one channel's counts.
pub fn channel_stats(counts: &[u64]) -> ChannelStats {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return ChannelStats {
            min: None,
            max: None,
            mean: None,
            median: None,
            p1: None,
            p99: None,
        };
    }
    let min = counts.iter().position(|&c| c > 0).map(|b| b as u32);
    let max = counts.iter().rposition(|&c| c > 0).map(|b| b as u32);
    let weighted: u128 = counts
        .iter()
        .enumerate()
        .map(|(b, &c)| b as u128 * c as u128)
        .sum();
    let percentile = |p: u128| {
        let rank = (p * total as u128).div_ceil(100).max(1);
        let mut seen = 0u128;
        counts.iter().position(|&c| {
            seen += c as u128;
            seen >= rank
        })
    };
    ChannelStats {
        min,
        max,
        mean: Some(weighted as f64 / total as f64),
        median: percentile(50).map(|b| b as u32),
        p1: percentile(1).map(|b| b as u32),
        p99: percentile(99).map(|b| b as u32),
    }
}
