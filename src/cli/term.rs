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

/// Writes `prefix` and `msg` as one line to stderr. `msg` is shown on one line whatever it
/// holds: its control characters (a newline in a file's name) as escapes (`\n`, `\u{1b}`),
/// so that each message stays one line and no name can move the cursor. The write is best
/// effort: one that fails (stderr closed, or a pipe whose reader is gone, as in
/// `gpukit ... 2>&1 | head`) is ignored, where `eprintln!` would panic and end the command
/// with status 101 instead of its own. The exit status still says what happened.
pub fn stderr_line(prefix: &str, msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{prefix} {}", one_line(msg));
}

/// `s` with its control characters but tabs escaped.
fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t') {
        return s.into();
    }
    s.chars()
        .map(|c| match c.is_control() && c != '\t' {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
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
    bar.set_style(progress_style(color()));
    bar
}

/// The bar's look: plain unless `color`. The rate is a key of its own, since `{per_sec:.1}`
/// in an indicatif template is a colour style (colour 1, red), not a precision.
fn progress_style(color: bool) -> ProgressStyle {
    let template = if color {
        "{bar:30.cyan/blue} {pos}/{len} {rate} eta {eta} {wide_msg}"
    } else {
        "{bar:30} {pos}/{len} {rate} eta {eta} {wide_msg}"
    };
    ProgressStyle::with_template(template)
        .expect("static template is valid")
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}/s", state.per_sec());
            },
        )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::{ProgressBar, ProgressDrawTarget, TermLike};

    use super::progress_style;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)?;
            self.write_str("\n")
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn drawn(color: bool) -> String {
        let screen = Screen::default();
        let bar = ProgressBar::with_draw_target(
            Some(10),
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.set_style(progress_style(color));
        bar.inc(3);
        bar.force_draw();
        let text = screen.0.lock().unwrap().clone();
        text
    }

    // `{per_sec:.1}` drew the rate red with four decimals, even under --color never.
    #[test]
    fn the_rate_is_plain_without_colour() {
        let text = drawn(false);
        assert!(text.contains(" 3/10 "), "{text:?}");
        assert!(
            !text.contains('\x1b'),
            "escape codes without colour: {text:?}"
        );
        let rate = text
            .split(" 3/10 ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let number = rate
            .strip_suffix("/s")
            .unwrap_or_else(|| panic!("{rate:?}"));
        let decimals = number
            .split('.')
            .nth(1)
            .unwrap_or_else(|| panic!("{rate:?}"));
        assert_eq!(decimals.len(), 1, "{rate:?}");
    }
}
