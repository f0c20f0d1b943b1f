//! The command line: clap definitions, the shared context, and one runner per subcommand.

mod bench;
mod blur;
mod compare;
mod devices;
pub mod exit;
mod generate;
mod histogram;
mod inputs;
mod matmul;
mod merge;
mod scan;
pub mod term;
pub(crate) mod tune;

use std::ffi::OsString;
use std::io::Write;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::gpu::{
    self, BackendChoice, Choice, DeviceRequest, DeviceSelector, Engine, Reason, Timings,
};
pub use exit::Status;
use term::ColorChoice;

/// Shared-memory WGSL compute pipelines on a headless GPU: blur, histogram, scan, matmul.
#[derive(Debug, Parser)]
#[command(name = "gpukit", version, after_help = exit::HELP, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes, shown under their own heading in every subcommand's help.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Adapter to use: its index in `gpukit devices` or a part of its name.
    #[arg(long, global = true, env = "GPUKIT_DEVICE", value_name = "N|NAME")]
    pub device: Option<DeviceSelector>,
    /// Restrict adapters to one backend; `cpu` runs gpukit's native multi-threaded CPU engine.
    #[arg(long, global = true, env = "GPUKIT_BACKEND", value_enum)]
    pub backend: Option<BackendChoice>,
    /// No progress bars and no notes on stderr (errors and warnings still print).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Say which engine runs the work and why, which tuned shapes the ops use and what the
    /// pipeline cache did (-v); also each input's size and layout and how each output is
    /// written (-vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print the engine and why, wall time per phase and GPU time per pass on stderr.
    #[arg(long, global = true)]
    pub timings: bool,
    /// The tune cache to read (and `gpukit tune` to write) instead of this adapter's file in
    /// the user's cache folder (docs/tune.md).
    #[arg(long, global = true, env = "GPUKIT_TUNE_CACHE", value_name = "FILE")]
    pub tune_cache: Option<std::path::PathBuf>,
    /// Use the ops' default shapes, not the tune cache's (`gpukit tune`: write no cache).
    #[arg(long, global = true)]
    pub no_tune_cache: bool,
    /// The pipeline cache (compiled kernels, Vulkan) to read and write instead of this
    /// adapter's file beside the tune cache (docs/tune.md).
    #[arg(
        long,
        global = true,
        env = "GPUKIT_PIPELINE_CACHE",
        value_name = "FILE"
    )]
    pub pipeline_cache: Option<std::path::PathBuf>,
    /// Neither read nor write the pipeline cache: compile every kernel afresh.
    #[arg(long, global = true)]
    pub no_pipeline_cache: bool,
    /// Accept truncated or corrupt images (bad checksums, damaged data) as far as they
    /// decode, with a warning, instead of refusing them.
    #[arg(long, global = true)]
    pub allow_damaged: bool,
    /// Refuse images whose decoded samples would take more than SIZE (bytes, or with a
    /// suffix: 512MiB, 4GiB), read from the header before any pixel is decoded.
    #[arg(long, global = true, env = "GPUKIT_MAX_IMAGE_BYTES", value_name = "SIZE",
          default_value = "2GiB", value_parser = crate::io::image::parse_byte_size)]
    pub max_image_bytes: u64,
    /// Colour on stderr. `auto` means on a terminal, unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Blur images with a separable box or gaussian filter (bit-exact on every adapter).
    Blur(blur::BlurArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    Completions(generate::CompletionsArgs),
    /// Compare images (or folders of them) against expected ones: counts, PSNR, SSIM, a diff
    /// image; exits 0 on a match, 1 on a mismatch, 2 on trouble, as cmp does.
    Compare(compare::CompareArgs),
    /// List the adapters gpukit can use, with their limits and features.
    Devices(devices::DevicesArgs),
    /// Measure the kernels on synthetic inputs (GPU time from timestamp queries).
    Bench(bench::BenchArgs),
    /// Print gpukit's man page, or a subcommand's, in roff on stdout (`gpukit man blur |
    /// man -l -`), or write them all into a folder (--out-dir).
    Man(generate::ManArgs),
    /// Per-channel histograms of images (red, green, blue, luminance or gray), exact, with
    /// statistics, JSON and a plot.
    Histogram(histogram::HistogramArgs),
    /// Multiply two matrices, C = op(A) op(B), with sums in f32.
    Matmul(matmul::MatmulArgs),
    /// Merge the JSON documents of shards (histogram --json, blur --report) into the one an
    /// unsharded run writes (docs/scale-out.md).
    Merge(merge::MergeArgs),
    /// Prefix sum, min or max of an array (exclusive or inclusive; u32, i32, f32).
    Scan(scan::ScanArgs),
    /// Measure the kernels' workgroup sizes and tile shapes on this adapter and cache the
    /// fastest, which the ops then use (docs/tune.md).
    Tune(tune::TuneArgs),
}

