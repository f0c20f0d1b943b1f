//! Output paths: devices, FIFOs and `-` are written through, symlinks are followed, regular
//! files are replaced atomically, inputs are never overwritten unasked, and nothing is left
//! behind by a failed write or a signal. Device nodes, FIFOs and links are made in a temp
//! folder; no test writes to a system file.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{gpukit, gpukit_as_nobody, mkfifo, run, run_in, tempdir};

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// [1, 2, 3, 4] exclusive prefix sums, by hand.
const SCAN_IN: &str = "[1, 2, 3, 4]";
const SCAN_OUT: [u32; 4] = [0, 1, 3, 6];

fn scan_json(text: &str) -> Vec<u32> {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

/// A character device node of our own, with the numbers of a system one (1,3 null; 1,7 full).
fn mknod_char(path: &Path, major: u32, minor: u32) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(major, minor),
    )
    .unwrap_or_else(|e| {
        panic!(
            "mknod {}: {e} (this test runs as root, as CI does)",
            path.display()
        )
    });
}

/// Reads a FIFO to its end on a thread.
fn read_fifo(path: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::fs::File::open(path)
            .unwrap()
            .read_to_end(&mut buf)
            .unwrap();
        buf
    })
}

// Writing to a device node used to replace the node with a regular file (as root this
// destroyed a machine's /dev/null); it must be written through and stay a device.
#[test]
fn a_device_or_fifo_output_is_written_through_and_stays() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempdir();
    std::fs::write(dir.path().join("in.json"), SCAN_IN).unwrap();
    let out = dir.path().join("sink.json");
    let reader = if is_root() {
        mknod_char(&out, 1, 3);
        None
    } else {
        mkfifo(&out);
        Some(read_fifo(&out))
    };
    run_in(
        Some(dir.path()),
        &["--backend", "cpu", "scan", "in.json", "-o", "sink.json"],
    )
    .code(0);
    let meta = std::fs::symlink_metadata(&out).unwrap();
    if is_root() {
        use std::os::unix::fs::MetadataExt;
        assert!(meta.file_type().is_char_device(), "{meta:?}");
        assert_eq!(meta.rdev(), rustix::fs::makedev(1, 3));
    } else {
        assert!(meta.file_type().is_fifo(), "{meta:?}");
    }
    if let Some(r) = reader {
        assert_eq!(
            scan_json(&String::from_utf8(r.join().unwrap()).unwrap()),
            SCAN_OUT
        );
    }
    assert_eq!(names(dir.path()), ["in.json", "sink.json"]);
}

#[test]
fn a_fifo_gets_the_whole_output() {
    let dir = tempdir();
    std::fs::write(dir.path().join("in.json"), SCAN_IN).unwrap();
    let fifo = dir.path().join("pipe.json");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    run_in(
        Some(dir.path()),
        &["--backend", "cpu", "scan", "in.json", "-o", "pipe.json"],
    )
    .code(0);
    let got = String::from_utf8(reader.join().unwrap()).unwrap();
    assert_eq!(scan_json(&got), SCAN_OUT);
    let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&t));
    assert_eq!(names(dir.path()), ["in.json", "pipe.json"]);
}

// Without CAP_DAC_READ_SEARCH (any user but root) the unnamed file is linked in through
// /proc/self/fd; replacing and creating work the same.
#[test]
fn an_ordinary_user_replaces_and_creates_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(d.join("in.json"), SCAN_IN).unwrap();
    std::fs::write(d.join("old.json"), "old").unwrap();
    std::fs::set_permissions(d.join("old.json"), std::fs::Permissions::from_mode(0o666)).unwrap();
    scan_to_old_and_new(d, |_| gpukit_as_nobody());
}

/// `scan` of `d/in.json` into `d/old.json` (which exists) and `d/new.json` by the command
/// `command` gives for each: the right values in both, and nothing else left in `d`.
fn scan_to_old_and_new(d: &Path, command: impl Fn(&str) -> Command) {
    for out in ["old.json", "new.json"] {
        let mut cmd = command(out);
        cmd.current_dir(d)
            .args(["--backend", "cpu", "scan", "in.json", "-o", out]);
        let r = cmd.output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(
            scan_json(&std::fs::read_to_string(d.join(out)).unwrap()),
            SCAN_OUT
        );
    }
    assert_eq!(names(d), ["in.json", "new.json", "old.json"]);
}

