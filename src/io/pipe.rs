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
//! of this writer's hands them over and the caller copies the next writes into other
//! buffers.
//!
//! The pages are never written again once given: a reader that moves them on by reference
//! (`splice` into another pipe, `tee`) keeps exactly the bytes that were written, however long
//! it holds them. That is why the buffer is discarded rather than reused in place, and why
//! this is not done from buffers the caller keeps.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use super::output::again;

/// Where stdout is a pipe or FIFO left non-blocking by the process that started gpukit (a
/// parent that set `O_NONBLOCK` on a pipe it then handed down), writes into it fail with
/// EAGAIN whenever the reader falls behind: the stream would end with "Resource temporarily
/// unavailable", as `cat` does. So stdout is opened anew there (`/proc/self/fd/1`: a pipe's
/// new open file description, blocking) in place of the inherited one, whose flags the parent
/// shares and are left alone. Anything else (a file, a terminal, a socket) is left as it is.
/// For the binary's `main`, before anything is written; best effort.
pub fn own_blocking_stdout() {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, fstat, FileType, OFlags};
    let stdout = rustix::stdio::stdout();
    let Ok(stat) = fstat(stdout) else {
        return;
    };
    let nonblocking = fcntl_getfl(stdout).is_ok_and(|f| f.contains(OFlags::NONBLOCK));
    if FileType::from_raw_mode(stat.st_mode) != FileType::Fifo || !nonblocking {
        return;
    }
    // Opened non-blocking, as opening a pipe to write waits for a reader (for ever, where the
    // reader is gone: this fails with ENXIO instead), then made blocking: its own flag.
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(fresh) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/proc/self/fd/1")
    else {
        return;
    };
    let blocking = fcntl_getfl(&fresh).and_then(|f| fcntl_setfl(&fresh, f - OFlags::NONBLOCK));
    if blocking.is_err() {
        return;
    }
    // SAFETY: fd 1 is replaced by a descriptor of the same pipe; nothing else holds a borrow
    // of it this early in `main`, and `fresh` is closed after the copy.
    let _ = unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&fresh), 1) };
}

/// Writes at least this large go by reference; smaller ones are copied as `write(2)` does
/// (a frame's header, small planes and frames): below it the page faults of a fresh buffer
/// cost more than the copy they save.
const GIFT_MIN: usize = 256 << 10;

/// The staging buffers' alignment and the unit they grow in: 2 MiB, so that a buffer's whole
/// range can be backed by transparent huge pages (fewer faults for its fresh pages).
const STAGING_ALIGN: usize = 2 << 20;

/// Threads that copy a large write into its staging buffer, on machines of many cores.
const COPY_LANES: usize = 4;

/// Whether this machine has 8 cores or more.
fn many_cores() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 8)
}

/// Staging buffers: a 4:2:0 frame is three writes (the planes), so one frame can be copied
/// while the one before is handed over.
const BUFFERS: usize = 4;

/// A pipe written by reference where Linux allows it (see the module's documentation), and
/// by `write(2)` for small writes or where `vmsplice` is refused.
///
/// A large write returns once its bytes are copied, a small one once it is queued behind
/// them (or written, where nothing is queued); a thread of the pipe's own hands the queue
/// over in order. [`Write::flush`] does not wait for it (the bytes are on their way, not held
/// back), [`GiftPipe::finish`] does and gives the first error; dropping the pipe waits too.
/// After an error nothing more is written, and every later call gives the error.
pub struct GiftPipe {
    file: Arc<File>,
    splicer: Option<Splicer>,
    /// Buffers ready to be filled, in the order they came back, and how many there are in
    /// all.
    free: std::collections::VecDeque<Staging>,
    made: usize,
    /// Writes with the splicer, not yet handed back.
    queued: usize,
    /// The first error met.
    failed: Option<io::Error>,
    /// Bytes handed to the pipe by reference.
    given: Arc<AtomicU64>,
    /// Threads a large write is copied on: [`COPY_LANES`] on machines of 8 cores or more.
    lanes: usize,
}

/// A write queued for the splicer: a staging buffer's first bytes, or a small write's copy.
enum Item {
    Gift(Staging, usize),
    Plain(Vec<u8>),
}

