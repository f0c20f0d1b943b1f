//! The 8-bit passes' shapes (the horizontal pass's tile, the rows a thread sums in each pass,
//! the workgroup-memory budget) and how `gpukit tune resize` searches them. The generic
//! kernels (16-bit, odd rows, very large reductions) have no tunables.

use anyhow::{bail, Result};

use super::rows::{BUDGET_WORDS, TILE_WIDTHS, WG_SIZE};
use super::{Filter, ResizePlan};
use crate::bench::{self, Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::tune::{self, Level, OpTuning, SizeClass, Stage, Tunable};

/// The 8-bit passes' shapes. Any choice gives the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Output columns a workgroup of the horizontal pass first tried (a power of two from 8
    /// to 64); where its input does not fit the budget, the narrower ones in turn.
    pub tile_w: u32,
    /// Rows a thread of the horizontal pass sums (1 to 8), each weight read once for all (2:
    /// 4 was 1.19x slower on an H200, call AP-resize4-3 in docs/BENCHMARKS.md).
    pub rows_a_thread: u32,
    /// Output rows a thread of the vertical pass makes at one word column (1 to 8).
    pub v_rows: u32,
    /// Words a thread of the vertical pass makes in each of its rows (1, 2 or 4: read and
    /// written in one access); fewer where a row's words are not a multiple.
    #[serde(default = "default_v_words")]
    pub v_words: u32,
    /// The vertical pass's rows and words a thread where the reduction is a whole number
    /// whose regular rows take their weights as constants, a thread's rows walked together
    /// (`columns::WordColumns`).
    #[serde(default = "default_v_regular")]
    pub v_regular: (u32, u32),
    /// The most words of workgroup memory a horizontal tile may use (the adapter's limit
    /// caps it; 0, below any tile, takes the generic kernels: tests reach them so).
    pub budget_words: u32,
    /// Threads a workgroup of the horizontal pass (64, 128 or 256): smaller ones fit more
    /// workgroups an SM, each waiting on its own loads and barriers.
    #[serde(default = "default_wg_size")]
    pub wg_size: u32,
    /// The horizontal pass of a whole-number reduction (wgsl/resize_h8s.wgsl, four output
    /// columns a thread): its tile's output columns (8 to 64, as `tile_w`), rows a thread
    /// (1 to 8) and threads a workgroup (64, 128 or 256).
    #[serde(default = "default_whole")]
    pub whole: (u32, u32, u32),
}

fn default_wg_size() -> u32 {
    WG_SIZE
}

fn default_v_words() -> u32 {
    Tunables::DEFAULT.v_words
}

fn default_v_regular() -> (u32, u32) {
    Tunables::DEFAULT.v_regular
}

fn default_whole() -> (u32, u32, u32) {
    Tunables::DEFAULT.whole
}

impl Tunables {
    pub const DEFAULT: Tunables = Tunables {
        tile_w: TILE_WIDTHS[0],
        rows_a_thread: 2,
        // Two words of two rows a thread: the vertical pass 8-10% faster than a word of 4
        // rows on every `bench resize` case (calls FN, FO in docs/BENCHMARKS.md).
        v_rows: 2,
        v_words: 2,
        // Where a thread's rows are walked together, four rows of a word: 1-4% faster than
        // 2 by 2 there, and 2-6% slower elsewhere (call FQ in docs/BENCHMARKS.md).
        v_regular: (4, 1),
        budget_words: BUDGET_WORDS,
        wg_size: WG_SIZE,
        // 4 rows of 64 columns, a row of four columns a thread: the 4K to 1080p resize
        // 1.28x faster than with resize_h8 (calls FC to FL in docs/BENCHMARKS.md).
        whole: (64, 1, 64),
    };
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tile {} columns, {} rows a thread, {} threads, vertical {} rows of {} words ({} of \
             {} at whole-number reductions), {} KiB, whole-number tile {} columns, {} rows a \
             thread, {} threads",
            self.tile_w,
            self.rows_a_thread,
            self.wg_size,
            self.v_rows,
            self.v_words,
            self.v_regular.0,
            self.v_regular.1,
            self.budget_words / 256,
            self.whole.0,
            self.whole.1,
            self.whole.2
        )
    }
}

impl Tunable for Tunables {
    fn default_for(limits: &wgpu::Limits) -> Self {
        Tunables {
            budget_words: BUDGET_WORDS.min(limits.max_compute_workgroup_storage_size / 4),
            ..Tunables::DEFAULT
        }
    }

    /// Whether the kernels can run this choice on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        self.check_shape()?;
        let max = limits.max_compute_workgroup_storage_size / 4;
        if !(256..=max).contains(&self.budget_words) {
            bail!("resize's workgroup-memory budget must be 256 to {max} words");
        }
        Ok(())
    }
}

impl Tunables {
    /// The shapes the 8-bit kernels' index arguments assume (they are built without bounds
    /// checks: src/ops/resize/rows.rs), whatever the budget: every plan checks them.
    pub fn check_shape(&self) -> Result<()> {
        let (whole_w, whole_rows, whole_wg) = self.whole;
        if !TILE_WIDTHS.contains(&self.tile_w) || !TILE_WIDTHS.contains(&whole_w) {
            bail!("resize's tile width must be one of {TILE_WIDTHS:?}");
        }
        if ![
            self.rows_a_thread,
            self.v_rows,
            self.v_regular.0,
            whole_rows,
        ]
        .iter()
        .all(|r| (1..=8).contains(r))
        {
            bail!("resize's rows a thread must be 1 to 8");
        }
        if ![self.v_words, self.v_regular.1]
            .iter()
            .all(|w| [1, 2, 4].contains(w))
        {
            bail!("resize's vertical words a thread must be 1, 2 or 4");
        }
        if ![self.wg_size, whole_wg]
            .iter()
            .all(|n| [64, 128, 256].contains(n))
        {
            bail!("resize's workgroup size must be 64, 128 or 256");
        }
        Ok(())
    }
}