// `--fsync` (or GPUKIT_FSYNC) flushes each file before naming it: the same files, created
// and replaced, and nothing else left in the folder.
#[test]
fn fsync_writes_the_same_files() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("in.json"), SCAN_IN).unwrap();
    std::fs::write(d.join("old.json"), "old").unwrap();
    // `--fsync` for the file replaced, GPUKIT_FSYNC=1 for the one created.
    scan_to_old_and_new(d, |out| {
        let mut cmd = gpukit();
        match out {
            "old.json" => cmd.arg("--fsync"),
            _ => cmd.env("GPUKIT_FSYNC", "1"),
        };
        cmd
    });
}

// A symlink at the output path used to be replaced by a file; its target must be replaced
// (atomically, beside the target) and the link kept, also when the target is missing.
#[test]
fn a_symlink_is_followed_and_kept() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("in.json"), SCAN_IN).unwrap();
    std::fs::create_dir(d.join("real")).unwrap();
    std::fs::write(d.join("real/out.json"), "old").unwrap();
    std::os::unix::fs::symlink("real/out.json", d.join("link.json")).unwrap();
    std::os::unix::fs::symlink("real/new.json", d.join("dangling.json")).unwrap();
    for link in ["link.json", "dangling.json"] {
        run_in(
            Some(d),
            &["--backend", "cpu", "scan", "in.json", "-o", link],
        )
        .code(0);
        assert!(std::fs::symlink_metadata(d.join(link))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    for real in ["real/out.json", "real/new.json"] {
        assert_eq!(
            scan_json(&std::fs::read_to_string(d.join(real)).unwrap()),
            SCAN_OUT
        );
    }
    assert_eq!(names(d), ["dangling.json", "in.json", "link.json", "real"]);
    assert_eq!(names(&d.join("real")), ["new.json", "out.json"]);
}

// `blur -o -` used to write a file named `-`; it is stdout, here a real pipe.
#[test]
fn dash_is_stdout_through_a_pipe() {
    let dir = tempdir();
    let out = gpukit()
        .current_dir(dir.path())
        .args([
            "--backend",
            "cpu",
            "blur",
            &fixture("hopper.png"),
            "-r",
            "15",
            "-o",
            "-",
        ])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = gpukit::io::image::decode(&out.stdout).unwrap();
    let want = gpukit::io::image::load(Path::new(&fixture("golden/hopper-box-r15.png"))).unwrap();
    assert!(got == want, "blur -o - differs from the golden file");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));

    std::fs::write(dir.path().join("in.json"), SCAN_IN).unwrap();
    let r = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "scan", "in.json", "-o", "-"],
    );
    r.code(0);
    assert_eq!(scan_json(&r.stdout), SCAN_OUT);
    let r = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "scan", "in.json", "-o", "/dev/stdout"],
    );
    r.code(0);
    assert_eq!(scan_json(&r.stdout), SCAN_OUT);
    assert_eq!(names(dir.path()), ["in.json"]);
}

// Binary data on a terminal is refused, before any work.
#[test]
fn binary_output_to_a_terminal_is_refused() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two new descriptors, which we then own.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let out = gpukit()
        .args([
            "--backend",
            "cpu",
            "blur",
            &fixture("hopper.png"),
            "-o",
            "-",
        ])
        .stdout(Stdio::from(slave))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    drop(master);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stdout is a terminal"), "{err}");
}

