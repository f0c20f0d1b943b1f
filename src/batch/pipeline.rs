//! The batch pipeline: inputs decode on a pool of threads, each engine thread works on one
//! image at a time while others decode and encode, and outputs encode on the pool. Bounded
//! queues sit between the stages, so at most `jobs` images decode, `depth` wait for an engine,
//! one is in each engine, `depth` wait for an encoder and `jobs` encode: memory is bounded
//! whatever the batch's size. What a file becomes never depends on the timing; only the order in which
//! files finish does. For an engine on the cores, `run_fused` runs every stage of a file on
//! one thread instead.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

/// How wide and how deep the pipeline is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pipeline {
    /// Threads that decode, and as many that encode.
    pub jobs: usize,
    /// Images that may wait between two stages.
    pub depth: usize,
    /// Engines (devices), each on a thread of its own, taking the next decoded image when
    /// free: a slow one takes fewer.
    pub engines: usize,
}

impl Pipeline {
    /// `jobs` threads (the core count when `None`), a queue as deep as the pool is wide, and
    /// one engine.
    pub fn new(jobs: Option<usize>) -> Pipeline {
        let jobs = jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        Pipeline {
            jobs,
            depth: jobs,
            engines: 1,
        }
    }
}

/// Where one file's time went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StageTimes {
    pub decode_ms: f64,
    /// Decoded, waiting for an engine.
    pub wait_ms: f64,
    pub engine_ms: f64,
    /// Done by the engine, waiting for an encoder.
    pub encode_wait_ms: f64,
    pub encode_ms: f64,
}

