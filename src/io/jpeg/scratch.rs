//! Buffers the encoder keeps between images on one thread: a batch encodes many images of
//! one size, and fresh allocations that large cost page faults (measured: a quarter of the
//! encode time). Every buffer handed out is written whole before it is read.

use std::cell::RefCell;

use crate::mem;

/// At most this many buffers of each kind wait on a thread.
const KEEP: usize = 8;

thread_local! {
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static BLOCKS: RefCell<Vec<Vec<[i16; 64]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `n` bytes (contents unspecified: the caller writes every one).
pub(super) fn bytes(n: usize) -> Vec<u8> {
    BYTES.with(|b| take(&mut b.borrow_mut(), n))
}

pub(super) fn give_bytes(v: Vec<u8>) {
    BYTES.with(|b| give(&mut b.borrow_mut(), v));
}

/// `n` blocks (contents unspecified: the caller writes every one).
pub(super) fn blocks(n: usize) -> Vec<[i16; 64]> {
    BLOCKS.with(|b| take(&mut b.borrow_mut(), n))
}

pub(super) fn give_blocks(v: Vec<[i16; 64]>) {
    BLOCKS.with(|b| give(&mut b.borrow_mut(), v));
}

/// The waiting buffer with the smallest capacity that holds `n` (a frame's luma and chroma
/// planes take buffers of different sizes: each gets one of its own size back, and no buffer
/// grows), at length `n`; else a fresh one, zeroed by the allocator (fresh pages from the
/// kernel, huge where the system allows), not by a pass over it.
fn take<T: bytemuck::Zeroable + Copy>(waiting: &mut Vec<Vec<T>>, n: usize) -> Vec<T> {
    let best = (0..waiting.len())
        .filter(|&i| waiting[i].capacity() >= n)
        .min_by_key(|&i| waiting[i].capacity());
    match best {
        Some(i) => {
            let mut v = waiting.swap_remove(i);
            v.resize(n, T::zeroed());
            v
        }
        None => mem::fresh(n),
    }
}

/// Keeps `v` for a later `take`; where `KEEP` wait already, `v` takes the place of the
/// smallest of them if it is larger (so a batch whose images grow keeps its large buffers,
/// not the first small ones).
fn give<T>(waiting: &mut Vec<Vec<T>>, v: Vec<T>) {
    if waiting.len() < KEEP {
        waiting.push(v);
        return;
    }
    let smallest = (0..waiting.len()).min_by_key(|&i| waiting[i].capacity());
    if let Some(i) = smallest.filter(|&i| waiting[i].capacity() < v.capacity()) {
        waiting[i] = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_size_takes_its_own_buffer_back_and_none_grows() {
        // A frame's luma blocks and its chroma blocks given back, then asked for again in
        // the same order: each request gets the buffer of its size, not the last given.
        let mut waiting = Vec::new();
        let (luma, chroma) = (mem::fresh::<[i16; 64]>(4096), mem::fresh(1024));
        let (l, c) = (luma.as_ptr(), chroma.as_ptr());
        give(&mut waiting, luma);
        give(&mut waiting, chroma);
        let luma = take(&mut waiting, 4096);
        let chroma = take(&mut waiting, 1024);
        assert_eq!((luma.as_ptr(), chroma.as_ptr()), (l, c));
        assert_eq!((luma.len(), chroma.len()), (4096, 1024));
        assert!(waiting.is_empty());
        // Nothing waiting: a fresh buffer, all zeros.
        let fresh: Vec<u8> = take(&mut Vec::new(), 5 << 20);
        assert_eq!(fresh.len(), 5 << 20);
        assert!(fresh.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_full_shelf_keeps_the_largest_buffers() {
        // KEEP small buffers wait; a larger one given back takes the smallest's place, and
        // the next request of its size gets it, not a fresh one.
        let mut waiting: Vec<Vec<u8>> = (0..KEEP).map(|i| vec![0; 100 + i]).collect();
        let large = vec![0u8; 1000];
        let at = large.as_ptr();
        give(&mut waiting, large);
        assert_eq!(waiting.len(), KEEP);
        assert!(
            waiting.iter().all(|v| v.capacity() != 100),
            "the smallest went"
        );
        let taken = take(&mut waiting, 1000);
        assert_eq!(taken.as_ptr(), at);
        // A buffer no larger than every waiting one is dropped.
        let mut waiting: Vec<Vec<u8>> = (0..KEEP).map(|_| vec![0; 500]).collect();
        give(&mut waiting, vec![0; 400]);
        assert!(waiting.iter().all(|v| v.capacity() == 500));
    }
}