/// What every runner gets: the global options, and ways to report.
pub struct Ctx {
    pub global: GlobalArgs,
    /// The engine line of the devices opened (`engine: ...: why`), for `--timings`.
    engine_line: std::sync::Mutex<Option<String>>,
    /// What a GPU would save on the job, set by a runner that knows the job's size before it
    /// opens the engine ([`Ctx::estimate`]).
    gpu_saving: std::sync::Mutex<Option<std::time::Duration>>,
}

impl Ctx {
    /// The engine for measuring kernels (`bench`, `tune`): the adapter the options ask for
    /// (the CPU when there is none), without the pipeline cache.
    pub fn engine(&self, timings: &mut Timings) -> Result<Engine> {
        self.open_engine(timings, false)
    }

    /// The engine that does a command's work fastest: as [`Ctx::engine`], but on a machine
    /// whose best adapter is a software rasteriser (lavapipe, WARP), gpukit's native CPU
    /// engine, unless `--device` or `--backend` names the adapter; with the pipeline cache.
    pub fn work_engine(&self, timings: &mut Timings) -> Result<Engine> {
        self.open_engine(timings, true)
    }

    fn open_engine(&self, timings: &mut Timings, for_work: bool) -> Result<Engine> {
        let request = self.request(for_work);
        let (engine, choice) = gpu::open(&request)?;
        self.say_engines(std::slice::from_ref(&engine), choice, timings);
        Ok(engine)
    }

    /// Tells [`Ctx::work_engine`] what a GPU would save against the native CPU engine on the
    /// whole job (the engine's estimated time, less the GPU path's host time where the op
    /// knows it): a job saving under [`gpu::SMALL_JOB`] runs on that engine when no device or
    /// backend is named, without opening a GPU (docs/cli.md, "Choosing the device").
    pub fn estimate(&self, t: std::time::Duration) {
        *self.gpu_saving.lock().expect("estimate lock poisoned") = Some(t);
    }

    /// Every device `--device all` or a list names (one otherwise, as [`Ctx::work_engine`]),
    /// for a batch to share its files among.
    pub fn work_engines(&self, timings: &mut Timings) -> Result<Vec<Engine>> {
        let request = self.request(true);
        let (engines, choice) = gpu::open_all(&request)?;
        self.say_engines(&engines, choice, timings);
        Ok(engines)
    }

    /// The request for a command that does work (`for_work`: the native CPU engine rather
    /// than a software rasteriser, the pipeline cache) or measures kernels (`bench`, `tune`:
    /// the adapter, and no pipeline cache, which tune's candidates would fill with pipelines
    /// that no op builds).
    fn request(&self, for_work: bool) -> DeviceRequest {
        DeviceRequest {
            backend: self.global.backend,
            device: self.global.device.clone(),
            tune: self.tune_settings(),
            pipelines: if for_work {
                self.pipeline_settings()
            } else {
                gpu::pipeline_cache::Settings::off()
            },
            prefer_native_cpu: for_work,
            gpu_saving: if for_work {
                *self.gpu_saving.lock().expect("estimate lock poisoned")
            } else {
                None
            },
        }
    }

