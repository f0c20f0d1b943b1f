//! Large buffers fresh from the allocator, for the batch paths' per-image buffers (the image
//! pool of io/image/recycle.rs, the JPEG encoder's scratch): zeroed by the kernel, not by a
//! pass over them, and on huge pages where Linux gives them.

use std::alloc::{handle_alloc_error, Layout};

/// A fresh buffer of `n` zero elements from the allocator's zeroed memory (for a large one,
/// pages fresh from the kernel, not yet written), its whole 2 MiB pages backed by huge pages
/// where the system allows it ([`advise_huge`]). Out of memory aborts, as `vec!` does.
pub(crate) fn fresh<T: bytemuck::Zeroable + Copy>(n: usize) -> Vec<T> {
    let v = bytemuck::try_zeroed_vec(n).unwrap_or_else(|()| {
        handle_alloc_error(Layout::array::<T>(n).unwrap_or_else(|_| Layout::new::<T>()))
    });
    advise_huge(&v);
    v
}

/// Asks Linux to back the whole 2 MiB pages inside a buffer not yet written (fresh from the
/// allocator) with transparent huge pages (`madvise(MADV_HUGEPAGE)`; where the system's THP
/// mode is `madvise`, the usual default, a process gets them only where it asks). The
/// allocator's large blocks are not 2 MiB-aligned, so a 1080p RGB image (6.2 MB) gets two
/// huge pages and the rest in 4 KiB ones: a batch's page faults halve, and its exit (the
/// kernel freeing every page) takes half the time (docs/BENCHMARKS.md, call BC). Best
/// effort: nothing changes where the system says no, and the advice never changes contents.
/// Where THP's `defrag` setting asks for it, a fault may first compact memory.
fn advise_huge<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let (start, len) = (v.as_ptr() as usize, std::mem::size_of_val(v));
        let first = start.next_multiple_of(HUGE);
        let end = (start + len) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside `v`'s allocation; the advice changes how its pages
            // are backed, never their contents.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_buffers_are_zero_at_every_size() {
        for n in [0, 1, 4095, 5 << 20] {
            let v: Vec<u8> = fresh(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&b| b == 0), "{n} bytes");
        }
        let blocks: Vec<[i16; 64]> = fresh(40_000);
        assert!(blocks.iter().all(|b| b.iter().all(|&c| c == 0)));
    }
}