impl StageTimes {
    /// The stages as `--timings` phases.
    pub fn phases(&self) -> [(&'static str, Duration); 5] {
        let d = |ms: f64| Duration::from_secs_f64(ms / 1e3);
        [
            ("decode", d(self.decode_ms)),
            ("queue wait", d(self.wait_ms)),
            ("engine", d(self.engine_ms)),
            ("encode wait", d(self.encode_wait_ms)),
            ("encode", d(self.encode_ms)),
        ]
    }

    /// Adds `other`'s times to these (totals over files).
    pub fn add(&mut self, other: &StageTimes) {
        self.decode_ms += other.decode_ms;
        self.wait_ms += other.wait_ms;
        self.engine_ms += other.engine_ms;
        self.encode_wait_ms += other.encode_wait_ms;
        self.encode_ms += other.encode_ms;
    }
}

/// One file through the pipeline: its index in the batch, the engine that worked on it (none
/// when it failed to decode), and how it ended (with what the encode stage gave back).
pub struct Outcome<O> {
    pub index: usize,
    pub engine: Option<usize>,
    pub result: Result<O>,
    pub times: StageTimes,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The stages of one batch. `decode` and `encode` run on the pool (`encode` may also just hand
/// the engine's result back, for work that writes no file per input); `start` (opening a
/// device, say), `engine` and `finish` run on each engine's thread, so the devices open
/// while the first files decode.
pub struct Stages<Dec, Start, Eng, Enc, Fin> {
    pub decode: Dec,
    /// Called with the engine's number, 0 to `engines - 1`.
    pub start: Start,
    pub engine: Eng,
    pub encode: Enc,
    /// Runs on each engine's thread after the last file, for work that spans the batch (the
    /// sum of histograms, its plot) and to hand back what the engine measured.
    pub finish: Fin,
}

/// A decoded file on its way to an engine: its index, the decode's result, its times so far
/// and when it was queued.
type Decoded<D> = (usize, Result<D>, StageTimes, Instant);
/// An engine's result on its way to an encoder: its index, the engine's number, the result,
/// its times so far and when it was queued.
type Processed<R> = (usize, usize, R, StageTimes, Instant);

impl Pipeline {
    /// Runs every item through the stages, calling `done` on this thread as each file ends.
    /// A file's error is its own and the batch goes on; an error from `start` stops the batch
    /// and is returned once the files in flight end. Returns what `finish` made of each
    /// engine's state, in engine order.
    pub fn run<T, D, R, O, S, F, Dec, Start, Eng, Enc, Fin>(
        &self,
        items: &[T],
        stages: Stages<Dec, Start, Eng, Enc, Fin>,
        mut done: impl FnMut(Outcome<O>),
    ) -> Result<Vec<F>>
    where
        T: Sync,
        D: Send,
        R: Send,
        O: Send,
        F: Send,
        Dec: Fn(&T) -> Result<D> + Sync,
        Start: Fn(usize) -> Result<S> + Sync,
        Eng: Fn(&mut S, &T, D) -> Result<R> + Sync,
        Enc: Fn(&T, R) -> Result<O> + Sync,
        Fin: Fn(S) -> Result<F> + Sync,
    {
        let Stages {
            decode,
            start,
            engine,
            encode,
            finish,
        } = &stages;
        let next = &AtomicUsize::new(0);
        let stop = &AtomicBool::new(false);
        let (decoded_tx, decoded_rx) = mpsc::sync_channel::<Decoded<D>>(self.depth);
        let decoded_rx = &Mutex::new(decoded_rx);
        let (result_tx, result_rx) = mpsc::sync_channel::<Processed<R>>(self.depth);
        let result_rx = &Mutex::new(result_rx);
        let (done_tx, done_rx) = mpsc::channel::<Outcome<O>>();
        // A thread that cannot be started (a process limit) stops the batch with an error;
        // the stages that did start are drained here, so none waits for ever.
        let mut refused: Option<std::io::Error> = None;
        let mut spawned = |r: std::io::Result<()>| match r {
            Ok(()) => true,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                refused.get_or_insert(e);
                false
            }
        };
        let finished = std::thread::scope(|s| {
            let thread = |name: &str| std::thread::Builder::new().name(format!("gpukit-{name}"));
            for _ in 0..self.jobs {
                let tx = decoded_tx.clone();
                let t = thread("decode")
                    .spawn_scoped(s, move || decoder(items, decode, next, stop, tx));
                spawned(t.map(drop));
            }
            drop(decoded_tx);
            let mut engines = Vec::new();
            for n in 0..self.engines.max(1) {
                let ends = (decoded_rx, result_tx.clone(), done_tx.clone());
                let t = thread("engine").spawn_scoped(s, move || -> Result<F> {
                    let state = started(start, n, stop, decoded_rx)?;
                    let state = work(n, items, (engine, start), state, ends, stop)?;
                    guarded(|| finish(state))
                });
                match t {
                    Ok(t) => engines.push(t),
                    Err(e) => drop(spawned(Err(e))),
                }
            }
            drop(result_tx);
            if engines.is_empty() {
                while decoded_rx.lock().expect("no engine panics").recv().is_ok() {}
            }
            let mut encoders = 0;
            for _ in 0..self.jobs {
                let tx = done_tx.clone();
                let t =
                    thread("encode").spawn_scoped(s, move || encoder(items, encode, result_rx, tx));
                encoders += usize::from(spawned(t.map(drop)));
            }
            if encoders == 0 {
                while result_rx.lock().expect("no encoder panics").recv().is_ok() {}
            }
            drop(done_tx);
            calling_back(done_rx, &mut done, stop);
            engines
                .into_iter()
                .map(|e| e.join().expect("an engine stage does not panic"))
                .collect::<Result<Vec<F>>>()
        });
        match refused {
            Some(e) => Err(anyhow::Error::new(e).context("cannot start a thread of the batch")),
            None => finished,
        }
    }
}

impl Pipeline {
    /// [`Pipeline::run`] with every stage of a file on one thread, for an engine on the cores
    /// (the native CPU engine): `jobs` workers, one a thread of a rayon pool of their own,
    /// each with its own state from `start` (called with the worker's number), take the next
    /// item and decode it, run the engine on it and encode the result. No image is handed
    /// between threads (its samples stay in the caches of the core that decoded them), and at
    /// most `jobs` images are in flight, so the buffers they hand back serve every later file.
    /// What the engine splits into rayon tasks (the blur's tiles) runs on the same pool: a
    /// worker with no file left takes over others' tasks at the batch's end. Returns what
    /// `finish` made of each worker's state, in worker order.
    pub fn run_fused<T, D, R, O, S, F, Dec, Start, Eng, Enc, Fin>(
        &self,
        items: &[T],
        stages: Stages<Dec, Start, Eng, Enc, Fin>,
        mut done: impl FnMut(Outcome<O>),
    ) -> Result<Vec<F>>
    where
        T: Sync,
        O: Send,
        F: Send,
        Dec: Fn(&T) -> Result<D> + Sync,
        Start: Fn(usize) -> Result<S> + Sync,
        Eng: Fn(&mut S, &T, D) -> Result<R> + Sync,
        Enc: Fn(&T, R) -> Result<O> + Sync,
        Fin: Fn(S) -> Result<F> + Sync,
    {
        let refused = |e| anyhow::Error::new(e).context("cannot start a thread of the batch");
        // One job a thread (a broadcast, not spawned tasks): a worker waiting for a task it
        // split off never picks up another worker's whole loop.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.jobs)
            .thread_name(|_| "gpukit-work".into())
            .build()
            .map_err(|e| refused(std::io::Error::other(e)))?;
        let next = &AtomicUsize::new(0);
        let stop = &AtomicBool::new(false);
        let stages = &stages;
        let (done_tx, done_rx) = mpsc::channel::<Outcome<O>>();
        std::thread::scope(|s| {
            let workers = std::thread::Builder::new()
                .name("gpukit-batch".into())
                .spawn_scoped(s, move || {
                    pool.broadcast(|ctx| {
                        let tx = done_tx.clone();
                        fused_worker(ctx.index(), items, stages, (next, stop), tx)
                    })
                })
                .map_err(refused)?;
            calling_back(done_rx, &mut done, stop);
            let finished = workers.join().expect("a batch worker does not panic");
            finished.into_iter().collect()
        })
    }
}

/// Worker `n` of [`Pipeline::run_fused`]: its state, then the next item through every stage
/// until none is left or a worker could not start.
fn fused_worker<T, D, R, O, S, F, Dec, Start, Eng, Enc, Fin>(
    n: usize,
    items: &[T],
    stages: &Stages<Dec, Start, Eng, Enc, Fin>,
    (next, stop): (&AtomicUsize, &AtomicBool),
    done_tx: mpsc::Sender<Outcome<O>>,
) -> Result<F>
where
    Dec: Fn(&T) -> Result<D>,
    Start: Fn(usize) -> Result<S>,
    Eng: Fn(&mut S, &T, D) -> Result<R>,
    Enc: Fn(&T, R) -> Result<O>,
    Fin: Fn(S) -> Result<F>,
{
    let start =
        || guarded(|| (stages.start)(n)).inspect_err(|_| stop.store(true, Ordering::Relaxed));
    let mut state = start()?;
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= items.len() || stop.load(Ordering::Relaxed) {
            break;
        }
        let item = &items[index];
        let mut times = StageTimes::default();
        let t0 = Instant::now();
        let decoded = guarded(|| (stages.decode)(item));
        times.decode_ms = ms(t0.elapsed());
        // No engine worked on a file that did not decode (the report's `device` is null).
        let engine = decoded.is_ok().then_some(n);
        let t0 = Instant::now();
        let made = decoded.and_then(|d| guarded(|| (stages.engine)(&mut state, item, d)));
        times.engine_ms = ms(t0.elapsed());
        // A panic may have left the state half changed: the next file gets a fresh one.
        if made.as_ref().is_err_and(Panicked::is) {
            state = start()?;
        }
        let t0 = Instant::now();
        let result = made.and_then(|r| guarded(|| (stages.encode)(item, r)));
        times.encode_ms = ms(t0.elapsed());
        let outcome = Outcome {
            index,
            engine,
            result,
            times,
        };
        if done_tx.send(outcome).is_err() {
            break;
        }
    }
    guarded(|| (stages.finish)(state))
}

/// A stage that panicked (a bug in gpukit) on an item: the item's error, which the caller
/// names the item in ([`Panicked::is`]).
#[derive(Debug)]
pub struct Panicked(String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "internal error (a bug in gpukit): {}", self.0)
    }
}