/// `gpukit tune resize`: the 8-bit passes' shapes, RGBA8 images halved with lanczos3.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        tune::image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        vec![
            Stage {
                name: "tile",
                candidates: |best, _, quick| {
                    let tiles: &[(u32, u32)] = if quick {
                        &[(32, 4)]
                    } else {
                        &[(16, 4), (32, 2), (32, 4), (64, 2), (64, 4), (64, 8)]
                    };
                    tiles
                        .iter()
                        .map(|&(tile_w, rows_a_thread)| Tunables {
                            tile_w,
                            rows_a_thread,
                            ..*best
                        })
                        .collect()
                },
            },
            Stage {
                name: "workgroup",
                candidates: |best, _, quick| {
                    let sizes: &[u32] = if quick { &[] } else { &[64, 128, 256] };
                    sizes
                        .iter()
                        .map(|&wg_size| Tunables { wg_size, ..*best })
                        .collect()
                },
            },
            Stage {
                name: "vertical",
                candidates: |best, _, quick| {
                    let shapes: &[(u32, u32)] = if quick {
                        &[]
                    } else {
                        &[(1, 2), (2, 2), (4, 2), (2, 1), (4, 1), (1, 4), (2, 4)]
                    };
                    shapes
                        .iter()
                        .map(|&(v_rows, v_words)| Tunables {
                            v_rows,
                            v_words,
                            ..*best
                        })
                        .collect()
                },
            },
            Stage {
                name: "regular vertical",
                candidates: |best, _, quick| {
                    let shapes: &[(u32, u32)] = if quick {
                        &[]
                    } else {
                        &[(2, 1), (4, 1), (8, 1), (2, 2), (4, 2)]
                    };
                    shapes
                        .iter()
                        .map(|&v_regular| Tunables { v_regular, ..*best })
                        .collect()
                },
            },
            Stage {
                name: "whole",
                candidates: |best, _, quick| {
                    let shapes: &[(u32, u32, u32)] = if quick {
                        &[]
                    } else {
                        &[
                            (64, 1, 64),
                            (64, 1, 128),
                            (64, 1, 256),
                            (64, 2, 128),
                            (32, 1, 64),
                            (32, 1, 128),
                            (32, 2, 64),
                        ]
                    };
                    shapes
                        .iter()
                        .map(|&whole| Tunables { whole, ..*best })
                        .collect()
                },
            },
            Stage {
                name: "budget",
                candidates: |best, limits, quick| {
                    let words: &[u32] = if quick { &[] } else { &[4096, 6144, 8192] };
                    let max = limits.max_compute_workgroup_storage_size / 4;
                    words
                        .iter()
                        .filter(|&&w| w <= max)
                        .map(|&budget_words| Tunables {
                            budget_words,
                            ..*best
                        })
                        .collect()
                },
            },
        ]
    }

    /// Both pass orders (149x103 to 76x50, 97x400 to 88x40) and a whole-number reduction
    /// (152x103 to 76x50), gray to RGBA, against the CPU engine.
    fn verify(_: &Engine, gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
        let shapes = [
            ((149, 103), (76, 50)),
            ((97, 400), (88, 40)),
            ((152, 103), (76, 50)),
        ];
        for ((w, h), (ow, oh)) in shapes {
            for c in 1..=4u8 {
                let n = (w * h * u32::from(c)) as usize;
                let img = Image::new_u8(w, h, c, bench::noise_bytes(n, 5 + u32::from(c)));
                let options = super::Options::new(
                    super::Size::Exact {
                        width: ow,
                        height: oh,
                    },
                    Filter::Lanczos3,
                );
                let want = super::engine::resize(&img, &options)?;
                let passes = super::passes(w, h, ow, oh, Filter::Lanczos3, 8);
                let plan = ResizePlan::with_tunables(gpu, &img, &passes, Filter::Lanczos3, *t)?;
                plan.write(gpu, &img);
                gpu.run_timed(&mut Timings::default(), 1, |b, _| plan.record(b))?;
                if plan.read(gpu)? != want {
                    return Ok(Some(format!(
                        "{} to {ow}x{oh} differs from the CPU engine",
                        img.describe()
                    )));
                }
            }
        }
        Ok(None)
    }

    /// The class's RGBA8 image with lanczos3 (both 8-bit passes): halved where the stage
    /// shapes the whole-number reductions' kernels, to two fifths (resize_h8) elsewhere.
    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        stage: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        let img = class.image();
        let (ow, oh) = if matches!(stage, "whole" | "regular vertical") {
            (img.width / 2, img.height / 2)
        } else {
            (img.width * 2 / 5, img.height * 2 / 5)
        };
        let passes = super::passes(img.width, img.height, ow, oh, Filter::Lanczos3, 8);
        let plan = ResizePlan::with_tunables(gpu, img, &passes, Filter::Lanczos3, *t)?;
        plan.write(gpu, img);
        let name = format!("{}x{} to {ow}x{oh} RGBA8 lanczos3", img.width, img.height);
        let work = f64::from(ow) * f64::from(oh);
        Ok(Case::gpu("resize", name, Unit::Gpixps, work, move |b| {
            plan.record(b)
        }))
    }
}
