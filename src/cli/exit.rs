//! Exit codes, decided in one place.

use std::process::ExitCode;

/// gpukit's exit codes (documented in `gpukit --help` and docs/cli.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Everything worked.
    Success = 0,
    /// An operation failed (a bad input file, a GPU error); in a batch, at least one file.
    Failure = 1,
    /// gpukit was called wrongly: an unknown flag, a bad value, conflicting options.
    Usage = 2,
}

impl Status {
    /// The status for an error that ended the run.
    pub fn of_error(err: &anyhow::Error) -> Status {
        if crate::is_usage(err) {
            Status::Usage
        } else {
            Status::Failure
        }
    }
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

pub use crate::is_broken_pipe;

pub const HELP: &str = "\
Exit codes:
  0  success
  1  an operation failed (in a batch: at least one file failed; the others were done)
  2  bad usage: unknown flag, bad value, conflicting options";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_map_to_2_anywhere_in_the_chain() {
        let e = anyhow::Error::new(crate::UsageError("bad".into())).context("while parsing");
        assert_eq!(Status::of_error(&e), Status::Usage);
        assert_eq!(Status::of_error(&anyhow::anyhow!("io")), Status::Failure);
        let pipe = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&pipe.context("writing")));
    }
}