    /// The engine line (with `-v` now, with `--timings` at the end), the warning when there
    /// is no adapter at all, and the phases of opening added to `timings`.
    fn say_engines(&self, engines: &[Engine], choice: Choice, timings: &mut Timings) {
        timings.merge(&choice.timings);
        if choice.reason == Reason::NoAdapter {
            self.warn("no GPU adapter found; running on the CPU backend");
        }
        let line = choice.reason.line(engines);
        if self.global.verbose > 0 {
            self.note(&line);
        }
        *self.engine_line.lock().expect("engine line lock poisoned") = Some(line);
    }

    /// Where the ops find tuned shapes (`--tune-cache`, `--no-tune-cache`), with warnings on
    /// stderr and, with `-v`, a note of each op's choice.
    fn tune_settings(&self) -> crate::tune::Settings {
        crate::tune::Settings {
            source: cache_source(self.global.no_tune_cache, &self.global.tune_cache),
            note: self.note_fn(),
            warn: warn_line,
        }
    }

    /// Where the device keeps compiled pipelines (`--pipeline-cache`, `--no-pipeline-cache`),
    /// with warnings on stderr and, with `-v`, notes of what was read and written.
    fn pipeline_settings(&self) -> gpu::pipeline_cache::Settings {
        gpu::pipeline_cache::Settings {
            source: cache_source(self.global.no_pipeline_cache, &self.global.pipeline_cache),
            note: self.note_fn(),
            warn: warn_line,
        }
    }

    /// The note function of the caches: a `gpukit:` line on stderr with `-v` (not `--quiet`).
    fn note_fn(&self) -> Option<fn(&str)> {
        let note: fn(&str) = |m| eprintln!("gpukit: {m}");
        (self.global.verbose > 0 && !self.global.quiet).then_some(note)
    }

    /// How images are read: `--allow-damaged` and `--max-image-bytes`.
    pub fn read_options(&self) -> crate::io::image::ReadOptions {
        crate::io::image::ReadOptions {
            limits: crate::io::image::DecodeLimits {
                max_bytes: self.global.max_image_bytes,
                ..crate::io::image::DecodeLimits::DEFAULT
            },
            allow_damaged: self.global.allow_damaged,
        }
    }

    /// The image of a decode, warning on stderr when it was damaged (`--allow-damaged`).
    pub fn accept(
        &self,
        path: &std::path::Path,
        decoded: crate::io::image::Decoded,
    ) -> crate::io::image::Image {
        if let Some(damage) = &decoded.damage {
            self.warn(&format!("{}: {damage} (decoded anyway)", path.display()));
        }
        decoded.image
    }

    /// Reads and decodes one image with the global read options (`--allow-damaged`,
    /// `--max-image-bytes`), warning of damage let through.
    pub fn load_image(&self, path: &std::path::Path) -> Result<crate::io::image::Image> {
        let decoded = crate::io::image::load_with(path, &self.read_options())?;
        Ok(self.accept(path, decoded))
    }

    /// A note on stderr, unless `--quiet`.
    pub fn note(&self, msg: &str) {
        if !self.global.quiet {
            eprintln!("gpukit: {msg}");
        }
    }

    /// A note on stderr with `-vv` (unless `--quiet`).
    pub fn detail(&self, msg: &str) {
        if self.global.verbose > 1 {
            self.note(msg);
        }
    }

    /// A warning on stderr; printed even with `--quiet`.
    pub fn warn(&self, msg: &str) {
        warn_line(msg);
    }

