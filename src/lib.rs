//! gpukit: shared-memory WGSL compute pipelines (the ops of [`ops::REGISTRY`]) on a headless
//! wgpu device, with CPU references that define the results and serve as a fallback.
//!
//! Data flows one way: [`cli`] parses flags and calls [`ops`], which plan the work and call
//! [`gpu`]; [`io`] reads and writes files on the side.

pub mod batch;
pub mod bench;
pub mod cli;
pub mod gpu;
pub mod io;
#[cfg(target_arch = "x86_64")]
mod mem;
pub mod ops;
mod simd;
pub mod tune;

/// An error in how gpukit was called (a bad flag value, conflicting options) rather than in
/// the work itself; the command line exits with code 2 for it.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Whether the error is a closed stdout (`gpukit ... | head`), which is not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether the error is a [`UsageError`] anywhere in its chain (exit code 2).
pub fn is_usage(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<UsageError>())
}