// `histogram --json A.png B.png` used to overwrite A.png with JSON.
#[test]
fn json_does_not_swallow_an_input() {
    let dir = tempdir();
    let d = dir.path();
    let img = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("A.png"), &img).unwrap();
    std::fs::write(d.join("B.png"), &img).unwrap();
    run_in(
        Some(d),
        &["--backend", "cpu", "histogram", "--json", "A.png", "B.png"],
    )
    .code(2)
    .one_error_line("--json A.png");
    run_in(Some(d), &["devices", "--json", "A.png"]).code(2);
    // `bench --json blur` would write the table to a file named `blur`.
    run_in(Some(d), &["bench", "--json", "blur"])
        .code(2)
        .one_error_line("--json blur: a JSON file's name must end in .json");
    // A bare --json is a usage error, not a silent choice.
    run_in(
        Some(d),
        &["--backend", "cpu", "histogram", "A.png", "--json"],
    )
    .code(2);
    assert_eq!(std::fs::read(d.join("A.png")).unwrap(), img);
    assert_eq!(names(d), ["A.png", "B.png"]);
    // The README's forms still work.
    let r = run_in(
        Some(d),
        &["--backend", "cpu", "histogram", "A.png", "--json", "h.json"],
    );
    r.code(0);
    let r = run_in(
        Some(d),
        &["--backend", "cpu", "histogram", "A.png", "--json", "-"],
    );
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["inputs"][0]["pixels"], 256 * 300);
}

// An output that is one of the inputs (by any name) is refused before any work.
#[test]
fn an_input_is_never_an_output() {
    let dir = tempdir();
    let d = dir.path();
    let img = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("a.png"), &img).unwrap();
    std::os::unix::fs::symlink("a.png", d.join("alias.png")).unwrap();
    std::fs::write(d.join("v.json"), SCAN_IN).unwrap();
    std::fs::write(d.join("m.json"), "[[1, 2], [3, 4]]").unwrap();
    let cpu = |args: &[&str]| {
        let mut all = vec!["--backend", "cpu"];
        all.extend_from_slice(args);
        run_in(Some(d), &all)
    };
    cpu(&["histogram", "a.png", "--plot", "alias.png"])
        .code(2)
        .one_error_line("names an input file");
    cpu(&["histogram", ".", "--plot", "a.png"]).code(2);
    cpu(&["scan", "v.json", "-o", "v.json"])
        .code(2)
        .one_error_line("v.json: names an input file");
    cpu(&["matmul", "m.json", "m.json", "-o", "m.json"]).code(2);
    assert_eq!(std::fs::read(d.join("a.png")).unwrap(), img);
    assert_eq!(std::fs::read_to_string(d.join("v.json")).unwrap(), SCAN_IN);
    assert_eq!(
        std::fs::read_to_string(d.join("m.json")).unwrap(),
        "[[1, 2], [3, 4]]"
    );
    assert_eq!(names(d), ["a.png", "alias.png", "m.json", "v.json"]);
}

// `blur d/*.png --out-dir d` used to overwrite the originals silently.
#[test]
fn out_dir_over_the_inputs_needs_overwrite() {
    let dir = tempdir();
    let d = dir.path();
    let img = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::create_dir(d.join("d")).unwrap();
    std::fs::write(d.join("d/a.png"), &img).unwrap();
    std::fs::write(d.join("d/b.png"), &img).unwrap();
    let args = [
        "--backend",
        "cpu",
        "blur",
        "d/a.png",
        "d/b.png",
        "-r",
        "15",
        "--out-dir",
        "d",
    ];
    run_in(Some(d), &args)
        .code(2)
        .one_error_line("d/a.png: --out-dir d would write over this input; add --overwrite");
    assert_eq!(std::fs::read(d.join("d/a.png")).unwrap(), img);
    assert_eq!(std::fs::read(d.join("d/b.png")).unwrap(), img);
    let mut yes = args.to_vec();
    yes.push("--overwrite");
    run_in(Some(d), &yes).code(0);
    let want = gpukit::io::image::load(Path::new(&fixture("golden/hopper-box-r15.png"))).unwrap();
    for f in ["d/a.png", "d/b.png"] {
        let got = gpukit::io::image::load(&d.join(f)).unwrap();
        assert!(got == want, "{f} is not the blurred image");
    }
    assert_eq!(names(&d.join("d")), ["a.png", "b.png"]);
}

