//! Frame streams written into a pipe without the pipe's copy.
//!
//! `write(2)` into a pipe copies every byte into pages the pipe allocates, and the writer
//! copies only while the pipe has room: with a reader that copies the bytes out again, the
//! two copies take turns, and a 4K stream moves at about 2.6 GB/s (docs/BENCHMARKS.md, call
//! BV: a filter that only copies 1 MiB at a time reached 210 frames/s, one that splices the
//! file's pages into the pipe 502). [`GiftPipe`] hands the pipe pages instead
//! (`vmsplice(2)`): a large write is copied once into a page-aligned buffer of its own, the
//! buffer's pages go into the pipe by reference, and then leave this process for good
//! (`madvise(MADV_DONTNEED)`: the buffer's range gets fresh zero pages on the next write).
//! The reader copies straight out of the pages it was given, at its own pace.
//!
//! The pages are never written again once given: a reader that moves them on by reference
//! (`splice` into another pipe, `tee`) keeps exactly the bytes that were written, however long
//! it holds them. That is why the buffer is discarded rather than reused in place, and why
//! this is not done from buffers the caller keeps.

use std::fs::File;
use std::io::{self, IoSlice, Write};

/// Writes at least this large go by reference; smaller ones are copied as `write(2)` does
/// (a frame's header, small frames): below it the page faults of a fresh buffer cost more
/// than the copy they save.
const GIFT_MIN: usize = 256 << 10;

/// The staging buffer's alignment and the unit it grows in: 2 MiB, so that its whole range
/// can be backed by transparent huge pages (fewer faults for the fresh pages of each write).
const STAGING_ALIGN: usize = 2 << 20;

/// A pipe written by reference where Linux allows it (see the module's documentation), and
/// by `write(2)` for small writes or where `vmsplice` is refused.
pub struct GiftPipe {
    file: File,
    staging: Staging,
    /// `vmsplice` refused this pipe (an emulated kernel, a non-blocking descriptor): plain
    /// writes from then on.
    plain: bool,
}

impl GiftPipe {
    /// `file`, a pipe or FIFO opened for writing.
    pub fn new(file: File) -> GiftPipe {
        GiftPipe {
            file,
            staging: Staging::default(),
            plain: false,
        }
    }