/// The thread that hands the queue to the pipe, and the channels to and from it.
struct Splicer {
    to: mpsc::SyncSender<Item>,
    back: mpsc::Receiver<(Option<Staging>, io::Result<()>)>,
    thread: std::thread::JoinHandle<()>,
}

impl GiftPipe {
    /// Whether frame streams are written by reference here: as `GPUKIT_VMSPLICE` says (`1`
    /// on, `0` off), else where the machine has 8 cores or more. It costs more of the cores
    /// than `write(2)` (the fresh pages' faults and zeroing besides the one copy) and saves the
    /// reader's waiting on the writer: on many cores the pipe is what bounds a stream, on few
    /// the cores are (on 2 a 1080p stream ran a fifth slower, with rounds at half speed,
    /// docs/BENCHMARKS.md, call BZ).
    pub fn pays() -> bool {
        match std::env::var_os("GPUKIT_VMSPLICE")
            .as_deref()
            .and_then(|v| v.to_str())
        {
            Some("1") => true,
            Some("0") => false,
            _ => many_cores(),
        }
    }

    /// `file`, a pipe or FIFO opened for writing.
    pub fn new(file: File) -> GiftPipe {
        GiftPipe {
            file: Arc::new(file),
            splicer: None,
            free: Default::default(),
            made: 0,
            queued: 0,
            failed: None,
            given: Arc::default(),
            lanes: match many_cores() {
                true => COPY_LANES,
                false => 1,
            },
        }
    }

    /// Bytes handed to the pipe by reference so far (the rest went by `write(2)`).
    pub fn given(&self) -> u64 {
        self.given.load(Ordering::Relaxed)
    }

    /// Waits until everything written has reached the pipe; the first error met, if any.
    pub fn finish(&mut self) -> io::Result<()> {
        self.drain();
        if let Some(s) = self.splicer.take() {
            drop(s.to);
            if s.thread.join().is_err() {
                self.fail(io::Error::other("the pipe's writing thread failed"));
            }
        }
        self.check()
    }