/// Starts a long blur (on the CPU backend, many iterations) into `dir/out.png` and returns
/// once gpukit holds its output open, so a signal lands during the work.
#[expect(
    clippy::zombie_processes,
    reason = "the child is returned, and its caller waits for it"
)]
fn long_blur(dir: &Path, ignore_hup: bool) -> std::process::Child {
    let mut cmd = gpukit();
    // The signals the tests send at their defaults (SIGHUP ignored where the test says),
    // whatever the test runner inherited: under `nohup` SIGHUP is ignored, in a shell's
    // background job SIGINT, and gpukit keeps an ignored signal ignored.
    let hup = if ignore_hup {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only signal(), async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::signal(libc::SIGHUP, hup);
                Ok(())
            });
        }
    }
    let mut child = cmd
        .current_dir(dir)
        .args([
            "--backend",
            "cpu",
            "blur",
            &fixture("hopper.png"),
            "-r",
            "2",
        ])
        .args(["--iterations", "1000000", "-o", "out.png"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The unnamed output file shows in /proc as an open file in `dir`.
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let canon = std::fs::canonicalize(dir).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let open = std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(&canon)));
        if open {
            return child;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpukit never opened its output");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

// Ctrl-C, SIGTERM (also what `timeout` sends), SIGHUP and kill -9 used to leave a
// `.out.png.XXXX.tmp` beside the output; now nothing is left and the old output stays.
#[test]
fn signals_leave_nothing_and_keep_the_old_output() {
    use rustix::process::Signal;
    use std::os::unix::process::ExitStatusExt;
    for sig in [Signal::INT, Signal::TERM, Signal::HUP, Signal::KILL] {
        let dir = tempdir();
        std::fs::write(dir.path().join("out.png"), "old").unwrap();
        let mut child = long_blur(dir.path(), false);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the blur ended too soon"
        );
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, sig).unwrap();
        let status = child.wait().unwrap();
        // gpukit dies of the signal itself, as the shell expects (it reports 128 + N).
        assert_eq!(status.signal(), Some(sig.as_raw()), "{sig:?}: {status:?}");
        assert_eq!(std::fs::read(dir.path().join("out.png")).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["out.png"], "{sig:?}");
    }
}

// Under `nohup` (SIGHUP ignored) gpukit must not die of SIGHUP for having handlers.
#[test]
fn an_ignored_sighup_stays_ignored() {
    use rustix::process::Signal;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempdir();
    let mut child = long_blur(dir.path(), true);
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, Signal::HUP).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let alive = child.try_wait().unwrap().is_none();
    rustix::process::kill_process(pid, Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert!(alive, "SIGHUP ended a run that ignores it: {status:?}");
    assert_eq!(status.signal(), Some(Signal::TERM.as_raw()));
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

/// A command whose files may grow to `bytes` (RLIMIT_FSIZE); writing more fails with EFBIG.
fn with_file_size_limit(cmd: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (signal, setrlimit) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

// A failed write used to name the hidden temp file, or no file at all; it names the user's
// path, keeps the old file and leaves nothing.
#[test]
fn a_failed_write_names_the_output_and_keeps_the_old_file() {
    let dir = tempdir();
    let d = dir.path();
    let values: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    std::fs::write(d.join("in.json"), format!("[{}]", values.join(","))).unwrap();
    std::fs::write(d.join("out.npy"), "old").unwrap();
    let mut cmd = gpukit();
    cmd.current_dir(d)
        .args(["--backend", "cpu", "scan", "in.json", "-o", "out.npy"]);
    with_file_size_limit(&mut cmd, 4096);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpukit: out.npy: cannot write: File too large"),
        "{err}"
    );
    assert_eq!(std::fs::read(d.join("out.npy")).unwrap(), b"old");
    assert_eq!(names(d), ["in.json", "out.npy"]);
}

// "No space left on device" used to come without a file name, for -o and for stdout. A
// node with /dev/full's numbers, made here, stands for a full disk.
#[test]
fn disk_full_names_the_output_or_stdout() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("in.json"), SCAN_IN).unwrap();
    mknod_char(&d.join("full.json"), 1, 7);
    run_in(
        Some(d),
        &["--backend", "cpu", "scan", "in.json", "-o", "full.json"],
    )
    .code(1)
    .one_error_line("full.json: cannot write: No space left on device");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("full.json"))
        .unwrap();
    let out = gpukit()
        .current_dir(d)
        .args(["--backend", "cpu", "scan", "in.json"])
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "gpukit: stdout: cannot write: No space left on device (os error 28)"
    );
    assert_eq!(names(d), ["full.json", "in.json"]);
}

