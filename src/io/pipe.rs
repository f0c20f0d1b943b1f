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
//! The reader copies straight out of the pages it was given, at its own pace, while a thread
//! of this writer's hands them over and the caller copies the next write into a second
//! buffer.
//!
//! The pages are never written again once given: a reader that moves them on by reference
//! (`splice` into another pipe, `tee`) keeps exactly the bytes that were written, however long
//! it holds them. That is why the buffer is discarded rather than reused in place, and why
//! this is not done from buffers the caller keeps.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::sync::{mpsc, Arc};

/// Writes at least this large go by reference; smaller ones are copied as `write(2)` does
/// (a frame's header, small frames): below it the page faults of a fresh buffer cost more
/// than the copy they save.
const GIFT_MIN: usize = 256 << 10;

/// The staging buffer's alignment and the unit it grows in: 2 MiB, so that its whole range
/// can be backed by transparent huge pages (fewer faults for the fresh pages of each write).
const STAGING_ALIGN: usize = 2 << 20;

/// Staging buffers: one being handed to the pipe while the next write fills the other.
const BUFFERS: usize = 2;

/// A pipe written by reference where Linux allows it (see the module's documentation), and
/// by `write(2)` for small writes or where `vmsplice` is refused.
///
/// A large write returns once its bytes are copied; a thread of the pipe's own hands them
/// over, in order with every other write. [`Write::flush`] does not wait for it (the bytes
/// are on their way, not held back), [`GiftPipe::finish`] does and gives the first error,
/// and dropping the pipe waits too.
pub struct GiftPipe {
    file: Arc<File>,
    splicer: Option<Splicer>,
    /// Buffers ready to be filled, and how many there are in all.
    free: Vec<Staging>,
    made: usize,
    /// Buffers with the splicer.
    queued: usize,
    /// The first error the pipe gave; every later call gives it again.
    failed: Option<io::Error>,
}

/// The thread that hands buffers to the pipe, and the channels to and from it.
struct Splicer {
    to: mpsc::SyncSender<(Staging, usize)>,
    back: mpsc::Receiver<(Staging, io::Result<()>)>,
    thread: std::thread::JoinHandle<()>,
}

impl GiftPipe {
    /// `file`, a pipe or FIFO opened for writing.
    pub fn new(file: File) -> GiftPipe {
        GiftPipe {
            file: Arc::new(file),
            splicer: None,
            free: Vec::new(),
            made: 0,
            queued: 0,
            failed: None,
        }
    }

    /// Waits until everything written has reached the pipe; the first error met, if any.
    pub fn finish(&mut self) -> io::Result<()> {
        self.drain()?;
        if let Some(s) = self.splicer.take() {
            drop(s.to);
            let _ = s.thread.join();
        }
        self.check()
    }

    /// The first error met, again.
    fn check(&self) -> io::Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(e) => Err(match e.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(e.kind(), e.to_string()),
            }),
        }
    }

    /// Takes one buffer back from the splicer (waiting for it with `wait`), noting its error.
    /// Whether one came back.
    fn take_back(&mut self, wait: bool) -> bool {
        let Some(s) = &self.splicer else {
            return false;
        };
        let back = match wait {
            true => s.back.recv().ok(),
            false => s.back.try_recv().ok(),
        };
        let Some((staging, result)) = back else {
            return false;
        };
        self.queued -= 1;
        self.free.push(staging);
        if let Err(e) = result {
            self.failed.get_or_insert(e);
        }
        true
    }

    /// Waits until the splicer has handed over everything queued.
    fn drain(&mut self) -> io::Result<()> {
        while self.queued > 0 && self.take_back(true) {}
        self.check()
    }

    /// A buffer to fill: a free one, a new one while fewer than [`BUFFERS`] exist, else the
    /// next one the splicer gives back.
    fn staging(&mut self) -> io::Result<Staging> {
        while self.free.is_empty() && self.made == BUFFERS && self.take_back(true) {}
        self.check()?;
        Ok(self.free.pop().unwrap_or_else(|| {
            self.made += 1;
            Staging::default()
        }))
    }

    /// The splicer, started on the first large write; `None` where no thread can start.
    fn splicer(&mut self) -> Option<&Splicer> {
        if self.splicer.is_none() {
            let (to, rx) = mpsc::sync_channel::<(Staging, usize)>(BUFFERS);
            let (tx, back) = mpsc::channel();
            let file = self.file.clone();
            let thread = std::thread::Builder::new()
                .name("gpukit-pipe".into())
                .spawn(move || {
                    for (mut staging, n) in rx {
                        let result = give(&file, staging.take(n));
                        staging.discard();
                        if tx.send((staging, result)).is_err() {
                            return;
                        }
                    }
                })
                .ok()?;
            self.splicer = Some(Splicer { to, back, thread });
        }
        self.splicer.as_ref()
    }

    /// Copies `bufs` into a staging buffer and queues it for the splicer.
    fn gift(&mut self, bufs: &[IoSlice<'_>], total: usize) -> io::Result<usize> {
        let mut staging = self.staging()?;
        copy_in(staging.take(total), bufs);
        let Some(s) = self.splicer() else {
            // No thread: handed over here.
            let result = give(&self.file, staging.take(total));
            staging.discard();
            self.free.push(staging);
            return result.map(|()| total);
        };
        // The splicer ends only once the sender is dropped, so the send is taken.
        let _ = s.to.send((staging, total));
        self.queued += 1;
        Ok(total)
    }
}

