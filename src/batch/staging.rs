//! Upload buffers shared by a batch's threads, so that the decoding threads (on the cores)
//! write each decoded image into mapped GPU-visible memory and an engine thread only records
//! the copy and submits. Buffers are made on demand within a memory budget and reused: each
//! goes back to the pool once the batch copying from it is submitted, is mapped again when
//! the GPU is done with it, and has its pages touched only on its first use.

use std::sync::Mutex;

use anyhow::Result;

use crate::gpu::{Gpu, Upload};

/// The pool: the buffers not in use, and how many bytes all of them hold.
pub struct Staging {
    budget: usize,
    pool: Mutex<Pool>,
}

#[derive(Default)]
struct Pool {
    free: Vec<Upload>,
    /// Bytes of every buffer made and not dropped, free or in use.
    made: usize,
}

impl Staging {
    /// A pool whose buffers hold at most `budget` bytes together.
    pub fn new(budget: usize) -> Staging {
        Staging {
            budget,
            pool: Mutex::new(Pool::default()),
        }
    }

    /// `bytes` written into a buffer of the pool (unmapped, ready for a batch to copy from):
    /// a free one of that size whose mapping is done, else a new one within the budget (a
    /// free buffer of another size is dropped to make room). `None` when every buffer is in
    /// use or still being mapped: the caller writes its own upload then, so the batch never
    /// waits for the pool.
    /// `check_opaque`: whether the write finds if the bytes are all-opaque 8-bit RGBA
    /// ([`Upload::check_opaque_rgba8`]).
    pub fn stage(&self, gpu: &Gpu, bytes: &[u8], check_opaque: bool) -> Result<Option<Upload>> {
        let len = bytes.len();
        let taken = {
            let mut pool = self.pool.lock().expect("no staging thread panics");
            let Pool { free, made } = &mut *pool;
            // A buffer whose mapping failed is no use: dropped, its bytes freed.
            free.retain_mut(|u| {
                let failed = u.ready().is_none();
                if failed {
                    *made -= u.bytes();
                }
                !failed
            });
            let ready = free
                .iter_mut()
                .position(|u| u.bytes() == len && u.ready() == Some(true));
            match ready {
                Some(i) => Some(free.swap_remove(i)),
                None => {
                    if *made + len > self.budget {
                        if let Some(i) = free.iter().position(|u| u.bytes() != len) {
                            *made -= free.swap_remove(i).bytes();
                        }
                    }
                    if *made + len > self.budget {
                        return Ok(None);
                    }
                    *made += len;
                    None
                }
            }
        };
        let mut upload = taken.unwrap_or_else(|| gpu.upload_buffer("batch upload", len));
        upload.check_opaque_rgba8(check_opaque);
        match upload.write(gpu, bytes) {
            Ok(()) => Ok(Some(upload)),
            Err(e) => {
                self.pool.lock().expect("no staging thread panics").made -= len;
                Err(e)
            }
        }
    }

    /// Takes back `upload` once the batch that copies from it is submitted (or when it went
    /// unused): its mapping is asked for again, for a later [`Staging::stage`].
    pub fn give_back(&self, mut upload: Upload) {
        upload.remap();
        self.pool
            .lock()
            .expect("no staging thread panics")
            .free
            .push(upload);
    }
}
