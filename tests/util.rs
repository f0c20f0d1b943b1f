//! Helpers shared by the integration tests: run the built binary, open the test GPU.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gpukit::gpu::{open_gpu, DeviceRequest, Engine, Gpu};
use gpukit::io::image::Image;

/// What a run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts the exit code, showing both streams when it differs.
    #[track_caller]
    pub fn code(&self, want: i32) -> &Self {
        assert_eq!(
            self.code, want,
            "exit code {} (want {want})\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    /// Asserts stderr is a batch's errors, one line each starting `gpukit: ` and containing
    /// its needle, in this order, then the batch's summary line, which starts with
    /// `gpukit: ` and `summary` ("2 done, 0 skipped, 1 failed").
    #[track_caller]
    pub fn batch_errors(&self, needles: &[&str], summary: &str) -> &Self {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), needles.len() + 1, "{}", self.stderr);
        for (line, needle) in lines.iter().zip(needles) {
            assert!(
                line.starts_with("gpukit: ") && line.contains(needle),
                "{needle:?} not in {line:?}"
            );
        }
        let last = lines.last().expect("a summary line");
        assert!(
            last.starts_with(&format!("gpukit: {summary} in ")),
            "{summary:?} not in {last:?}"
        );
        self
    }

    /// Asserts stderr is exactly one line starting `gpukit:` and containing `needle`.
    #[track_caller]
    pub fn one_error_line(&self, needle: &str) -> &Self {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "want one stderr line, got:\n{}",
            self.stderr
        );
        assert!(lines[0].starts_with("gpukit: "), "{}", self.stderr);
        assert!(
            lines[0].contains(needle),
            "{:?} not in {:?}",
            needle,
            lines[0]
        );
        self
    }
}

/// The built `gpukit` binary with its environment cleared of gpukit's variables, and a
/// cache folder of its own (no user's tune or pipeline cache changes what a test sees).
pub fn gpukit() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpukit"));
    cmd.env_remove("GPUKIT_DEVICE")
        .env_remove("GPUKIT_BACKEND")
        .env_remove("GPUKIT_TUNE_CACHE")
        .env_remove("GPUKIT_PIPELINE_CACHE")
        .env_remove("GPUKIT_FSYNC")
        .env(
            "XDG_CACHE_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-cache"),
        )
        .env("NO_COLOR", "1");
    cmd
}

/// [`gpukit`] as the user `nobody` when the tests run as root (else as the user running
/// them), from a copy of the binary in a folder every user can enter: the checkout may lie
/// where others cannot (a clone in /root, or under `mktemp -d`).
pub fn gpukit_as_nobody() -> Command {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    static REACHABLE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = REACHABLE.get_or_init(|| {
        // One folder a build folder, reused run after run: a fresh one each run outlived the
        // run (a static is never dropped) and kept a 300 MB debug binary alive in each.
        let built = Path::new(env!("CARGO_BIN_EXE_gpukit"));
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            built.hash(&mut h);
            h.finish()
        };
        let dir = std::env::temp_dir().join(format!("gpukit-bin-{key:016x}"));
        std::fs::create_dir_all(dir.join("cache")).expect("a folder for the binary");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.join("cache"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        // Linked (or copied) under a name of this process's, then renamed over the last run's
        // binary: a test process of the same build running beside this one never sees a
        // missing or half-copied file.
        let bin = dir.join("gpukit");
        let fresh = dir.join(format!("gpukit.{}", std::process::id()));
        let _ = std::fs::remove_file(&fresh);
        if std::fs::hard_link(built, &fresh).is_err() {
            std::fs::copy(built, &fresh).expect("a copy of the binary");
        }
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&fresh, &bin).expect("the binary in place");
        // A rename between two links of one file does nothing, leaving the fresh name.
        let _ = std::fs::remove_file(&fresh);
        dir
    });
    let mut cmd = gpukit();
    let mut mine = Command::new(dir.join("gpukit"));
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => mine.env(k, v),
            None => mine.env_remove(k),
        };
    }
    mine.env("XDG_CACHE_HOME", dir.join("cache"));
    if rustix::process::geteuid().is_root() {
        mine.uid(65534).gid(65534);
    }
    cmd = mine;
    cmd
}

/// Runs the binary with `args` in `dir` (or the current directory).
pub fn run_in(dir: Option<&Path>, args: &[&str]) -> Run {
    let mut cmd = gpukit();
    cmd.args(args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("the gpukit binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn run(args: &[&str]) -> Run {
    run_in(None, args)
}

/// A fresh temporary directory for one test.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// The device the tests share (one per test binary, so each pipeline compiles once). Tests
/// that change their device (its limits or features) open their own with [`gpu`].
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::Gpu(Box::new(gpu())))
}

/// The shared device of [`engine`].
pub fn shared_gpu() -> &'static Gpu {
    match engine() {
        Engine::Gpu(g) => g,
        Engine::Cpu => unreachable!("the tests open a GPU"),
    }
}

/// Writes a GPU result and the CPU's, which differ, into a folder named after `what` under
/// the target's temp folder (`gpu.EXT` and `cpu.EXT`, each by `write`, in whatever format
/// shows it best), and returns the folder for the failing test to name.
pub fn dump_mismatch<T: ?Sized>(
    what: &str,
    ext: &str,
    gpu: &T,
    cpu: &T,
    write: impl Fn(&Path, &T),
) -> PathBuf {
    let name: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mismatch")
        .join(name);
    std::fs::create_dir_all(&dir).expect("a folder for the mismatch");
    write(&dir.join(format!("gpu.{ext}")), gpu);
    write(&dir.join(format!("cpu.{ext}")), cpu);
    dir
}

/// A private GPU device, for tests that change it. There is always one here and in CI
/// (lavapipe), so a missing adapter is a failure, not a reason to skip.
pub fn gpu() -> Gpu {
    // No tune cache: a user's cache must not change what the tests run.
    let request = DeviceRequest {
        tune: gpukit::tune::Settings::off(),
        ..DeviceRequest::default()
    };
    open_gpu(&request)
        .expect("GPU tests need a wgpu adapter: install mesa-vulkan-drivers for lavapipe")
}

/// A deterministic xorshift32 stream for test inputs: every bit pattern is likely, and the
/// same seed always gives the same data.
pub fn xorshift(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed.wrapping_mul(2654435761) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    }
}

/// A `width` x `height` image of `channels` samples of `bits` (8 or 16) bits, every sample
/// from [`xorshift`]`(seed)`.
pub fn random_image(width: u32, height: u32, channels: u8, bits: u32, seed: u32) -> Image {
    let n = (width * height * channels as u32) as usize;
    let mut next = xorshift(seed);
    if bits == 8 {
        let v = (0..n).map(|_| next() as u8).collect();
        Image::new_u8(width, height, channels, v)
    } else {
        let v = (0..n).map(|_| next() as u16).collect();
        Image::new_u16(width, height, channels, v)
    }
}

/// A FIFO at `path` (in a test's own temporary folder).
#[cfg(unix)]
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

/// Waits for `child` at most a minute: one that has not ended by then is killed and the test
/// fails, saying `what` hung (a hang fails the test instead of blocking it).
pub fn wait_or_hang(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
