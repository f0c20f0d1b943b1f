//! The blur kernels' shape (workgroup rows, threads per line, positions per thread) and how
//! `gpukit tune` searches it: stages, the check against the CPU reference, the timed cases.

use anyhow::{ensure, Result};

use super::plan::{BlurPlan, Layout};
use super::{reference, GpuOptions, Kind, Options};
use crate::bench::{self, Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::tune::{self, max_invocations, pow2, Level, OpTuning, SizeClass, Stage, Tunable};

/// The shape of the blur kernels' work, which `gpukit tune` chooses per adapter and size.
/// Results are bit-identical for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Stored")]
pub struct Tunables {
    /// Box: lines per workgroup, threads per line, and positions per thread per chunk (1,
    /// 2, 4 or 8: the shader's `BOX_PPT`, a generated constant) of the passes whose
    /// intermediate has 24-bit lanes (images with alpha, 16-bit images: `box_ppt`) and of
    /// those whose intermediate is 16-bit (8-bit images without alpha: `box_ppt_narrow`).
    /// The two formats move 12 (RGBA, RGB16; 8 for gray+alpha, 4 for gray16) and 8 bytes a
    /// pixel between the passes and run best at
    /// different chunks (call DW: an H100's RGBA8 box 4.5-8.5% faster at 2 than at 4, its RGB8
    /// box 3% slower, then with a word a lane; call GT: 1.16x faster at 2 than 4 with 24-bit
    /// lanes).
    pub box_rows: u32,
    pub box_tpl: u32,
    pub box_ppt: u32,
    /// A tune cache written before this field's time holds none: the default.
    #[serde(default = "default_box_ppt_narrow")]
    pub box_ppt_narrow: u32,
    /// The box's lines per workgroup in the column passes of images the passes read in the
    /// host's layout (1 to 3 channels, 8- or 16-bit), whose last writes that layout: a position's
    /// bytes of 16 lines of RGB8 are 48, of 8 lines 24, less than a 32-byte sector (an H100's
    /// 4K RGB8 box column pass 0.066 ms at 8 lines, 0.056 at 16: call GM). A tune cache
    /// written before this field's time holds none: there these passes keep `box_rows`, as
    /// they were timed (`Stored`).
    pub box_rows_host: u32,
    /// Gaussian: the most lines per workgroup (fewer where the radius's staging does not
    /// fit workgroup memory), and threads per line (two or four outputs each).
    pub gauss_rows: u32,
    pub gauss_tpl: u32,
    /// The gaussian's most lines per workgroup where its intermediate is a word a channel
    /// (images with alpha, but for all-opaque 8-bit RGBA; 16-bit images), whose column pass
    /// stages 16 bytes a pixel: an H100 ran the 4K RGBA8 gaussian 4% faster at 2 lines than at 4,
    /// where the RGB8 one lost a quarter and more (call GJ). A tune cache written before
    /// this field's time holds none: there these passes keep `gauss_rows`.
    pub gauss_rows_wide: u32,
}

/// [`Tunables`] as a tune cache holds them: one written before a field's time holds none,
/// and the passes it names keep what that cache timed them at.
#[derive(serde::Deserialize)]
struct Stored {
    box_rows: u32,
    box_tpl: u32,
    box_ppt: u32,
    #[serde(default = "default_box_ppt_narrow")]
    box_ppt_narrow: u32,
    box_rows_host: Option<u32>,
    gauss_rows: u32,
    gauss_tpl: u32,
    gauss_rows_wide: Option<u32>,
}

impl From<Stored> for Tunables {
    fn from(s: Stored) -> Tunables {
        Tunables {
            box_rows: s.box_rows,
            box_tpl: s.box_tpl,
            box_ppt: s.box_ppt,
            box_ppt_narrow: s.box_ppt_narrow,
            box_rows_host: s.box_rows_host.unwrap_or(s.box_rows),
            gauss_rows: s.gauss_rows,
            gauss_tpl: s.gauss_tpl,
            gauss_rows_wide: s.gauss_rows_wide.unwrap_or(s.gauss_rows),
        }
    }
}

impl Tunables {
    /// The defaults, measured on an H200 at 4K (the gaussian: sigma 5 in 0.312 ms) and, for
    /// the box, on an H100 with an op's passes in one compute pass (`gpukit tune blur`, call
    /// EB: 8 lines of 16 threads, 2 positions a thread for RGBA8 in 0.154 ms at 4096x2048,
    /// 4 for RGB8 in 0.119): 128 invocations and at most 10.3 KiB of workgroup memory for
    /// the box (256 and 12.5 KiB in the column passes of images in the host's layout,
    /// `box_rows_host`), 128 invocations for the gaussian (which takes fewer lines where its
    /// staging does not fit; 64 at `gauss_rows_wide`), within the limits of every adapter
    /// (the WebGPU defaults: 256 invocations, 16 KiB).
    pub const DEFAULT: Tunables = Tunables {
        box_rows: 8,
        box_tpl: 16,
        box_ppt: 2,
        box_ppt_narrow: DEFAULT_BOX_PPT_NARROW,
        box_rows_host: 16,
        gauss_rows: 4,
        gauss_tpl: 32,
        gauss_rows_wide: 2,
    };

    /// The box's positions a thread for a pass pair whose intermediate is `wide` (24-bit
    /// lanes) or not.
    pub(super) fn box_ppt_for(&self, wide: bool) -> u32 {
        if wide {
            self.box_ppt
        } else {
            self.box_ppt_narrow
        }
    }

    /// These tunables as the box's column passes of images in the host's layout take them:
    /// `box_rows_host` lines a workgroup.
    pub(super) fn host_columns(&self) -> Tunables {
        Tunables {
            box_rows: self.box_rows_host,
            ..*self
        }
    }

    pub(super) fn box_chunk(&self, wide: bool) -> u32 {
        self.box_tpl * self.box_ppt_for(wide)
    }

    pub(super) fn gauss_chunk(&self, ppt: u32) -> u32 {
        self.gauss_tpl * ppt
    }

    /// The box kernel's shape as the overrides of wgsl/blur_box.wgsl that size its work and
    /// its workgroup arrays (vec4s, but for the tile: a vec4 at most): window totals
    /// (`BOX_WG`, a thread each) and line sums (`BOX_ROWS`) where the sums across a line go
    /// through workgroup memory (wgsl/shared/box_lines_workgroup.wgsl; none on the subgroup
    /// path), and the transposition tile (`TILE_LEN` of wgsl/shared/blur_tile.wgsl: each
    /// line's chunk plus one element of padding, `BOX_TILE_STRIDE`), for the intermediate
    /// `wide` or not. In u64: a cache's values are checked with it, whatever they are.
    pub(super) fn box_overrides(&self, wide: bool) -> [(&'static str, u64); 6] {
        let (rows, tpl, ppt) = (
            u64::from(self.box_rows),
            u64::from(self.box_tpl),
            u64::from(self.box_ppt_for(wide)),
        );
        let stride = tpl * ppt + 1;
        [
            ("BOX_ROWS", rows),
            ("BOX_TPL", tpl),
            ("BOX_CH", tpl * ppt),
            ("BOX_WG", rows * tpl),
            ("BOX_TILE_STRIDE", stride),
            ("TILE_LEN", rows * stride),
        ]
    }

    /// Workgroup memory of the box pass at most: its three arrays of
    /// [`Tunables::box_overrides`], the tile counted as vec4s (a pass writing 24-bit lanes)
    /// and the line sums' arrays as on the workgroup path, for either intermediate; and of
    /// the column passes of `box_rows_host` lines, whose tile is a word a pixel but where
    /// the intermediate is wide (the images they take write 8-bit pixels, 16-bit ones as
    /// pairs, or, with alpha, the wide states between iterations).
    pub fn box_workgroup_bytes(&self) -> u64 {
        let bytes = |t: Tunables, wide, tile_bytes| {
            let o = t.box_overrides(wide);
            let len = |name| o.iter().find(|o| o.0 == name).unwrap().1;
            16 * (len("BOX_WG") + len("BOX_ROWS")) + tile_bytes * len("TILE_LEN")
        };
        let host = self.host_columns();
        [
            bytes(*self, true, 16),
            bytes(*self, false, 16),
            bytes(host, true, 16),
            bytes(host, false, 4),
        ]
        .into_iter()
        .max()
        .expect("four counts")
    }
}

const DEFAULT_BOX_PPT_NARROW: u32 = 4;

fn default_box_ppt_narrow() -> u32 {
    DEFAULT_BOX_PPT_NARROW
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "box rows={}/{} tpl={} ppt={}/{}, gaussian rows={}/{} tpl={}",
            self.box_rows,
            self.box_rows_host,
            self.box_tpl,
            self.box_ppt,
            self.box_ppt_narrow,
            self.gauss_rows,
            self.gauss_rows_wide,
            self.gauss_tpl
        )
    }
}