    /// The first error met, again.
    fn check(&self) -> io::Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(e) => Err(again(e)),
        }
    }

    fn fail(&mut self, e: io::Error) {
        self.failed.get_or_insert(e);
    }

    /// Takes one write back from the splicer (waiting for it with `wait`), noting its error.
    /// Whether one came back.
    fn take_back(&mut self, wait: bool) -> bool {
        let Some(s) = &self.splicer else {
            return false;
        };
        let back = match wait {
            true => s.back.recv().map_err(|_| true),
            false => s
                .back
                .try_recv()
                .map_err(|e| e == mpsc::TryRecvError::Disconnected),
        };
        match back {
            Ok((staging, result)) => {
                self.queued -= 1;
                self.free.extend(staging);
                if let Err(e) = result {
                    self.fail(e);
                }
                true
            }
            // The thread is gone with writes still queued: they are lost, so say so.
            Err(true) if self.queued > 0 => {
                self.queued = 0;
                self.fail(io::Error::other("the pipe's writing thread ended early"));
                false
            }
            Err(_) => false,
        }
    }

    /// Waits until the splicer has handed over everything queued.
    fn drain(&mut self) {
        while self.queued > 0 && self.take_back(true) {}
    }

    /// A buffer to fill: a free one, a new one while fewer than [`BUFFERS`] exist, else the
    /// next one the splicer gives back.
    fn staging(&mut self) -> io::Result<Staging> {
        while self.free.is_empty() && self.made == BUFFERS && self.take_back(true) {}
        self.check()?;
        Ok(self.free.pop_front().unwrap_or_else(|| {
            self.made += 1;
            Staging::default()
        }))
    }

    /// The splicer, started on the first large write; `None` where no thread can start.
    fn splicer(&mut self) -> Option<&Splicer> {
        if self.splicer.is_none() {
            let (to, rx) = mpsc::sync_channel::<Item>(BUFFERS);
            let (tx, back) = mpsc::channel();
            let (file, given) = (self.file.clone(), self.given.clone());
            let thread = std::thread::Builder::new()
                .name("gpukit-pipe".into())
                .spawn(move || {
                    // After an error nothing more is written: a stream with a gap in it is
                    // worse than one cut short.
                    let mut failed = false;
                    for item in rx {
                        let (staging, result) = match item {
                            Item::Gift(mut staging, n) => {
                                let result = match failed {
                                    true => Err(io::Error::other("an earlier write failed")),
                                    false => give(&file, staging.take(n), &given),
                                };
                                staging.discard();
                                (Some(staging), result)
                            }
                            Item::Plain(_) if failed => {
                                (None, Err(io::Error::other("an earlier write failed")))
                            }
                            Item::Plain(bytes) => (None, (&*file).write_all(&bytes)),
                        };
                        failed |= result.is_err();
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

    /// Hands `item` to the splicer (which takes it unless it has ended).
    fn queue(&mut self, item: Item) -> io::Result<()> {
        let sent = self.splicer.as_ref().map(|s| s.to.send(item));
        match sent {
            Some(Ok(())) => {
                self.queued += 1;
                Ok(())
            }
            _ => {
                self.fail(io::Error::other("the pipe's writing thread ended early"));
                self.check()
            }
        }
    }

    /// Copies `bufs` into a staging buffer and queues it for the splicer.
    fn gift(&mut self, bufs: &[IoSlice<'_>], total: usize) -> io::Result<usize> {
        let mut staging = self.staging()?;
        copy_in(staging.take(total), bufs, self.lanes);
        if self.splicer().is_none() {
            // No thread: handed over here.
            let result = give(&self.file, staging.take(total), &self.given);
            staging.discard();
            self.free.push_back(staging);
            if let Err(e) = result {
                self.fail(e);
            }
            return self.check().map(|()| total);
        }
        self.queue(Item::Gift(staging, total)).map(|()| total)
    }
}

/// Copies `bufs`, one after another, into `into` (exactly as long), in up to `lanes` runs of
/// whole 2 MiB pieces side by side, on threads of their own: a fresh page's fault and its
/// copy are most of a large write's time (a 4K frame took 3.2-3.7 ms on one thread,
/// docs/BENCHMARKS.md, call BX). Not on the shared thread pool, whose threads may be busy
/// blurring.
fn copy_in(into: &mut [u8], bufs: &[IoSlice<'_>], lanes: usize) {
    let per = into.len().div_ceil(lanes).next_multiple_of(STAGING_ALIGN);
    if lanes == 1 || into.len() <= per {
        copy_piece(into, bufs, 0);
        return;
    }
    // The runs are taken from one list by the helpers and by this thread, so that a helper
    // that cannot start leaves its run to the others.
    let runs = std::sync::Mutex::new(into.chunks_mut(per).enumerate().collect::<Vec<_>>());
    let work = || loop {
        let next = runs.lock().map_or(None, |mut r| r.pop());
        let Some((i, run)) = next else {
            return;
        };
        copy_piece(run, bufs, i * per);
    };
    std::thread::scope(|scope| {
        for _ in 1..lanes {
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
}

/// Copies into `piece` the bytes of `bufs` (taken as one run) from byte `skip` on.
fn copy_piece(piece: &mut [u8], bufs: &[IoSlice<'_>], mut skip: usize) {
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
            return;
        }
    }
}

/// Hands `bytes` to the pipe by reference, counting them in `given`; where `vmsplice` is
/// refused (an emulated kernel without it), what is left goes by `write(2)`. `vmsplice`
/// blocks on a full pipe whether or not the descriptor is non-blocking.
fn give(file: &File, bytes: &[u8], given_total: &AtomicU64) -> io::Result<()> {
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
            given_total.fetch_add(n as u64, Ordering::Relaxed);
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EINVAL | libc::ENOSYS) => {
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
        self.check()?;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total >= GIFT_MIN {
            return self.gift(bufs, total);
        }
        // Behind the writes queued, in order; at once where none is.
        while self.take_back(false) {}
        if self.queued == 0 {
            return (&*self.file)
                .write_vectored(bufs)
                .inspect_err(|e| self.fail(again(e)));
        }
        self.queue(Item::Plain(
            bufs.iter().flat_map(|b| b.iter().copied()).collect(),
        ))
        .map(|()| total)
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

/// A page-aligned buffer of private anonymous memory (its own mapping, so that dropping its
/// pages drops them from this process whatever the allocator is), whose pages are given away
/// after each use.
#[derive(Default)]
struct Staging {
    ptr: Option<std::ptr::NonNull<u8>>,
    cap: usize,
}

// SAFETY: the mapping is plain memory owned by this value alone.
unsafe impl Send for Staging {}

impl Staging {
    /// The first `n` bytes of the buffer, grown to hold them (contents unspecified). Out of
    /// memory aborts, as a `Vec` does.
    fn take(&mut self, n: usize) -> &mut [u8] {
        if n > self.cap {
            self.unmap();
            let cap = n.next_multiple_of(STAGING_ALIGN);
            let Some(ptr) = map_aligned(cap) else {
                let layout = std::alloc::Layout::from_size_align(cap, STAGING_ALIGN)
                    .unwrap_or_else(|_| std::alloc::Layout::new::<u8>());
                std::alloc::handle_alloc_error(layout)
            };
            self.ptr = Some(ptr);
            self.cap = cap;
        }
        match self.ptr {
            // SAFETY: `ptr` maps `cap >= n` bytes owned by this value, every one initialised
            // (anonymous memory reads as zeros until written).
            Some(ptr) => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), n) },
            None => &mut [],
        }
    }

    /// Drops the buffer's pages from this process (the pipe keeps those it was given): its
    /// range reads as zeros again and gets fresh pages when written. Where Linux will not
    /// drop them (locked memory), the whole mapping goes, and the next write maps anew.
    fn discard(&mut self) {
        if let Some(ptr) = self.ptr {
            // SAFETY: the range is this value's whole mapping, private and anonymous; nothing
            // borrows it now. Such memory reads as zero-fill-on-demand pages after
            // MADV_DONTNEED.
            let r = unsafe { libc::madvise(ptr.as_ptr().cast(), self.cap, libc::MADV_DONTNEED) };
            if r != 0 {
                self.unmap();
            }
        }
    }

    fn unmap(&mut self) {
        if let Some(ptr) = self.ptr.take() {
            // SAFETY: this value's own mapping, `cap` bytes; nothing borrows it. Pages the pipe
            // still holds stay alive through its references.
            unsafe { libc::munmap(ptr.as_ptr().cast(), self.cap) };
        }
        self.cap = 0;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// A new private anonymous mapping of `len` bytes (a multiple of [`STAGING_ALIGN`]) starting
/// on a multiple of [`STAGING_ALIGN`], asked to be backed by huge pages; `None` if Linux has
/// no room.
fn map_aligned(len: usize) -> Option<std::ptr::NonNull<u8>> {
    let span = len + STAGING_ALIGN;
    // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(STAGING_ALIGN);
    // SAFETY: the unmapped head and tail lie inside the mapping just made, outside the
    // aligned `len` bytes kept; the advice changes how pages are backed, never contents.
    unsafe {
        if aligned > start {
            libc::munmap(raw, aligned - start);
        }
        let end = aligned + len;
        if start + span > end {
            libc::munmap(end as *mut libc::c_void, start + span - end);
        }
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    std::ptr::NonNull::new(aligned as *mut u8)
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
        g.finish().unwrap();
        let large: usize = frames.iter().map(Vec::len).filter(|&n| n >= GIFT_MIN).sum();
        assert_eq!(
            g.given(),
            large as u64,
            "the large writes went by reference"
        );
        drop(g);
        assert!(reader.join().unwrap() == want);
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
        for lanes in [1, 2, 3, COPY_LANES] {
            let mut into = vec![0u8; want.len()];
            copy_in(&mut into, &bufs, lanes);
            assert!(into == want, "{lanes} lanes");
        }
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
        let a = pattern(GIFT_MIN, 7);
        let mut g = GiftPipe::new(w1);
        g.write_all(&a).unwrap();
        // One write in each other buffer: all fit the widened pipe, so none waits for a reader.
        for k in 1..BUFFERS {
            g.write_all(&pattern(GIFT_MIN, k as u8)).unwrap();
        }
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
        // The next write goes through the first one's buffer (they are taken in the order
        // they come back), after its pages moved on.
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
