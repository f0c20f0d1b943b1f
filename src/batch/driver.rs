//! The one batch driver every image subcommand runs on: the engines opened once (one device,
//! or several), the pipeline's stages around them, the progress bar, each file's error printed
//! in input order, and every file's outcome and the engines' timings handed back in order.
//! It knows nothing of flags: what it needs of the command line comes through [`Env`].

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;

use super::pipeline::{Outcome, Panicked, Pipeline, StageTimes, Stages};
use crate::gpu::{Engine, Timings};
use crate::io::image::{Decoded, Image, ReadOptions};

/// What a batch needs of its caller (the command line's context): where notes, warnings and
/// errors go, how images are read, and how the engines are opened.
pub trait Env: Sync {
    /// A note on stderr, unless quiet.
    fn note(&self, msg: &str);
    /// A note on stderr at the highest verbosity.
    fn detail(&self, msg: &str);
    /// A warning on stderr, printed even when quiet.
    fn warn(&self, msg: &str);
    /// One file's error line on stderr.
    fn error(&self, msg: &str);
    /// Whether progress bars and notes are silenced.
    fn quiet(&self) -> bool;
    /// A progress bar of `len` files, hidden when `hidden` or not on a terminal.
    fn progress(&self, len: u64, hidden: bool) -> ProgressBar;
    /// How images are read (damage allowed, size limits).
    fn read_options(&self) -> ReadOptions;
    /// Tells the engine choice what a GPU would save on the whole job.
    fn estimate(&self, gpu_saving: Duration);
    /// Whether the devices asked for are several (`--device all` or a list).
    fn several_devices(&self) -> bool;
    /// Whether the engine that does the work is the native CPU engine, known without loading
    /// any driver (so opening it first costs nothing).
    fn native_cpu_at_once(&self) -> bool {
        false
    }
    /// Opens the engine that does the work (`several`: every device asked for).
    fn open_engines(&self, several: bool, timings: &mut Timings) -> Result<Vec<Engine>>;
    /// Reports the batch's timings (when asked for).
    fn report_timings(&self, timings: &Timings);

    /// Reads and decodes one image with the read options, warning of damage let through.
    fn load_image(&self, path: &Path) -> Result<Image> {
        let decoded = crate::io::image::load_with(path, &self.read_options())?;
        Ok(self.accept(path, decoded))
    }

    /// The image of a decode, warning when it was damaged and let through.
    fn accept(&self, path: &Path, decoded: Decoded) -> Image {
        if let Some(damage) = &decoded.damage {
            self.warn(&format!("{}: {damage} (decoded anyway)", path.display()));
        }
        decoded.image
    }
}

/// The devices of a batch (one, or every one asked for), opened once by whichever engine
/// thread starts first; the others wait for them. An error is kept as its message (and
/// whether it was a usage error), for every thread to return.
pub struct Engines {
    several: bool,
    cell: OnceLock<Result<Vec<Engine>, (bool, String)>>,
}

impl Engines {
    /// One engine (`several` false), or every device the options name.
    pub fn new(several: bool) -> Engines {
        Engines {
            several,
            cell: OnceLock::new(),
        }
    }

    /// The engines, opened on the first call, which adds the phases of opening to `timings`.
    pub fn get(&self, env: &dyn Env, timings: &mut Timings) -> Result<&[Engine]> {
        let opened = self.cell.get_or_init(|| {
            env.open_engines(self.several, timings)
                .map_err(|e| (crate::is_usage(&e), format!("{e:#}")))
        });
        match opened {
            Ok(engines) => Ok(engines),
            Err((true, msg)) => Err(crate::UsageError(msg.clone()).into()),
            Err((false, msg)) => Err(anyhow::anyhow!("{msg}")),
        }
    }

    /// The engines opened, none if they were not (or failed to).
    pub fn opened(&self) -> &[Engine] {
        match self.cell.get() {
            Some(Ok(engines)) => engines,
            _ => &[],
        }
    }
}

/// One run of the driver: its caller, the pipeline's width and the engines.
pub struct Run<'a> {
    pub env: &'a dyn Env,
    pub pipeline: Pipeline,
    pub engines: &'a Engines,
    /// Hide the progress bar (one file, JSON on stdout).
    pub hide: bool,
}