impl std::error::Error for Panicked {}

impl Panicked {
    /// Whether `e` is a stage's panic, which carries no item's name of its own.
    pub fn is(e: &anyhow::Error) -> bool {
        e.downcast_ref::<Panicked>().is_some()
    }
}

/// One stage on one item (or a thread's start or finish), a panic in it made an error: the
/// stage's thread goes on with the next item, so no other stage waits for ever on its queue,
/// and the batch ends with the item's error as with any other.
fn guarded<X>(stage: impl FnOnce() -> Result<X>) -> Result<X> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(stage)).unwrap_or_else(|panic| {
        let what = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
            (Some(s), _) => s.to_string(),
            (None, Some(s)) => s.clone(),
            (None, None) => "a panic".to_string(),
        };
        Err(Panicked(what).into())
    })
}

/// Hands each outcome to the caller's `done`. If `done` panics, the batch stops, the other
/// outcomes are still taken (so that no stage waits for ever to hand one over), and the
/// panic goes on once the queue is closed.
fn calling_back<O>(
    done_rx: mpsc::Receiver<Outcome<O>>,
    done: &mut impl FnMut(Outcome<O>),
    stop: &AtomicBool,
) {
    let mut panic = None;
    for outcome in done_rx {
        if panic.is_none() {
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(outcome)));
            if let Err(p) = called {
                stop.store(true, Ordering::Relaxed);
                panic = Some(p);
            }
        }
    }
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
}