// `tune --tune-cache` naming a folder or a read-only place used to fail only after all the
// measuring; it fails at once.
#[test]
fn an_unusable_tune_cache_fails_before_measuring() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let start = std::time::Instant::now();
    let r = run_in(Some(d), &["tune", "--quick", "--tune-cache", "."]);
    r.code(1).one_error_line("is a directory");
    std::fs::create_dir(d.join("ro")).unwrap();
    std::fs::set_permissions(d.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes anywhere: the read-only case runs as `nobody`.
    let mut cmd = gpukit_as_nobody();
    cmd.current_dir(d)
        .args(["tune", "--quick", "--tune-cache", "ro/cache.json"])
        .env("HOME", d);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("ro/cache.json: cannot write here: Permission denied"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // Two device starts on lavapipe take about a second; --quick's measuring far longer.
    let quick = start.elapsed();
    assert!(quick < std::time::Duration::from_secs(20), "{quick:?}");
    assert_eq!(names(d), ["ro"]);
    assert!(names(&d.join("ro")).is_empty());
}

// Messages from the issue: one line, the path once, the right hint.
#[test]
fn messages_name_the_file_once_with_the_right_hint() {
    let dir = tempdir();
    let d = dir.path();
    let png = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("cut.png"), &png[..png.len() / 2]).unwrap();
    let r = run_in(Some(d), &["--backend", "cpu", "histogram", "cut.png"]);
    r.code(1).one_error_line("cut.png");
    assert_eq!(r.stderr.matches("cut.png").count(), 1, "{}", r.stderr);

    // A complex .npy: matmul takes real numbers as float32, and says only that.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<c16', 'fortran_order': False, 'shape': (1, 1), }".to_string();
    let total = (10 + header.len() + 1).next_multiple_of(64);
    header += &" ".repeat(total - 10 - header.len() - 1);
    header.push('\n');
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&[0; 16]);
    std::fs::write(d.join("a.npy"), npy).unwrap();
    let r = run_in(Some(d), &["--backend", "cpu", "matmul", "a.npy", "a.npy"]);
    r.code(1).one_error_line(
        "a.npy: dtype <c16 is not supported by matmul (real numbers, read as float32)",
    );
    assert!(!r.stderr.contains("int32"), "{}", r.stderr);

    run(&["devices", "--device", "nonsense"])
        .code(1)
        .one_error_line("no adapter name contains \"nonsense\"");
}

// -vv used to print nothing more than -v.
#[test]
fn very_verbose_says_more_than_verbose() {
    let dir = tempdir();
    let d = dir.path();
    let hopper = fixture("hopper.png");
    let run_v = |v: &str| {
        run_in(
            Some(d),
            &["--backend", "cpu", v, "blur", &hopper, "-o", "o.png"],
        )
    };
    let (v, vv) = (run_v("-v"), run_v("-vv"));
    v.code(0);
    vv.code(0);
    assert!(
        vv.stderr.contains("hopper.png: 256x300, 3 channels, 8-bit"),
        "{}",
        vv.stderr
    );
    assert!(
        vv.stderr.contains("o.png: written atomically"),
        "{}",
        vv.stderr
    );
    assert!(!v.stderr.contains("o.png"), "{}", v.stderr);
}

