//! The context every runner gets: the global options, opening the engine the options ask
//! for, the read options, and notes, warnings and timings on stderr; and the batch driver's
//! view of it.

use anyhow::Result;

use super::{term, GlobalArgs, STARTED};
use crate::gpu::{self, Choice, DeviceRequest, DeviceSelector, Engine, Reason, Timings};

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
    /// The context of a run with these global options.
    pub fn new(global: GlobalArgs) -> Ctx {
        Ctx {
            global,
            engine_line: std::sync::Mutex::new(None),
            gpu_saving: std::sync::Mutex::new(None),
        }
    }

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
            backend: self.global.backend.map(Into::into),
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
        let note: fn(&str) = |m| term::stderr_line("gpukit:", m);
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
            term::stderr_line("gpukit:", msg);
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
            term::stderr_line("gpukit: timing:", line);
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
            term::stderr_line("gpukit:", &line);
        }
    }
}

impl crate::batch::driver::Env for Ctx {
    fn note(&self, msg: &str) {
        Ctx::note(self, msg);
    }

    fn detail(&self, msg: &str) {
        Ctx::detail(self, msg);
    }

    fn warn(&self, msg: &str) {
        Ctx::warn(self, msg);
    }

    fn error(&self, msg: &str) {
        term::stderr_line(term::error_prefix(), msg);
    }

    fn quiet(&self) -> bool {
        self.global.quiet
    }

    fn progress(&self, len: u64, hidden: bool) -> indicatif::ProgressBar {
        term::progress(len, hidden)
    }

    fn read_options(&self) -> crate::io::image::ReadOptions {
        Ctx::read_options(self)
    }

    fn estimate(&self, gpu_saving: std::time::Duration) {
        Ctx::estimate(self, gpu_saving);
    }

    fn several_devices(&self) -> bool {
        matches!(
            self.global.device,
            Some(DeviceSelector::All | DeviceSelector::List(_))
        )
    }

    fn native_cpu_at_once(&self) -> bool {
        !self.several_devices() && gpu::native_cpu_at_once(&self.request(true))
    }

    fn open_engines(&self, several: bool, timings: &mut Timings) -> Result<Vec<Engine>> {
        if several {
            self.work_engines(timings)
        } else {
            Ok(vec![self.work_engine(timings)?])
        }
    }

    fn report_timings(&self, timings: &Timings) {
        Ctx::report_timings(self, timings);
    }

    fn accept(
        &self,
        path: &std::path::Path,
        decoded: crate::io::image::Decoded,
    ) -> crate::io::image::Image {
        Ctx::accept(self, path, decoded)
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

/// A warning line on stderr (the caches' warn function).
fn warn_line(msg: &str) {
    term::stderr_line(term::warning_prefix(), msg);
}
