//! The command line's conventions: clap definition, exit codes, one-line errors.

use clap::CommandFactory;

use crate::util::{run, run_in, tempdir};

#[test]
fn verify_cli() {
    gpukit::cli::Cli::command().debug_assert();
}

#[test]
fn help_and_version_succeed_on_stdout() {
    let r = run(&["--help"]);
    r.code(0);
    assert!(r.stdout.contains("Exit codes:"), "{}", r.stdout);
    assert!(r.stdout.contains("GPUKIT_DEVICE"), "{}", r.stdout);
    let r = run(&["--version"]);
    r.code(0);
    assert_eq!(
        r.stdout.trim(),
        format!("gpukit {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn unknown_flag_is_usage_error_in_one_line() {
    run(&["--frobnicate", "devices"])
        .code(2)
        .one_error_line("unexpected argument '--frobnicate'");
    run(&["devices", "--bogus"])
        .code(2)
        .one_error_line("--bogus");
    run(&["bench", "--reps", "0"])
        .code(2)
        .one_error_line("--reps");
    run(&["--backend", "opengl", "devices"])
        .code(2)
        .one_error_line("invalid value 'opengl'");
}

#[test]
fn no_subcommand_shows_usage_and_exits_2() {
    let r = run(&[]);
    r.code(2);
    assert!(r.stderr.contains("Usage:"), "{}", r.stderr);
}

// The op names come from the registry: clap refuses another and lists the valid ones.
#[test]
fn unknown_bench_op_is_usage_error() {
    run(&["bench", "warp"])
        .code(2)
        .one_error_line("invalid value 'warp'")
        .one_error_line(&format!(
            "[possible values: {}, all]",
            registry_names(|_| true)
        ));
}

#[cfg(target_os = "linux")]
#[test]
fn backend_not_compiled_in_is_usage_error() {
    run(&["--backend", "metal", "devices"])
        .code(2)
        .one_error_line("backend metal is not available");
}

#[test]
fn unknown_device_fails_with_one_line() {
    run(&["--device", "99", "bench", "copy"])
        .code(1)
        .one_error_line("no adapter with index 99");
    run(&["--device", "no-such-gpu", "bench", "copy"])
        .code(1)
        .one_error_line("no adapter name contains \"no-such-gpu\"");
}

// A bad --json path must fail before any work and leave nothing behind.
#[test]
fn json_to_unwritable_place_fails_up_front() {
    let dir = tempdir();
    let r = run_in(
        Some(dir.path()),
        &["devices", "--json", "missing/dir/out.json"],
    );
    r.code(1)
        .one_error_line("missing/dir/out.json: cannot write here");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A temporary folder holding `a.png`, an 8x8 RGB image.
fn dir_with_png() -> tempfile::TempDir {
    let dir = tempdir();
    gpukit::io::image::save(
        &dir.path().join("a.png"),
        crate::util::random_image(8, 8, 3, 8, 1),
    )
    .unwrap();
    dir
}

// `--json out.json/` names a folder: it used to pass every check and fail only when the
// finished document was put in place, after all the work.
#[test]
fn json_named_as_a_folder_fails_up_front() {
    let dir = dir_with_png();
    run_in(
        Some(dir.path()),
        &["histogram", "a.png", "--json", "out.json/"],
    )
    .code(1)
    .one_error_line("out.json/: names a folder (ends in a slash)");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

// A negative number is a value of the option before it (whose own check then speaks), not
// an unknown flag: `--threshold -0` is 0, `--width -5` is out of range.
#[test]
fn negative_numbers_are_values() {
    let dir = dir_with_png();
    let r = run_in(
        Some(dir.path()),
        &["compare", "a.png", "a.png", "--threshold", "-0"],
    );
    r.code(0);
    assert!(r.stdout.contains("0 of 64 pixels differ"), "{}", r.stdout);
    run_in(
        Some(dir.path()),
        &["compare", "a.png", "a.png", "--threshold", "-0.5"],
    )
    .code(2)
    .one_error_line("expected a number from 0 to 1");
    for (flag, value) in [("--width", "-5"), ("--scale", "-0.5")] {
        let r = run_in(
            Some(dir.path()),
            &["resize", "a.png", "-o", "r.png", flag, value],
        );
        r.code(2);
        assert!(
            !r.stderr.contains("unexpected argument"),
            "{flag} {value}: {}",
            r.stderr
        );
    }
    run_in(Some(dir.path()), &["histogram", "a.png", "--bins", "-3"])
        .code(2)
        .one_error_line("-3");
}

// --overwrite lets --out-dir write over inputs; with -o (which names its one file, the
// input itself if so given) it means nothing, and clap's `requires` did not enforce that.
#[test]
fn overwrite_with_output_is_usage_error() {
    let dir = dir_with_png();
    run_in(
        Some(dir.path()),
        &["blur", "a.png", "-r", "1", "-o", "b.png", "--overwrite"],
    )
    .code(2)
    .one_error_line("--overwrite");
    assert!(!dir.path().join("b.png").exists());
}

#[test]
fn broken_pipe_is_not_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = crate::util::gpukit()
        .args(["--help"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn a_closed_stderr_changes_nothing_but_the_messages() {
    // `gpukit ... 2>&1 | head` closes stderr early; messages are then lost, but each command
    // still ends with its own status (eprintln! panicked: status 101, and a histogram batch
    // with a bad file hung for ever on the panicked thread's queue).
    use std::process::Stdio;
    let dir = crate::util::tempdir();
    let folder = dir.path().join("in");
    std::fs::create_dir(&folder).unwrap();
    let img = gpukit::io::image::Image::new_u8(3, 2, 3, (0..18).collect());
    for i in 0..6 {
        gpukit::io::image::save(&folder.join(format!("ok{i}.png")), img.clone()).unwrap();
    }
    std::fs::write(folder.join("a_empty.png"), b"").unwrap();
    let folder = folder.to_str().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], i32); 4] = [
        (&["histogram", folder], 1),
        (&["blur", folder, "-r", "1", "--out-dir", out], 1),
        (&["blur", "missing.png", "-o", "x.png"], 1),
        (&["blur"], 2),
    ];
    for (args, want) in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut child = crate::util::gpukit()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(writer)
            .spawn()
            .unwrap();
        let what = format!("gpukit {args:?} with its stderr closed");
        let status = crate::util::wait_or_hang(&mut child, &what);
        assert_eq!(status.code(), Some(want), "gpukit {args:?}");
    }
    // The batch wrote every good file, blurred, whatever became of its messages.
    let out = std::path::Path::new(out);
    for i in 0..6 {
        let got = gpukit::io::image::load(&out.join(format!("ok{i}.png"))).unwrap();
        let want = gpukit::ops::blur::reference(
            &img,
            &gpukit::ops::blur::Options::new(gpukit::ops::blur::Kind::Box, 1, 1),
        )
        .unwrap();
        assert!(got == want, "ok{i}.png");
    }
}

#[test]
fn a_name_with_a_newline_stays_on_its_one_line() {
    // Each message is one line: control characters in a file's name are shown escaped.
    let dir = crate::util::tempdir();
    let bad = dir.path().join("new\nline\u{1b}[31m.png");
    std::fs::write(&bad, b"not an image").unwrap();
    let r = crate::util::run(&["blur", bad.to_str().unwrap(), "-r", "1", "-o", "-"]);
    r.code(1);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{:?}", r.stderr);
    assert!(lines[0].starts_with("gpukit: "), "{}", lines[0]);
    assert!(
        lines[0].contains("new\\nline\\u{1b}[31m.png"),
        "{}",
        lines[0]
    );
}

#[test]
fn a_y4m_stream_given_as_an_image_says_what_reads_it() {
    // A 2x2 4:2:0 frame: 4 luma and 2 chroma bytes.
    let dir = crate::util::tempdir();
    let y4m = dir.path().join("x.y4m");
    let mut bytes = b"YUV4MPEG2 W2 H2 F30:1 C420jpeg\nFRAME\n".to_vec();
    bytes.extend([16, 32, 64, 128, 100, 200]);
    std::fs::write(&y4m, &bytes).unwrap();
    let y4m = y4m.to_str().unwrap();
    crate::util::run(&["histogram", y4m])
        .code(1)
        .one_error_line("x.y4m: a Y4M frame stream, not an image (`histogram FILE --per-frame`");
    let mut cmd = crate::util::gpukit();
    let out = cmd
        .args(["histogram", "-", "--sum"])
        .stdin(std::fs::File::open(y4m).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stdin: a Y4M frame stream, not concatenated images: give --per-frame"),
        "{err}"
    );
    // As --per-frame asks, it is read: the luma counts of its one frame.
    let r = crate::util::run(&["histogram", y4m, "--per-frame"]);
    r.code(0);
    let line: serde_json::Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(line["frame"], 0, "{line}");
}

/// The registry's op names that `keep`, as clap lists them: "copy, blur, ...".
pub fn registry_names(keep: impl Fn(&gpukit::ops::Op) -> bool) -> String {
    let names: Vec<&str> = gpukit::ops::REGISTRY
        .iter()
        .filter(|op| keep(op))
        .map(|op| op.name)
        .collect();
    names.join(", ")
}

#[test]
fn reports_and_plot_streams_are_never_written_over_a_file_of_another_kind() {
    // --junit and --plot-frames took any name, so a slip replaced an image with XML or Y4M.
    let dir = crate::util::tempdir();
    let d = dir.path();
    let img = gpukit::io::image::Image::new_u8(2, 2, 3, (0..12).collect());
    let photo = d.join("photo.png");
    gpukit::io::image::save(&photo, img).unwrap();
    let before = std::fs::read(&photo).unwrap();
    let p = photo.to_str().unwrap();
    crate::util::run(&["compare", p, p, "--junit", p])
        .code(2)
        .one_error_line("--junit");
    let mut y4m = b"YUV4MPEG2 W2 H2 F30:1 C420jpeg\nFRAME\n".to_vec();
    y4m.extend([16, 32, 64, 128, 100, 200]);
    let stream = d.join("x.y4m");
    std::fs::write(&stream, &y4m).unwrap();
    let s = stream.to_str().unwrap();
    crate::util::run(&["histogram", s, "--per-frame", "--plot-frames", p])
        .code(2)
        .one_error_line("a Y4M stream (--plot-format y4m)'s name must end in .y4m");
    assert_eq!(std::fs::read(&photo).unwrap(), before);
    // Names of the kind written are taken.
    let xml = d.join("r.xml");
    crate::util::run(&["compare", p, p, "--junit", xml.to_str().unwrap()]).code(0);
    assert!(std::fs::read_to_string(&xml)
        .unwrap()
        .contains("<testsuite"));
    let plots = d.join("plots.y4m");
    crate::util::run(&[
        "histogram",
        s,
        "--per-frame",
        "--plot-frames",
        plots.to_str().unwrap(),
    ])
    .code(0);
    assert!(std::fs::read(&plots).unwrap().starts_with(b"YUV4MPEG2 "));
}