/// What a batch made: every file's outcome in input order (its engine is the device's
/// index), what each engine thread's `finish` made, and the engine threads' timings.
pub struct Driven<O, F> {
    pub outcomes: Vec<Outcome<O>>,
    pub finished: Vec<F>,
    pub engine_timings: Vec<Timings>,
}

impl<O, F> Driven<O, F> {
    /// The stages' times summed over the files.
    pub fn stage_times(&self) -> StageTimes {
        let mut sum = StageTimes::default();
        for o in &self.outcomes {
            sum.add(&o.times);
        }
        sum
    }
}

/// An engine thread's state: the op's, and what the thread measured.
struct Held<S> {
    state: S,
    timings: Timings,
}

impl<'a> Run<'a> {
    /// Runs `items` through the stages. `start` gets the engine (device `n % devices` for
    /// engine thread `n`), `engine` and `finish` the thread's timings too. As each file ends,
    /// in input order, its error is printed when `print` says so, and `ended` sees it (with
    /// the progress bar out of the way). An error from opening the engines ends the batch.
    #[allow(clippy::type_complexity)]
    pub fn drive<T, D, R, O, S, F, Dec, Start, Eng, Enc, Fin>(
        &self,
        items: &[T],
        name: impl Fn(&T) -> String,
        stages: Stages<Dec, Start, Eng, Enc, Fin>,
        print: impl Fn(&anyhow::Error) -> bool,
        mut ended: impl FnMut(usize, &Result<O>),
    ) -> Result<Driven<O, F>>
    where
        T: Sync,
        D: Send,
        R: Send,
        O: Send,
        F: Send,
        Dec: Fn(&T) -> Result<D> + Sync,
        Start: Fn(&'a Engine, usize) -> Result<S> + Sync,
        Eng: Fn(&mut S, &mut Timings, &T, D) -> Result<R> + Sync,
        Enc: Fn(&T, R) -> Result<O> + Sync,
        Fin: Fn(S, &mut Timings) -> Result<F> + Sync,
    {
        let engines: &'a Engines = self.engines;
        let env = self.env;
        let Stages {
            decode,
            start,
            engine,
            encode,
            finish,
        } = stages;
        let stages = Stages {
            decode,
            start: |n| -> Result<Held<S>> {
                let mut timings = Timings::default();
                let opened = engines.get(env, &mut timings)?;
                let state = start(&opened[n % opened.len()], n)?;
                Ok(Held { state, timings })
            },
            engine: |h: &mut Held<S>, item: &T, d: D| engine(&mut h.state, &mut h.timings, item, d),
            encode,
            finish: |mut h: Held<S>| {
                let made = finish(h.state, &mut h.timings)?;
                Ok((made, h.timings))
            },
        };
        let bar = env.progress(items.len() as u64, self.hide);
        let mut slots: Vec<Option<Outcome<O>>> = items.iter().map(|_| None).collect();
        let mut printed = 0;
        let on_done = |mut outcome: Outcome<O>| {
            let file = name(&items[outcome.index]);
            // A stage's panic unwound past the context that names the file: name it here.
            outcome.result = outcome.result.map_err(|e| match Panicked::is(&e) {
                true => e.context(file.clone()),
                false => e,
            });
            bar.set_message(file);
            bar.inc(1);
            let i = outcome.index;
            slots[i] = Some(outcome);
            while let Some(Some(o)) = slots.get(printed) {
                if let Err(e) = &o.result {
                    if print(e) {
                        bar.suspend(|| env.error(&format!("{e:#}")));
                    }
                }
                bar.suspend(|| ended(printed, &o.result));
                printed += 1;
            }
        };
        // Engines opened before the batch (the caller's choice), all on the cores: every
        // stage of a file on one thread.
        let opened = engines.opened();
        let finished = match !opened.is_empty() && opened.iter().all(|e| matches!(e, Engine::Cpu)) {
            true => self.pipeline.run_fused(items, stages, on_done),
            false => self.pipeline.run(items, stages, on_done),
        };
        bar.finish_and_clear();
        let devices = engines.opened().len().max(1);
        let (finished, engine_timings) = finished?.into_iter().unzip();
        let outcomes = slots
            .into_iter()
            .map(|o| {
                let mut o = o.expect("every file ends");
                o.engine = o.engine.map(|n| n % devices);
                o
            })
            .collect();
        Ok(Driven {
            outcomes,
            finished,
            engine_timings,
        })
    }
}