/// Copies `bufs`, one after another, into `into` (exactly as long), 2 MiB pieces side by
/// side on the cores: a fresh page's fault and its copy are most of a large write's time on
/// the caller's thread (a 4K frame took 3.2-3.7 ms on one, docs/BENCHMARKS.md, call BX).
fn copy_in(into: &mut [u8], bufs: &[IoSlice<'_>]) {
    use rayon::prelude::*;
    into.par_chunks_mut(STAGING_ALIGN)
        .enumerate()
        .for_each(|(i, piece)| {
            // The piece's first byte in the writes' bytes taken as one run.
            let mut skip = i * STAGING_ALIGN;
            let mut at = 0;
            for b in bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                let n = (b.len() - skip).min(piece.len() - at);
                piece[at..at + n].copy_from_slice(&b[skip..skip + n]);
                at += n;
                skip = 0;
                if at == piece.len() {
                    break;
                }
            }
        });
}

/// Hands `bytes` to the pipe by reference; where `vmsplice` refuses (an emulated kernel, a
/// non-blocking pipe), what is left goes by `write(2)`.
fn give(file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut given = 0;
    while given < bytes.len() {
        let iov = libc::iovec {
            iov_base: bytes[given..].as_ptr() as *mut libc::c_void,
            iov_len: bytes.len() - given,
        };
        // SAFETY: `iov` describes bytes of a staging buffer that stays mapped for the call.
        // The pipe takes references to their pages; the caller drops them from this process
        // (`Staging::discard`) before the buffer is written again.
        let n = unsafe { libc::vmsplice(file.as_raw_fd(), &iov, 1, 0) };
        if n >= 0 {
            given += n as usize;
            #[cfg(test)]
            tests::GIFTED.fetch_add(n as usize, std::sync::atomic::Ordering::Relaxed);
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EINVAL | libc::ENOSYS | libc::EAGAIN | libc::EFAULT) => {
                return (&*file).write_all(&bytes[given..]);
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

impl Write for GiftPipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total >= GIFT_MIN {
            return self.gift(bufs, total);
        }
        // In order after every large write queued.
        self.drain()?;
        (&*self.file).write_vectored(bufs)
    }

    /// Gives an error already met; does not wait for the large writes on their way.
    fn flush(&mut self) -> io::Result<()> {
        while self.take_back(false) {}
        self.check()
    }
}

impl Drop for GiftPipe {
    fn drop(&mut self) {
        let _ = self.finish();
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Bytes handed to pipes by `vmsplice` in this process's tests.
    pub(super) static GIFTED: AtomicUsize = AtomicUsize::new(0);

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
        g.finish().unwrap();
        drop(g);
        assert!(reader.join().unwrap() == want);
        assert!(
            GIFTED.load(Ordering::Relaxed) > 0,
            "vmsplice was refused on a plain pipe"
        );
    }

    #[test]
    fn copies_in_pieces_keep_every_byte_in_place() {
        let parts = [
            pattern(6, 1),
            pattern(STAGING_ALIGN - 6, 2),
            pattern(1, 3),
            pattern(2 * STAGING_ALIGN + 7, 4),
            pattern(0, 5),
            pattern(STAGING_ALIGN / 2, 6),
        ];
        let want = parts.concat();
        let bufs: Vec<IoSlice> = parts.iter().map(|p| IoSlice::new(p)).collect();
        let mut into = vec![0u8; want.len()];
        copy_in(&mut into, &bufs);
        assert!(into == want);
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
        g.finish().unwrap();
        drop(r1);
    }

    // A reader that stops early: a later write or the finish says the pipe broke (which the
    // command line treats as a quiet end), and nothing waits for ever.
    #[test]
    fn a_reader_that_stops_ends_the_writes() {
        let (r, w) = pipe();
        drop(r);
        let mut g = GiftPipe::new(w);
        let frame = pattern(GIFT_MIN, 1);
        let mut failed = None;
        for _ in 0..8 {
            if let Err(e) = g.write_all(&frame).and_then(|()| g.flush()) {
                failed = Some(e);
                break;
            }
        }
        let e = failed.or_else(|| g.finish().err()).expect("an error");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{e}");
        assert_eq!(g.finish().unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