impl Tunable for Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        Tunables::DEFAULT
    }
    /// Whether the kernels can run this choice on an adapter with `limits` (the gaussian's
    /// workgroup memory with one line per workgroup; more lines are taken where they fit).
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x);
        let pow2 = |v: u32| v.is_power_of_two();
        ensure!(
            pow2(self.box_rows)
                && pow2(self.box_rows_host)
                && pow2(self.box_tpl)
                && [self.box_ppt, self.box_ppt_narrow]
                    .iter()
                    .all(|p| matches!(p, 1 | 2 | 4 | 8)),
            "blur box rows and threads per line must be powers of two, positions per thread 1, 2, 4 or 8"
        );
        ensure!(
            pow2(self.gauss_rows) && pow2(self.gauss_rows_wide) && pow2(self.gauss_tpl),
            "blur gaussian rows and threads per line must be powers of two"
        );
        ensure!(
            u64::from(self.box_rows.max(self.box_rows_host)) * u64::from(self.box_tpl)
                <= u64::from(max_wg)
                && u64::from(self.gauss_rows.max(self.gauss_rows_wide)) * u64::from(self.gauss_tpl)
                    <= u64::from(max_wg),
            "blur workgroups exceed this adapter's {max_wg} invocations"
        );
        ensure!(
            self.box_workgroup_bytes() <= u64::from(limits.max_compute_workgroup_storage_size),
            "blur box needs {} bytes of workgroup memory; this adapter has {}",
            self.box_workgroup_bytes(),
            limits.max_compute_workgroup_storage_size
        );
        Ok(())
    }
}

