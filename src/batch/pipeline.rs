//! The batch pipeline: inputs decode on a pool of threads, one engine works on one image at a
//! time while others decode and encode, and outputs encode on the pool. Bounded queues sit
//! between the stages, so at most `jobs` images decode, `depth` wait for the engine, one is in
//! the engine, `depth` wait for an encoder and `jobs` encode: memory is bounded whatever the
//! batch's size. What a file becomes never depends on the timing; only the order in which
//! files finish does.

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
}

impl Pipeline {
    /// `jobs` threads (the core count when `None`), and a queue as deep as the pool is wide.
    pub fn new(jobs: Option<usize>) -> Pipeline {
        let jobs = jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        Pipeline { jobs, depth: jobs }
    }
}

/// Where one file's time went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StageTimes {
    pub decode_ms: f64,
    /// Decoded, waiting for the engine.
    pub wait_ms: f64,
    pub engine_ms: f64,
    pub encode_ms: f64,
}

impl StageTimes {
    /// The stages as `--timings` phases.
    pub fn phases(&self) -> [(&'static str, Duration); 4] {
        let d = |ms: f64| Duration::from_secs_f64(ms / 1e3);
        [
            ("decode", d(self.decode_ms)),
            ("queue wait", d(self.wait_ms)),
            ("engine", d(self.engine_ms)),
            ("encode", d(self.encode_ms)),
        ]
    }
}

/// One file through the pipeline: its index in the batch and how it ended (with what the
/// encode stage gave back).
pub struct Outcome<O> {
    pub index: usize,
    pub result: Result<O>,
    pub times: StageTimes,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The stages of one batch. `decode` and `encode` run on the pool (`encode` may also just hand
/// the engine's result back, for work that writes no file per input); `start` (opening the
/// device, say) and `engine` run on one thread of their own, so the device opens while the
/// first files decode.
pub struct Stages<Dec, Start, Eng, Enc, Fin> {
    pub decode: Dec,
    pub start: Start,
    pub engine: Eng,
    pub encode: Enc,
    /// Runs on the engine thread after the last file, for work that spans the batch (the
    /// sum of histograms, its plot) and to hand back what the engine measured.
    pub finish: Fin,
}

impl Pipeline {
    /// Runs every item through the stages, calling `done` on this thread as each file ends.
    /// A file's error is its own and the batch goes on; an error from `start` stops the batch
    /// and is returned once the files in flight end.
    /// Returns what `finish` made of the engine's state.
    pub fn run<T, D, R, O, S, F, Dec, Start, Eng, Enc, Fin>(
        &self,
        items: &[T],
        stages: Stages<Dec, Start, Eng, Enc, Fin>,
        mut done: impl FnMut(Outcome<O>),
    ) -> Result<F>
    where
        T: Sync,
        D: Send,
        R: Send,
        O: Send,
        F: Send,
        Dec: Fn(&T) -> Result<D> + Sync,
        Start: FnOnce() -> Result<S> + Send,
        Eng: FnMut(&mut S, &T, D) -> Result<R> + Send,
        Enc: Fn(&T, R) -> Result<O> + Sync,
        Fin: FnOnce(S) -> Result<F> + Send,
    {
        let Stages {
            decode,
            start,
            mut engine,
            encode,
            finish,
        } = stages;
        let (decode, encode) = (&decode, &encode);
        let next = &AtomicUsize::new(0);
        let stop = &AtomicBool::new(false);
        let (decoded_tx, decoded_rx) = mpsc::sync_channel(self.depth);
        let (result_tx, result_rx) = mpsc::sync_channel::<(usize, R, StageTimes)>(self.depth);
        let result_rx = &Mutex::new(result_rx);
        let (done_tx, done_rx) = mpsc::channel::<Outcome<O>>();
        std::thread::scope(|s| {
            for _ in 0..self.jobs {
                let decoded_tx = decoded_tx.clone();
                s.spawn(move || loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= items.len() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let t0 = Instant::now();
                    let result = decode(&items[index]);
                    let times = StageTimes {
                        decode_ms: ms(t0.elapsed()),
                        ..StageTimes::default()
                    };
                    if decoded_tx
                        .send((index, result, times, Instant::now()))
                        .is_err()
                    {
                        break;
                    }
                });
            }
            drop(decoded_tx);

            let engine_done = done_tx.clone();
            let engine_thread = s.spawn(move || -> Result<F> {
                let mut state = match start() {
                    Ok(state) => state,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                };
                for (index, decoded, mut times, queued) in decoded_rx {
                    times.wait_ms = ms(queued.elapsed());
                    let t0 = Instant::now();
                    let out = decoded.and_then(|d| engine(&mut state, &items[index], d));
                    times.engine_ms = ms(t0.elapsed());
                    match out {
                        Ok(r) => {
                            if result_tx.send((index, r, times)).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            let outcome = Outcome {
                                index,
                                result: Err(e),
                                times,
                            };
                            if engine_done.send(outcome).is_err() {
                                break;
                            }
                        }
                    }
                }
                drop(result_tx);
                finish(state)
            });

            for _ in 0..self.jobs {
                let done_tx = done_tx.clone();
                s.spawn(move || loop {
                    // The lock is held only while waiting for the next image.
                    let next = result_rx.lock().expect("no encoder panics").recv();
                    let Ok((index, r, mut times)) = next else {
                        break;
                    };
                    let t0 = Instant::now();
                    let result = encode(&items[index], r);
                    times.encode_ms = ms(t0.elapsed());
                    let outcome = Outcome {
                        index,
                        result,
                        times,
                    };
                    if done_tx.send(outcome).is_err() {
                        break;
                    }
                });
            }
            drop(done_tx);

            for outcome in done_rx {
                done(outcome);
            }
            engine_thread
                .join()
                .expect("the engine stage does not panic")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Squaring = Stages<
        Box<dyn Fn(&u32) -> Result<u64> + Sync>,
        fn() -> Result<Vec<u32>>,
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
            start: || Ok(Vec::new()),
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
            let pipeline = Pipeline { jobs, depth };
            let mut ended = vec![0u32; items.len()];
            let seen = pipeline
                .run(&items, stages_squaring(Some(17)), |o| {
                    ended[o.index] += 1;
                    assert_eq!(o.result.is_err(), o.index == 17, "item {}", o.index);
                })
                .unwrap();
            assert!(ended.iter().all(|&n| n == 1), "jobs {jobs}: {ended:?}");
            let mut seen = seen;
            seen.sort();
            let expect: Vec<u32> = (0..200).filter(|&x| x != 17).collect();
            assert_eq!(seen, expect, "the engine saw each decoded item once");
        }
    }

    #[test]
    fn a_failed_start_ends_the_batch_with_its_error() {
        let items: Vec<u32> = (0..50).collect();
        let stages = Stages {
            start: || -> Result<()> { anyhow::bail!("no device") },
            decode: |&x: &u32| Ok(x),
            engine: |_: &mut (), _: &u32, d: u32| Ok(d),
            encode: |_: &u32, _: u32| Ok(()),
            finish: |_: ()| Ok(()),
        };
        let mut ended = 0;
        let err = Pipeline { jobs: 2, depth: 1 }
            .run(&items, stages, |_| ended += 1)
            .unwrap_err();
        assert_eq!(err.to_string(), "no device");
        assert_eq!(ended, 0);
    }

    #[test]
    fn an_engine_error_fails_its_file_only() {
        let items: Vec<u32> = (0..100).collect();
        let stages = Stages {
            start: || Ok(()),
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
        Pipeline { jobs: 2, depth: 1 }
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