/// A decoding thread: takes the next item until none is left or the batch stops.
fn decoder<T, D>(
    items: &[T],
    decode: &impl Fn(&T) -> Result<D>,
    next: &AtomicUsize,
    stop: &AtomicBool,
    tx: mpsc::SyncSender<Decoded<D>>,
) {
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= items.len() || stop.load(Ordering::Relaxed) {
            break;
        }
        let t0 = Instant::now();
        let result = guarded(|| decode(&items[index]));
        let times = StageTimes {
            decode_ms: ms(t0.elapsed()),
            ..StageTimes::default()
        };
        if tx.send((index, result, times, Instant::now())).is_err() {
            break;
        }
    }
}

/// Starts engine `n`. On failure the batch stops, and the queue is drained so that no
/// decoder waits forever to hand over an image.
fn started<S, D>(
    start: &impl Fn(usize) -> Result<S>,
    n: usize,
    stop: &AtomicBool,
    decoded_rx: &Mutex<mpsc::Receiver<Decoded<D>>>,
) -> Result<S> {
    match guarded(|| start(n)) {
        Ok(state) => Ok(state),
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            while decoded_rx.lock().expect("no engine panics").recv().is_ok() {}
            Err(e)
        }
    }
}

/// The channel ends an engine thread uses: decoded images in, results out to the encoders,
/// failures straight to the caller.
type EngineEnds<'a, D, R, O> = (
    &'a Mutex<mpsc::Receiver<Decoded<D>>>,
    mpsc::SyncSender<Processed<R>>,
    mpsc::Sender<Outcome<O>>,
);

/// Engine `n`'s loop: the next decoded image whenever it is free, until the queue closes. A
/// panic in the engine may have left its state half changed, so the next image gets a fresh
/// one from `start` (which failing stops the batch, as at the start).
fn work<T, D, R, O, S>(
    n: usize,
    items: &[T],
    (engine, start): (
        &impl Fn(&mut S, &T, D) -> Result<R>,
        &impl Fn(usize) -> Result<S>,
    ),
    mut state: S,
    (decoded_rx, result_tx, done_tx): EngineEnds<'_, D, R, O>,
    stop: &AtomicBool,
) -> Result<S> {
    loop {
        // The lock is held only while waiting for the next image.
        let next = decoded_rx.lock().expect("no engine panics").recv();
        let Ok((index, decoded, mut times, queued)) = next else {
            break;
        };
        times.wait_ms = ms(queued.elapsed());
        // No engine worked on a file that did not decode (the report's `device` is null).
        let worked = decoded.is_ok().then_some(n);
        let t0 = Instant::now();
        let out = decoded.and_then(|d| guarded(|| engine(&mut state, &items[index], d)));
        times.engine_ms = ms(t0.elapsed());
        let restart = out.as_ref().is_err_and(Panicked::is);
        let sent = match out {
            Ok(r) => result_tx.send((index, n, r, times, Instant::now())).is_ok(),
            Err(e) => {
                let outcome = Outcome {
                    index,
                    engine: worked,
                    result: Err(e),
                    times,
                };
                done_tx.send(outcome).is_ok()
            }
        };
        if !sent {
            break;
        }
        if restart {
            state = started(start, n, stop, decoded_rx)?;
        }
    }
    Ok(state)
}