/// `gpukit tune blur`: the box and gaussian shapes on image sizes of 2^18 to 2^23 pixels.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        tune::image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        stages()
    }

    fn verify(engine: &Engine, _: &Gpu, t: &Tunables) -> Result<Option<String>> {
        verify(engine, t)
    }

    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        stage: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        case(gpu, class, stage, t)
    }
}

/// The stage that chooses the box's positions a thread for the 16-bit intermediate: timed on
/// an RGB8 image (the box's other stages time RGBA8, whose intermediate has 24-bit lanes).
const BOX_PPT_NARROW: &str = "box ppt narrow";

/// The stage that chooses the box's lines in the column passes of images in the host's
/// layout: timed on an RGB8 image.
const BOX_ROWS_HOST: &str = "box rows host";

/// The stage that chooses the gaussian's shape: timed on an RGB8 image (8-bit samples, whose
/// row pass takes the dot products), as is BOX_PPT_NARROW's.
const GAUSSIAN: &str = "gaussian";

/// The stage that chooses the gaussian's lines for the intermediate of a word a channel:
/// timed on RGBA8 whose alpha varies.
const GAUSSIAN_WIDE: &str = "gaussian wide";

/// The filters blur is timed and checked with: box r = 15 for the box stages, gaussian
/// sigma 5 (r = 15) for the gaussian ones.
fn blur_params(stage: &str) -> Options {
    if stage == GAUSSIAN || stage == GAUSSIAN_WIDE {
        Options::new(Kind::Gaussian { sigma: 5.0 }, 15, 1)
    } else {
        Options::new(Kind::Box, 15, 1)
    }
}

