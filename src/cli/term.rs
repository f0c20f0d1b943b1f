//! Terminal behaviour decided once per run: colour and progress bars.

use std::io::IsTerminal;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

static COLOR: OnceLock<bool> = OnceLock::new();

/// Decides once whether stderr gets colour: `always`, or `auto` on a terminal without NO_COLOR.
pub fn init_color(choice: ColorChoice) {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stderr().is_terminal()
        }
    };
    let _ = COLOR.set(on);
}

fn color() -> bool {
    COLOR.get().copied().unwrap_or(false)
}

/// The prefix of error lines: `gpukit:`, red and bold when colour is on.
pub fn error_prefix() -> &'static str {
    if color() {
        "\x1b[1;31mgpukit:\x1b[0m"
    } else {
        "gpukit:"
    }
}

/// The prefix of warning lines.
pub fn warning_prefix() -> &'static str {
    if color() {
        "\x1b[1;33mgpukit: warning:\x1b[0m"
    } else {
        "gpukit: warning:"
    }
}

/// A progress bar on stderr, hidden when `hidden` (`--quiet`, JSON on stdout) or when stderr
/// is not a terminal.
pub fn progress(len: u64, hidden: bool) -> ProgressBar {
    if hidden || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {per_sec:.1} eta {eta} {wide_msg}")
            .expect("static template is valid"),
    );
    bar
}
