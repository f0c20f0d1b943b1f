//! Image-sized 8-bit sample buffers handed back once an image is written, for the next image
//! of a batch to be decoded or made into: a fresh buffer that large is faulted in page by
//! page and zeroed by the kernel, and freed again with a TLB shootdown, a fifth of the core
//! time of a 1080p JPEG blur (docs/BENCHMARKS.md, "The JPEG batch's core time"). A buffer
//! may be given back on one thread and taken on another (decoded on one, written on a third),
//! so the pool is shared. Nothing is given back outside the batches, so elsewhere [`bytes`]
//! is a plain allocation.

use std::sync::Mutex;

use super::Samples;

/// At most this many bytes wait in the pool (41 RGB 1080p images); a buffer past it is freed.
const KEEP_BYTES: usize = 256 << 20;

/// The batches' pool.
static POOL: Pool = Pool::new(KEEP_BYTES);

/// Buffers waiting, the most recently given last, at most `limit` bytes of them.
struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
    limit: usize,
}

/// A buffer of `n` bytes: a waiting one whose capacity holds `n` (its contents are what it
/// held: the caller writes every byte before reading any), else a fresh zeroed one.
pub fn bytes(n: usize) -> Vec<u8> {
    POOL.bytes(n)
}

/// A buffer of `n` zero bytes, handed back or fresh.
pub fn zeroed(n: usize) -> Vec<u8> {
    POOL.zeroed(n)
}

/// Hands `samples` back for a later [`bytes`] (8-bit samples only; others are freed).
pub fn give(samples: Samples) {
    POOL.give(samples)
}

impl Pool {
    const fn new(limit: usize) -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
            limit,
        }
    }

    fn bytes(&self, n: usize) -> Vec<u8> {
        self.waiting(n).unwrap_or_else(|| crate::mem::fresh(n))
    }

    fn zeroed(&self, n: usize) -> Vec<u8> {
        match self.waiting(n) {
            Some(mut v) => {
                v.fill(0);
                v
            }
            None => crate::mem::fresh(n),
        }
    }

    /// A waiting buffer whose capacity holds `n`, at length `n`.
    fn waiting(&self, n: usize) -> Option<Vec<u8>> {
        let mut v = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            // The smallest that fits, so a batch of mixed sizes keeps its large buffers for
            // its large images.
            let best = (0..free.len())
                .filter(|&i| free[i].capacity() >= n)
                .min_by_key(|&i| free[i].capacity())?;
            free.swap_remove(best)
        };
        // Within the capacity: no allocation; only samples past the old length are zeroed.
        v.truncate(n);
        v.resize(n, 0);
        Some(v)
    }

    fn give(&self, samples: Samples) {
        let Samples::U8(v) = samples else {
            return;
        };
        if v.capacity() == 0 {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        keep(&mut free, v, self.limit);
    }
}

/// Puts `v` among `free`, freeing the oldest while they would hold more than `limit` bytes.
fn keep(free: &mut Vec<Vec<u8>>, v: Vec<u8>, limit: usize) {
    let mut held: usize = free.iter().map(Vec::capacity).sum();
    while held + v.capacity() > limit && !free.is_empty() {
        held -= free.remove(0).capacity();
    }
    if held + v.capacity() <= limit {
        free.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_at_the_asked_length() {
        // A pool of the test's own: the batches' one is shared with other tests' threads.
        let pool = Pool::new(KEEP_BYTES);
        let n = 1_234_567;
        let v = vec![7u8; n];
        let at = v.as_ptr();
        pool.give(Samples::U8(v));
        let got = pool.bytes(n - 10);
        assert_eq!(got.len(), n - 10);
        assert_eq!(got.as_ptr(), at, "the same allocation");
        // Grown past its length: the new samples are zero, the old ones kept.
        pool.give(Samples::U8(got));
        let got = pool.bytes(n);
        assert_eq!(got.as_ptr(), at);
        assert_eq!(&got[n - 11..], &[7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Taken zeroed: the same allocation, every sample zero.
        pool.give(Samples::U8(got));
        let got = pool.zeroed(n - 1);
        assert_eq!(got.as_ptr(), at);
        assert!(got.iter().all(|&b| b == 0));
        // Nothing waits now: a fresh buffer.
        let fresh = pool.bytes(n);
        assert_ne!(fresh.as_ptr(), at);
    }

    #[test]
    fn the_oldest_are_freed_past_the_limit() {
        let mut free = Vec::new();
        for (i, n) in [40usize, 30, 20, 50].into_iter().enumerate() {
            keep(&mut free, Vec::with_capacity(n + i * 1000), 2100);
        }
        // 2020 pushes out 40 and 1030; 3050 pushes out 2020 and is past the limit alone.
        assert!(
            free.is_empty(),
            "{:?}",
            free.iter().map(Vec::capacity).collect::<Vec<_>>()
        );
        for n in [500usize, 600, 700, 800] {
            keep(&mut free, Vec::with_capacity(n), 2100);
        }
        let kept: Vec<usize> = free.iter().map(Vec::capacity).collect();
        assert_eq!(kept, [600, 700, 800]);
    }
}