// Issue 24: every path gpukit writes (JSON documents, reports, diff folders, outputs a glob's
// `..` leads to) is checked against every input by identity, not flag by flag.
#[test]
fn no_output_path_replaces_an_input() {
    let dir = tempdir();
    let d = dir.path();
    let img = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("a.png"), &img).unwrap();
    let cpu = |args: &[&str]| {
        let mut all = vec!["--backend", "cpu"];
        all.extend_from_slice(args);
        run_in(Some(d), &all)
    };
    // A report or a --json document through a link named .json that leads to an input.
    std::os::unix::fs::symlink("a.png", d.join("alias.json")).unwrap();
    cpu(&[
        "blur",
        "a.png",
        "-r",
        "1",
        "-o",
        "o.png",
        "--report",
        "alias.json",
    ])
    .code(2)
    .one_error_line("alias.json: names an input file (the same file as a.png)");
    cpu(&["compare", "a.png", "a.png", "--json", "alias.json"]).code(2);
    assert_eq!(std::fs::read(d.join("a.png")).unwrap(), img);

    // merge --json onto one of its documents, and a re-run over its own earlier output.
    std::fs::create_dir(d.join("rep")).unwrap();
    cpu(&["histogram", "a.png", "--sum", "--json", "rep/s1.json"]).code(0);
    std::fs::copy(d.join("a.png"), d.join("b.png")).unwrap();
    cpu(&["histogram", "b.png", "--sum", "--json", "rep/s2.json"]).code(0);
    let s1 = std::fs::read(d.join("rep/s1.json")).unwrap();
    cpu(&[
        "merge",
        "rep/s1.json",
        "rep/s2.json",
        "--json",
        "rep/s1.json",
    ])
    .code(2)
    .one_error_line("rep/s1.json: names an input file");
    assert_eq!(std::fs::read(d.join("rep/s1.json")).unwrap(), s1);
    cpu(&[
        "merge",
        "rep/s1.json",
        "rep/s2.json",
        "--json",
        "rep/all.json",
    ])
    .code(0);
    let all = std::fs::read(d.join("rep/all.json")).unwrap();
    let merged: serde_json::Value = serde_json::from_slice(&all).unwrap();
    assert_eq!(merged["sum"]["inputs"], 2);
    cpu(&[
        "merge",
        "rep/all.json",
        "rep/s1.json",
        "rep/s2.json",
        "--json",
        "rep/all.json",
    ])
    .code(2);
    assert_eq!(std::fs::read(d.join("rep/all.json")).unwrap(), all);

    // A --diff folder inside the golden folder would put diff images over golden ones.
    for sub in ["golden/d", "out"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::write(d.join("golden/a.png"), &img).unwrap();
    std::fs::write(d.join("golden/d/a.png"), &img).unwrap();
    std::fs::write(d.join("out/a.png"), b"").unwrap();
    cpu(&["compare", "golden", "out", "--diff", "golden/d"])
        .code(2)
        .one_error_line("golden/d: --diff lies inside the EXPECTED folder golden");
    cpu(&["compare", "golden", "out", "--diff", "golden/d/../d/new"]).code(2);
    assert_eq!(std::fs::read(d.join("golden/d/a.png")).unwrap(), img);

    // A glob whose `..` climbs out of its fixed part would write outside --out-dir (here,
    // over the input itself).
    std::fs::create_dir_all(d.join("in/x")).unwrap();
    std::fs::write(d.join("in/x/a.png"), &img).unwrap();
    cpu(&["blur", "in/*/../../a.png", "-r", "1", "--out-dir", "o"])
        .code(2)
        .one_error_line("in/x/../../a.png: the pattern's `..` climbs above its fixed part");
    assert_eq!(std::fs::read(d.join("a.png")).unwrap(), img);
}

// Issue 24: the same document twice, or a merged document among its shards, would count
// every input twice.
#[test]
fn merge_refuses_documents_that_overlap() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::copy(fixture("hopper.png"), d.join("a.png")).unwrap();
    let cpu = |args: &[&str]| {
        let mut all = vec!["--backend", "cpu"];
        all.extend_from_slice(args);
        run_in(Some(d), &all)
    };
    cpu(&["histogram", "a.png", "--json", "s.json"]).code(0);
    std::os::unix::fs::symlink("s.json", d.join("t.json")).unwrap();
    std::fs::copy(d.join("s.json"), d.join("copy.json")).unwrap();
    cpu(&["merge", "s.json", "s.json"])
        .code(2)
        .one_error_line("s.json: given twice");
    cpu(&["merge", "s.json", "t.json"]).code(2);
    cpu(&["merge", "s.json", "copy.json"])
        .code(2)
        .one_error_line("copy.json: lists a.png, which s.json lists too");
    cpu(&["histogram", "--merge", "s.json", "copy.json"]).code(2);
    cpu(&[
        "blur", "a.png", "-r", "1", "-o", "o.png", "--report", "r.json",
    ])
    .code(0);
    cpu(&["merge", "r.json", "r.json"]).code(2);
}

