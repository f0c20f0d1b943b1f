//! The `gpukit` binary: runs the library's command line and turns its result into an exit code.

use std::process::ExitCode;

use gpukit::cli::{self, exit, Status};

fn main() -> ExitCode {
    #[cfg(target_os = "linux")]
    gpukit::io::pipe::own_blocking_stdout();
    match cli::run(std::env::args_os()) {
        Ok(status) => status.into(),
        Err(err) if exit::is_broken_pipe(&err) => Status::Success.into(),
        Err(err) => {
            cli::term::stderr_line(cli::term::error_prefix(), &format!("{err:#}"));
            Status::of_error(&err).into()
        }
    }
}