    /// Copies `bufs` into the staging buffer, hands its pages to the pipe and discards them.
    /// `None` where `vmsplice` refused before a byte was given (the caller writes instead).
    fn gift(&mut self, bufs: &[IoSlice<'_>], total: usize) -> Option<io::Result<usize>> {
        let fd = self.fd();
        let staging = self.staging.take(total);
        let mut at = 0;
        for b in bufs {
            staging[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        let mut given = 0;
        let result = loop {
            if given == total {
                break Ok(total);
            }
            let iov = libc::iovec {
                iov_base: staging[given..].as_ptr() as *mut libc::c_void,
                iov_len: total - given,
            };
            // SAFETY: `iov` describes bytes inside `staging`, which stays mapped for the call.
            // The pipe takes references to their pages; they are dropped from this process
            // below (`discard`) before the buffer is written again.
            let n = unsafe { libc::vmsplice(fd, &iov, 1, 0) };
            if n >= 0 {
                given += n as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                // Refused: an emulated kernel or a non-blocking pipe. What is left goes by
                // `write`, as every later write does.
                Some(libc::EINVAL | libc::ENOSYS | libc::EAGAIN | libc::EFAULT) => {
                    self.plain = true;
                    if given == 0 {
                        break Err(e);
                    }
                    break self.file.write_all(&staging[given..total]).map(|()| total);
                }
                _ => break Err(e),
            }
        };
        let refused = given == 0 && self.plain;
        self.staging.discard();
        (!refused).then_some(result)
    }

    fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }
}

impl Write for GiftPipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if !self.plain && total >= GIFT_MIN {
            if let Some(done) = self.gift(bufs, total) {
                return done;
            }
        }
        self.file.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A page-aligned buffer whose pages are given away after each use.
#[derive(Default)]
struct Staging {
    ptr: Option<std::ptr::NonNull<u8>>,
    cap: usize,
}

// SAFETY: the buffer is plain memory owned by this value alone.
unsafe impl Send for Staging {}

impl Staging {
    /// The first `n` bytes of the buffer, grown to hold them (contents unspecified).
    fn take(&mut self, n: usize) -> &mut [u8] {
        if n > self.cap {
            self.free();
            let cap = n.next_multiple_of(STAGING_ALIGN);
            let layout = std::alloc::Layout::from_size_align(cap, STAGING_ALIGN)
                .expect("a frame's size fits a layout");
            // SAFETY: `layout` has a non-zero size (n >= GIFT_MIN). Zeroed: once, so that
            // every byte is initialised (a discarded page reads as zeros after).
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            let Some(ptr) = std::ptr::NonNull::new(ptr) else {
                std::alloc::handle_alloc_error(layout)
            };
            // SAFETY: the range is the allocation just made; the advice changes how its pages
            // are backed, never their contents.
            unsafe {
                libc::madvise(ptr.as_ptr().cast(), cap, libc::MADV_HUGEPAGE);
            }
            self.ptr = Some(ptr);
            self.cap = cap;
        }
        match self.ptr {
            // SAFETY: `ptr` holds `cap >= n` initialised bytes owned by this value.
            Some(ptr) => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), n) },
            None => &mut [],
        }
    }

    /// Drops the buffer's pages from this process (the pipe keeps those it was given); its
    /// range reads as zeros again and gets fresh pages when written.
    fn discard(&mut self) {
        if let Some(ptr) = self.ptr {
            // SAFETY: the range is this value's whole allocation, page-aligned (2 MiB) and a
            // whole number of pages long; nothing borrows it now. Private anonymous memory
            // reads as zero-fill-on-demand pages after MADV_DONTNEED.
            let r = unsafe { libc::madvise(ptr.as_ptr().cast(), self.cap, libc::MADV_DONTNEED) };
            if r != 0 {
                // The pages could not be dropped, so they must never be written again: the
                // next write gets a new buffer, and this one is left to the pipe (leaked).
                self.ptr = None;
                self.cap = 0;
            }
        }
    }

    fn free(&mut self) {
        if let Some(ptr) = self.ptr.take() {
            let layout = std::alloc::Layout::from_size_align(self.cap, STAGING_ALIGN)
                .expect("the layout it was made with");
            // SAFETY: allocated above with this layout. Pages the pipe still holds stay alive
            // through its references.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        }
        self.cap = 0;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are fresh and owned from here on.
        unsafe {
            (
                File::from(OwnedFd::from_raw_fd(fds[0])),
                File::from(OwnedFd::from_raw_fd(fds[1])),
            )
        }
    }

    fn widen(f: &File, bytes: i32) {
        // SAFETY: plain integers on an open descriptor.
        let got = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) };
        assert!(got >= bytes, "F_SETPIPE_SZ: {got}");
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn large_and_small_writes_arrive_whole_and_in_order() {
        let (mut r, w) = pipe();
        let frames = [
            pattern(5, 1),
            pattern(GIFT_MIN, 2),
            pattern(3 * STAGING_ALIGN + 12345, 3),
            pattern(100, 4),
            pattern(GIFT_MIN + 1, 5),
        ];
        let want: Vec<u8> = frames.concat();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            got
        });
        let mut g = GiftPipe::new(w);
        for f in &frames {
            // A frame's header and its planes in one vectored write, as VideoWriter does.
            let (head, body) = f.split_at(f.len().min(6));
            let mut bufs = [IoSlice::new(head), IoSlice::new(body)];
            let mut left = &mut bufs[..];
            while !left.is_empty() {
                let n = g.write_vectored(left).unwrap();
                IoSlice::advance_slices(&mut left, n);
            }
        }
        assert!(!g.plain, "vmsplice was refused on a plain pipe");
        drop(g);
        assert!(reader.join().unwrap() == want);
    }

    // A reader that moves the pages on by reference (splice into a second pipe) and reads
    // them only after later writes: it must get the bytes as they were written. Were the
    // staging buffer reused in place, the second write would show through the first.
    #[test]
    fn pages_moved_on_by_reference_keep_what_was_written() {
        let (r1, w1) = pipe();
        let (mut r2, w2) = pipe();
        widen(&w1, 1 << 20);
        widen(&w2, 1 << 20);
        let (a, b) = (pattern(GIFT_MIN, 7), pattern(GIFT_MIN, 99));
        let mut g = GiftPipe::new(w1);
        g.write_all(&a).unwrap();
        // Both writes fit the widened pipe, so neither waits for a reader.
        g.write_all(&b).unwrap();
        assert!(!g.plain);
        let mut moved = 0;
        while moved < a.len() {
            // SAFETY: open pipe descriptors; no offsets.
            let n = unsafe {
                libc::splice(
                    r1.as_raw_fd(),
                    std::ptr::null_mut(),
                    w2.as_raw_fd(),
                    std::ptr::null_mut(),
                    a.len() - moved,
                    0,
                )
            };
            assert!(n > 0, "splice: {}", io::Error::last_os_error());
            moved += n as usize;
        }
        // A third write through the same staging buffer, after the first's pages moved on.
        g.write_all(&pattern(GIFT_MIN, 200)).unwrap();
        drop(w2);
        let mut got = Vec::new();
        r2.read_to_end(&mut got).unwrap();
        assert!(
            got == a,
            "the first write's bytes changed in the second pipe"
        );
        drop(r1);
    }
}