// Issue 24: checks up front and messages that say what is wrong: a read-only --out-dir
// before any decoding, gray+alpha to BMP (its alpha was dropped with exit 0), a gray image
// against an RGB one of another size (said the layout differed), `[1.0]` as u32 (said "1 is
// not an integer"; now taken), and a file named `-` in --files-from (was read from stdin).
#[test]
fn checks_come_first_and_messages_say_what_is_wrong() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    let img = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("a.png"), &img).unwrap();
    std::fs::set_permissions(d.join("a.png"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir(d.join("ro")).unwrap();
    std::fs::set_permissions(d.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = gpukit_as_nobody()
        .current_dir(d)
        .args([
            "--backend",
            "cpu",
            "-vv",
            "blur",
            "a.png",
            "-r",
            "1",
            "--out-dir",
            "ro",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("ro: cannot write here"), "{err}");
    // -vv says each image's size as it is decoded: none was.
    assert!(!err.contains("256x300"), "{err}");

    let cpu = |args: &[&str]| {
        let mut all = vec!["--backend", "cpu"];
        all.extend_from_slice(args);
        run_in(Some(d), &all)
    };
    let la = gpukit::io::image::Image::new_u8(3, 2, 2, (0..12).map(|i| i * 20).collect());
    gpukit::io::image::save(&d.join("la.png"), la).unwrap();
    cpu(&["blur", "la.png", "-r", "1", "-o", "la.bmp"])
        .code(1)
        .one_error_line("la.bmp: cannot keep the input's layout (BMP stores no gray+alpha)");
    assert!(!d.join("la.bmp").exists());

    let gray = gpukit::io::image::Image::new_u8(5, 5, 1, vec![7; 25]);
    gpukit::io::image::save(&d.join("g.png"), gray).unwrap();
    let r = cpu(&["compare", "g.png", "a.png"]);
    r.code(1);
    assert!(
        r.stdout.contains("MISMATCH (size): size differs"),
        "{}",
        r.stdout
    );

    // A float with no fraction is taken as that integer (docs/scan.md); 1.5 is refused.
    std::fs::write(d.join("f.json"), "[1.0, 2.0]").unwrap();
    let r = cpu(&["scan", "f.json", "--dtype", "u32", "--inclusive"]);
    r.code(0);
    assert_eq!(r.stdout.split_whitespace().collect::<String>(), "[1,3]");
    std::fs::write(d.join("h.json"), "[1.5]").unwrap();
    cpu(&["scan", "h.json", "--dtype", "u32", "-o", "s.json"])
        .code(1)
        .one_error_line("h.json: element [0]: 1.5 is not an integer (u32)");
    // A whole float is taken as the integer it is (main's numpy work); one that is not says
    // so with its point kept, not as a bare integer.
    std::fs::write(d.join("f.json"), "[1.0, 2.0]").unwrap();
    cpu(&["scan", "f.json", "--dtype", "u32", "-o", "s.json"]).code(0);
    let sums: Vec<u32> =
        serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap()).unwrap();
    assert_eq!(sums, [0, 1]);
    std::fs::write(d.join("f.json"), "[1.5]").unwrap();
    cpu(&["scan", "f.json", "--dtype", "u32", "-o", "s.json"])
        .code(1)
        .one_error_line("1.5 is not an integer (u32)");

    std::fs::write(d.join("-"), &img).unwrap();
    std::fs::write(d.join("list.txt"), "-\n").unwrap();
    let r = cpu(&["histogram", "--files-from", "list.txt", "--json", "-"]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["inputs"][0]["pixels"], 256 * 300);
}