/// An encoding thread: the next engine result until the engines are done.
fn encoder<T, R, O>(
    items: &[T],
    encode: &impl Fn(&T, R) -> Result<O>,
    result_rx: &Mutex<mpsc::Receiver<Processed<R>>>,
    done_tx: mpsc::Sender<Outcome<O>>,
) {
    loop {
        // The lock is held only while waiting for the next image.
        let next = result_rx.lock().expect("no encoder panics").recv();
        let Ok((index, engine, r, mut times, queued)) = next else {
            break;
        };
        times.encode_wait_ms = ms(queued.elapsed());
        let t0 = Instant::now();
        let result = guarded(|| encode(&items[index], r));
        times.encode_ms = ms(t0.elapsed());
        let outcome = Outcome {
            index,
            engine: Some(engine),
            result,
            times,
        };
        if done_tx.send(outcome).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Squaring = Stages<
        Box<dyn Fn(&u32) -> Result<u64> + Sync>,
        fn(usize) -> Result<Vec<u32>>,
        fn(&mut Vec<u32>, &u32, u64) -> Result<u64>,
        fn(&u32, u64) -> Result<()>,
        fn(Vec<u32>) -> Result<Vec<u32>>,
    >;

    fn stages_squaring(fail_at: Option<u32>) -> Squaring {
        Stages {
            decode: Box::new(move |&x: &u32| {
                if Some(x) == fail_at {
                    anyhow::bail!("{x}: cannot decode");
                }
                Ok(u64::from(x))
            }),
            start: |_| Ok(Vec::new()),
            engine: |seen: &mut Vec<u32>, &x: &u32, d: u64| {
                seen.push(x);
                Ok(d * d)
            },
            encode: |&x: &u32, r: u64| {
                assert_eq!(r, u64::from(x) * u64::from(x));
                Ok(())
            },
            finish: Ok,
        }
    }

    #[test]
    fn every_item_ends_once_whatever_the_width_and_depth() {
        let items: Vec<u32> = (0..200).collect();
        for (jobs, depth) in [(1, 1), (2, 1), (3, 2), (8, 8)] {
            let pipeline = Pipeline {
                jobs,
                depth,
                engines: jobs.min(3),
            };
            let mut ended = vec![0u32; items.len()];
            let seen = pipeline
                .run(&items, stages_squaring(Some(17)), |o| {
                    ended[o.index] += 1;
                    assert_eq!(o.result.is_err(), o.index == 17, "item {}", o.index);
                    // No engine worked on the file that did not decode.
                    assert_eq!(o.engine.is_none(), o.index == 17, "item {}", o.index);
                })
                .unwrap();
            assert!(ended.iter().all(|&n| n == 1), "jobs {jobs}: {ended:?}");
            let mut seen: Vec<u32> = seen.into_iter().flatten().collect();
            seen.sort();
            let expect: Vec<u32> = (0..200).filter(|&x| x != 17).collect();
            assert_eq!(seen, expect, "the engine saw each decoded item once");
        }
    }

    #[test]
    fn a_stage_that_panics_fails_its_item_and_the_batch_goes_on() {
        // Before: a panicking encoder left the engines blocked on its full queue for ever, so
        // the batches run on a thread of their own and a hang fails the test.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(std::panic::catch_unwind(panicking_batches)));
        let ran = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the batches end");
        let ended = ran.expect("no panic escapes but the callback's");
        for (what, ended) in ended {
            assert!(ended.iter().all(|&n| n == 1), "{what}: {ended:?}");
        }
    }

    /// Batches whose decode, engine and encode each panic on one item (9, 13 and 5), on both
    /// pipelines: each item's outcome is checked, the engine's state after its panic is a
    /// fresh one, and how many times each item ended is returned. Then batches whose start,
    /// finish or callback panics: each ends (with an error, or the callback's panic).
    fn panicking_batches() -> Vec<(String, Vec<u32>)> {
        let stages = || Stages {
            decode: |&x: &u32| -> Result<u64> {
                assert_ne!(x, 9, "decode panics");
                Ok(u64::from(x))
            },
            start: (|_| Ok(Vec::new())) as fn(usize) -> Result<Vec<u32>>,
            engine: |seen: &mut Vec<u32>, &x: &u32, d: u64| -> Result<u64> {
                seen.push(x);
                assert_ne!(x, 13, "engine panics");
                Ok(d * 2)
            },
            encode: |&x: &u32, r: u64| -> Result<u64> {
                assert_ne!(x, 5, "encode panics");
                Ok(r + 1)
            },
            finish: Ok as fn(Vec<u32>) -> Result<Vec<u32>>,
        };
        let items: Vec<u32> = (0..60).collect();
        let check = |ended: &mut [u32], o: Outcome<u64>| {
            ended[o.index] += 1;
            let x = items[o.index];
            match o.result {
                Ok(v) => assert_eq!(v, 2 * u64::from(x) + 1, "item {x}"),
                Err(e) => {
                    assert!([5, 9, 13].contains(&x), "item {x}: {e:#}");
                    assert!(Panicked::is(&e), "{e:#}");
                    let e = format!("{e:#}");
                    assert!(e.contains("internal error (a bug in gpukit)"), "{e}");
                    assert!(e.contains("panics"), "the panic's message: {e}");
                }
            }
        };
        // The state the engine's panic left is dropped: no finished state saw item 13.
        let fresh = |states: Vec<Vec<u32>>| assert!(states.iter().all(|s| !s.contains(&13)));
        let mut out = Vec::new();
        for jobs in [1, 3] {
            let pipeline = Pipeline {
                jobs,
                depth: 1,
                engines: 1,
            };
            let mut ended = vec![0u32; items.len()];
            fresh(
                pipeline
                    .run(&items, stages(), |o| check(&mut ended, o))
                    .unwrap(),
            );
            out.push((format!("jobs {jobs}"), ended));
            let mut ended = vec![0u32; items.len()];
            fresh(
                Pipeline::new(Some(jobs))
                    .run_fused(&items, stages(), |o| check(&mut ended, o))
                    .unwrap(),
            );
            out.push((format!("fused, jobs {jobs}"), ended));
        }
        // A start or a finish that panics is the batch's error; a callback that panics stops
        // the batch, and its panic goes on once every stage has ended.
        let pipeline = Pipeline {
            jobs: 1,
            depth: 1,
            engines: 1,
        };
        let mut s = stages();
        s.start = |_| panic!("start panics");
        let e = pipeline.run(&items, s, |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("start panics"), "{e:#}");
        let mut s = stages();
        s.start = |_| panic!("start panics");
        let e = Pipeline::new(Some(2))
            .run_fused(&items, s, |_| {})
            .unwrap_err();
        assert!(format!("{e:#}").contains("start panics"), "{e:#}");
        let mut s = stages();
        s.finish = |_| panic!("finish panics");
        let e = pipeline.run(&items, s, |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("finish panics"), "{e:#}");
        for fused in [false, true] {
            let callback = |o: Outcome<u64>| assert!(o.index < 3, "the callback panics");
            let ran = std::panic::catch_unwind(|| match fused {
                false => pipeline.run(&items, stages(), callback),
                true => Pipeline::new(Some(2)).run_fused(&items, stages(), callback),
            });
            assert!(ran.is_err(), "fused {fused}: the callback's panic goes on");
        }
        out
    }

    #[test]
    fn fused_every_item_ends_once_and_a_failed_start_ends_the_batch() {
        let items: Vec<u32> = (0..200).collect();
        for jobs in [1, 3] {
            let pipeline = Pipeline::new(Some(jobs));
            let mut ended = vec![0u32; items.len()];
            let seen = pipeline
                .run_fused(&items, stages_squaring(Some(17)), |o| {
                    ended[o.index] += 1;
                    assert_eq!(o.result.is_err(), o.index == 17, "item {}", o.index);
                    assert_eq!(o.engine.is_none(), o.index == 17, "item {}", o.index);
                    // No engine worked on the file that did not decode.
                    assert_eq!(o.engine.is_none(), o.index == 17, "item {}", o.index);
                })
                .unwrap();
            assert_eq!(seen.len(), jobs, "one state a worker");
            assert!(ended.iter().all(|&n| n == 1), "jobs {jobs}: {ended:?}");
            let mut seen: Vec<u32> = seen.into_iter().flatten().collect();
            seen.sort();
            let expect: Vec<u32> = (0..200).filter(|&x| x != 17).collect();
            assert_eq!(seen, expect, "the engine saw each decoded item once");
        }
        let stages = Stages {
            start: |_| -> Result<()> { anyhow::bail!("no device") },
            decode: |&x: &u32| Ok(x),
            engine: |_: &mut (), _: &u32, d: u32| Ok(d),
            encode: |_: &u32, _: u32| Ok(()),
            finish: |_: ()| Ok(()),
        };
        let mut ended = 0;
        let err = Pipeline::new(Some(2))
            .run_fused(&items, stages, |_| ended += 1)
            .unwrap_err();
        assert_eq!(err.to_string(), "no device");
        assert_eq!(ended, 0);
    }

    #[test]
    fn a_slow_engine_takes_fewer_images() {
        let items: Vec<u32> = (0..40).collect();
        let stages = Stages {
            start: |engine| Ok(engine),
            decode: |&x: &u32| Ok(x),
            engine: |&mut engine: &mut usize, _: &u32, d: u32| {
                // Engine 1 is ten times slower than engine 0.
                let ms = if engine == 0 { 1 } else { 10 };
                std::thread::sleep(Duration::from_millis(ms));
                Ok(d)
            },
            encode: |_: &u32, _: u32| Ok(()),
            finish: Ok,
        };
        let mut by_engine = [0; 2];
        let pipeline = Pipeline {
            jobs: 2,
            depth: 2,
            engines: 2,
        };
        let finished = pipeline
            .run(&items, stages, |o| by_engine[o.engine.unwrap()] += 1)
            .unwrap();
        assert_eq!(finished, [0, 1], "each engine's finish, in engine order");
        assert_eq!(by_engine[0] + by_engine[1], 40);
        assert!(by_engine[0] > 2 * by_engine[1], "{by_engine:?}");
    }

    #[test]
    fn a_failed_start_ends_the_batch_with_its_error() {
        let items: Vec<u32> = (0..50).collect();
        let stages = Stages {
            start: |_| -> Result<()> { anyhow::bail!("no device") },
            decode: |&x: &u32| Ok(x),
            engine: |_: &mut (), _: &u32, d: u32| Ok(d),
            encode: |_: &u32, _: u32| Ok(()),
            finish: |_: ()| Ok(()),
        };
        let mut ended = 0;
        let err = Pipeline {
            jobs: 2,
            depth: 1,
            engines: 1,
        }
        .run(&items, stages, |_| ended += 1)
        .unwrap_err();
        assert_eq!(err.to_string(), "no device");
        assert_eq!(ended, 0);
    }

    #[test]
    fn an_engine_error_fails_its_file_only() {
        let items: Vec<u32> = (0..100).collect();
        let stages = Stages {
            start: |_| Ok(()),
            decode: |&x: &u32| Ok(x),
            engine: |_: &mut (), &x: &u32, d: u32| {
                if x % 10 == 2 {
                    return Err(crate::UsageError("radius too large".into()).into());
                }
                Ok(d)
            },
            encode: |_: &u32, _: u32| Ok(()),
            finish: |_: ()| Ok(()),
        };
        let mut failed = Vec::new();
        Pipeline {
            jobs: 2,
            depth: 1,
            engines: 1,
        }
        .run(&items, stages, |o| {
            if o.result.is_err() {
                failed.push(o.index)
            }
        })
        .unwrap();
        failed.sort();
        assert_eq!(failed, [2, 12, 22, 32, 42, 52, 62, 72, 82, 92]);
    }
}
