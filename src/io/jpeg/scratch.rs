//! Buffers the encoder keeps between images on one thread: a batch encodes many images of
//! one size, and fresh allocations that large cost page faults (measured: a quarter of the
//! encode time). Every buffer handed out is written whole before it is read.

use std::cell::RefCell;

/// At most this many buffers of each kind wait on a thread.
const KEEP: usize = 8;

thread_local! {
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static BLOCKS: RefCell<Vec<Vec<[i16; 64]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `n` bytes (contents unspecified: the caller writes every one).
pub(super) fn bytes(n: usize) -> Vec<u8> {
    match BYTES.with(|b| b.borrow_mut().pop()) {
        Some(mut v) => {
            v.resize(n, 0);
            v
        }
        // Zeroed by the allocator (fresh pages from the kernel), not by a pass over them.
        None => vec![0; n],
    }
}

pub(super) fn give_bytes(v: Vec<u8>) {
    BYTES.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < KEEP {
            b.push(v);
        }
    });
}

/// `n` blocks (contents unspecified: the caller writes every one).
pub(super) fn blocks(n: usize) -> Vec<[i16; 64]> {
    match BLOCKS.with(|b| b.borrow_mut().pop()) {
        Some(mut v) => {
            v.resize(n, [0; 64]);
            v
        }
        None => vec![[0; 64]; n],
    }
}

pub(super) fn give_blocks(v: Vec<[i16; 64]>) {
    BLOCKS.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < KEEP {
            b.push(v);
        }
    });
}