fn stages() -> Vec<Stage<Tunables>> {
    vec![
        Stage {
            name: "box shape",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(16, 8), (32, 16)]
                } else {
                    let max = max_invocations(limits);
                    pow2(4, 128)
                        .flat_map(|rows| pow2(2, 32).map(move |tpl| (rows, tpl)))
                        .filter(|&(r, t)| (64..=max).contains(&(r * t)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(box_rows, box_tpl)| Tunables {
                        box_rows,
                        box_tpl,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "box ppt",
            candidates: |best, _, quick| {
                let ppts: &[u32] = if quick { &[2] } else { &[1, 2, 4, 8] };
                ppts.iter()
                    .map(|&box_ppt| Tunables { box_ppt, ..*best })
                    .collect()
            },
        },
        Stage {
            name: BOX_PPT_NARROW,
            candidates: |best, _, quick| {
                let ppts: &[u32] = if quick { &[2] } else { &[1, 2, 4, 8] };
                ppts.iter()
                    .map(|&box_ppt_narrow| Tunables {
                        box_ppt_narrow,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: BOX_ROWS_HOST,
            candidates: |best, limits, quick| {
                let rows = lines(quick, [8, 16], (4, 128), best.box_tpl, limits);
                rows.into_iter()
                    .map(|box_rows_host| Tunables {
                        box_rows_host,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: GAUSSIAN,
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(4, 32), (8, 16)]
                } else {
                    // At least 4 lines, as the box's: fewer lines of 8-bit RGB pixels are
                    // not whole words, and the last pass then cannot write the host's layout
                    // (an H100 ran the RGB8 gaussian 16% slower on 2 lines, call CM).
                    let max = max_invocations(limits);
                    pow2(4, 16)
                        .flat_map(|rows| pow2(8, 128).map(move |tpl| (rows, tpl)))
                        .filter(|&(r, t)| (32..=max).contains(&(r * t)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(gauss_rows, gauss_tpl)| Tunables {
                        gauss_rows,
                        gauss_tpl,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: GAUSSIAN_WIDE,
            candidates: |best, limits, quick| {
                let rows = lines(quick, [2, 4], (1, 16), best.gauss_tpl, limits);
                rows.into_iter()
                    .map(|gauss_rows_wide| Tunables {
                        gauss_rows_wide,
                        ..*best
                    })
                    .collect()
            },
        },
    ]
}

/// The lines per workgroup a one-field stage tries: `quick`'s two, or the powers of two
/// from `lo` to `hi` whose workgroups of `tpl` threads a line fit the adapter.
fn lines(
    quick: bool,
    quick_lines: [u32; 2],
    (lo, hi): (u32, u32),
    tpl: u32,
    limits: &wgpu::Limits,
) -> Vec<u32> {
    if quick {
        return quick_lines.to_vec();
    }
    let max = max_invocations(limits);
    pow2(lo, hi).filter(|&r| r * tpl <= max).collect()
}

/// Both filters on 300x45 RGBA8 and RGB8 images (lines longer than one segment, partial
/// chunks; RGB8 read and, at most shapes, written in the host's layout by the passes), bit
/// for bit against the CPU reference.
fn verify(engine: &Engine, t: &Tunables) -> Result<Option<String>> {
    for channels in [4u8, 3] {
        let n = 300 * 45 * usize::from(channels);
        let img = Image::new_u8(300, 45, channels, bench::noise_bytes(n, 7));
        for stage in ["box shape", GAUSSIAN] {
            let params = blur_params(stage);
            let params = params.with_gpu(GpuOptions {
                tunables: Some(*t),
                // The shapes belong to the workgroup kernels, whatever the adapter's layout.
                layout: Some(Layout::Workgroup),
                ..GpuOptions::DEFAULT
            });
            let got = super::run(engine, &img, &params, &mut Timings::default())?;
            if got.samples != reference(&img, &params)?.samples {
                let what = img.describe();
                return Ok(Some(format!(
                    "{stage}, {what}: differs from the CPU reference"
                )));
            }
        }
    }
    Ok(None)
}

fn case<'g>(
    gpu: &'g Gpu,
    class: &SizeClass,
    stage: &'static str,
    t: &Tunables,
) -> Result<Case<'g>> {
    let (w, h) = class.dims;
    let params = blur_params(stage).with_gpu(GpuOptions {
        tunables: Some(*t),
        layout: Some(Layout::Workgroup),
        ..GpuOptions::DEFAULT
    });
    let (plan, format) = if [BOX_PPT_NARROW, BOX_ROWS_HOST, GAUSSIAN].contains(&stage) {
        let img = Image::new_u8(w as u32, h as u32, 3, bench::noise_bytes(w * h * 3, 3));
        (BlurPlan::new(gpu, &img, &params)?, "RGB8")
    } else {
        (BlurPlan::new(gpu, class.image(), &params)?, "RGBA8")
    };
    let name = match params.kind {
        Kind::Box => format!("{w}x{h} {format} box r=15"),
        Kind::Gaussian { .. } => format!("{w}x{h} {format} gaussian sigma=5"),
    };
    Ok(Case::gpu(
        super::OP.name,
        name,
        Unit::Gpixps,
        (w * h) as f64,
        move |b| plan.record(b),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_entry_from_before_the_column_lines_keeps_its_lines() {
        // A choice written before `box_ppt_narrow`, `box_rows_host` and `gauss_rows_wide`:
        // the first takes its default, the others the lines the entry timed those passes at.
        let old = r#"{"box_rows":4,"box_tpl":32,"box_ppt":2,"gauss_rows":8,"gauss_tpl":16}"#;
        let t: Tunables = serde_json::from_str(old).unwrap();
        let want = Tunables {
            box_rows: 4,
            box_tpl: 32,
            box_ppt: 2,
            box_ppt_narrow: Tunables::DEFAULT.box_ppt_narrow,
            box_rows_host: 4,
            gauss_rows: 8,
            gauss_tpl: 16,
            gauss_rows_wide: 8,
        };
        assert_eq!(t, want);
        // And one written now reads back as it was.
        let t = Tunables {
            box_rows_host: 32,
            gauss_rows_wide: 1,
            ..want
        };
        let back: Tunables = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        t.check(&wgpu::Limits::default()).unwrap_err();
        want.check(&wgpu::Limits::default()).unwrap();
    }

    #[test]
    fn the_defaults_fit_the_webgpu_default_limits() {
        // 256 invocations and 16 KiB of workgroup memory: the box's column passes of images
        // in the host's layout take 256 invocations and 12.5 KiB (their tile a word a pixel,
        // or vec4s at the wide intermediate's 2 positions a thread).
        let limits = wgpu::Limits::default();
        assert_eq!(limits.max_compute_workgroup_storage_size, 16384);
        Tunables::DEFAULT.check(&limits).unwrap();
        assert_eq!(Tunables::DEFAULT.box_workgroup_bytes(), 12800);
    }

    #[test]
    fn candidate_spaces_fit_the_limits() {
        let limits = wgpu::Limits::default();
        let n: usize = stages()
            .iter()
            .map(|s| (s.candidates)(&Tunables::DEFAULT, &limits, false).len())
            .sum();
        assert!(n > 20, "{n}");
    }
}