    /// Prints `--timings` lines when asked: the engine and why, the phases, the pipelines
    /// built (their time is part of the phases), GPU time per pass.
    pub fn report_timings(&self, timings: &Timings) {
        if !self.global.timings {
            return;
        }
        if let Some(line) = &*self.engine_line.lock().expect("engine line lock poisoned") {
            eprintln!("gpukit: timing: {line}");
        }
        let (built, time) = gpu::pipelines_built();
        let mut lines = timings.lines();
        if built > 0 {
            // After the phases and their total, before the GPU passes.
            let at = timings.phases.len() + 1;
            lines.insert(
                at,
                format!(
                    "timing: {:<14} {:9.3} ms ({built} built; within the phases above)",
                    "pipelines",
                    time.as_secs_f64() * 1e3
                ),
            );
        }
        // The phases overlap (the device opens while inputs decode; a batch's stages run on
        // many threads), so their sum is not the time the command took: this is.
        if let Some(start) = STARTED.get() {
            let at = timings.phases.len() + 1;
            lines.insert(
                at,
                format!(
                    "timing: {:<14} {:9.3} ms (so far; the phases overlap)",
                    "wall",
                    start.elapsed().as_secs_f64() * 1e3
                ),
            );
        }
        for line in lines {
            eprintln!("gpukit: {line}");
        }
    }
}

/// A cache's place from its flags: `--no-...` turns it off, a file flag names it, else the
/// user's cache folder (the tune cache and the pipeline cache alike).
fn cache_source(off: bool, file: &Option<std::path::PathBuf>) -> crate::tune::Source {
    use crate::tune::Source;
    match (off, file) {
        (true, _) => Source::Off,
        (false, Some(p)) => Source::File(p.clone()),
        (false, None) => Source::UserCache,
    }
}

/// When the command started, for `--timings`' wall time.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Parses `args` and runs the subcommand. Usage errors come back as [`crate::UsageError`];
/// `--help` and `--version` print and succeed.
pub fn run<I, T>(args: I) -> Result<Status>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    STARTED.get_or_init(Instant::now);
    quiet_vulkan_layers();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    term::init_color(cli.global.color);
    let ctx = Ctx {
        global: cli.global,
        engine_line: std::sync::Mutex::new(None),
        gpu_saving: std::sync::Mutex::new(None),
    };
    match cli.command {
        Command::Blur(args) => blur::run(&ctx, args),
        Command::Completions(args) => generate::completions(args),
        Command::Compare(args) => compare::run(&ctx, args),
        Command::Devices(args) => devices::run(&ctx, args),
        Command::Bench(args) => bench::run(&ctx, args),
        Command::Histogram(args) => histogram::run(&ctx, args),
        Command::Man(args) => generate::man(args),
        Command::Merge(args) => merge::run(&ctx, args),
        Command::Matmul(args) => matmul::run(&ctx, args),
        Command::Scan(args) => scan::run(&ctx, args),
        Command::Tune(args) => tune::run(&ctx, args),
    }
}

/// A warning line on stderr (the caches' warn function).
fn warn_line(msg: &str) {
    eprintln!("{} {msg}", term::warning_prefix());
}

/// Mesa's implicit device-select Vulkan layer connects to Wayland to rank GPUs and prints
/// "error: XDG_RUNTIME_DIR is invalid" on headless machines (CI, servers). gpukit ranks
/// adapters itself, so it turns that layer off unless the user set the variable.
fn quiet_vulkan_layers() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // Called first thing in `run`, before any thread exists.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

/// clap's help and version go to stdout; its errors become one line and exit code 2.
fn clap_error(e: clap::Error) -> Result<Status> {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // clap styles help only where stdout is a terminal.
            e.print()?;
            Ok(Status::Success)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprint!("{}", e.render());
            Ok(Status::Usage)
        }
        _ => {
            // clap's message is its first paragraph ("error: ..." and, for missing
            // arguments, their names on the lines below); usage and tips follow a blank line.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            Err(crate::UsageError(format!("{message} (see gpukit --help)")).into())
        }
    }
}

/// Writes `text` to stdout; a closed pipe surfaces as an error `main` treats as success.
pub fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
