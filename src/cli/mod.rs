//! The command line: clap definitions, the shared context, and one runner per subcommand.

mod bench;
mod blur;
mod compare;
mod ctx;
mod devices;
pub mod exit;
mod generate;
mod histogram;
mod inputs;
mod matmul;
mod merge;
mod outputs;
mod resize;
mod scan;
pub mod term;
mod text;
pub(crate) mod tune;
mod video;

use std::ffi::OsString;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::gpu::{BackendChoice, DeviceSelector};
pub use ctx::Ctx;
pub use exit::Status;
use term::ColorChoice;

/// Shared-memory WGSL compute pipelines on a headless GPU: the image and array operations below.
#[derive(Debug, Parser)]
#[command(name = "gpukit", version, after_help = exit::HELP, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// `--backend`'s values: the library's [`BackendChoice`] as clap sees them (the library
/// knows no clap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Vulkan,
    Metal,
    Dx12,
    Gl,
    Cpu,
}

impl From<Backend> for BackendChoice {
    fn from(b: Backend) -> BackendChoice {
        match b {
            Backend::Vulkan => BackendChoice::Vulkan,
            Backend::Metal => BackendChoice::Metal,
            Backend::Dx12 => BackendChoice::Dx12,
            Backend::Gl => BackendChoice::Gl,
            Backend::Cpu => BackendChoice::Cpu,
        }
    }
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
    pub backend: Option<Backend>,
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
    /// Flush each output file to disk (fsync) before naming it, so that a crash of the
    /// system or a power loss cannot leave a named file whose data is not on disk. Without
    /// it a stopped or killed gpukit still leaves the old file or the whole new one.
    #[arg(long, global = true, env = "GPUKIT_FSYNC",
          value_parser = clap::builder::FalseyValueParser::new())]
    pub fsync: bool,
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
    /// Resize images as Pillow's Image.resize does, byte for byte (lanczos3, bicubic,
    /// bilinear, box, nearest), on every engine.
    Resize(resize::ResizeArgs),
    /// Prefix sum, min or max of an array (exclusive or inclusive; u32, i32, f32).
    Scan(scan::ScanArgs),
    /// Measure the kernels' workgroup sizes and tile shapes on this adapter and cache the
    /// fastest, which the ops then use (docs/tune.md).
    Tune(tune::TuneArgs),
}

/// Starts rayon's pool (the CPU engine, decoding) now, so that a thread that cannot be
/// started (a process limit, `ulimit -u`) is one error line, not a panic in the middle of
/// the work. A pool started already (the library used before) is kept.
fn start_worker_threads() -> Result<()> {
    use std::error::Error;
    match rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("gpukit-worker-{i}"))
        .build_global()
    {
        Err(e) if e.source().is_some() => Err(anyhow::anyhow!(
            "cannot start gpukit's worker threads: {e} (a limit on processes or threads, \
             such as ulimit -u?)"
        )),
        _ => Ok(()),
    }
}

/// When the command started, for `--timings`' wall time.
pub(crate) static STARTED: OnceLock<Instant> = OnceLock::new();

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
    crate::io::output::set_fsync(cli.global.fsync);
    start_worker_threads()?;
    let ctx = Ctx::new(cli.global);
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
        Command::Resize(args) => resize::run(&ctx, args),
        Command::Scan(args) => scan::run(&ctx, args),
        Command::Tune(args) => tune::run(&ctx, args),
    }
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
            // Best effort, as every line on stderr (`term::stderr_line`).
            let _ =
                std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("{}", e.render()));
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

pub use crate::io::print_stdout;
