//! The GPU path: one pass, `compare` (wgsl/compare.wgsl), over strips of rows small enough
//! for one storage binding, each with two rows of halo each side for anti-aliasing
//! detection; per-workgroup partials summed on the host. The pass works in units of 4
//! pixels of the whole image (a strip's first and last units may hold pixels of its
//! neighbours, which it leaves out), and reduces each workgroup's sums with subgroup
//! operations where the adapter has them (wgsl/shared/compare_subgroup.wgsl), else with
//! workgroup atomics (compare_workgroup.wgsl). Layouts of 4 or 8 words a unit are read a
//! vec4 at a time (compare_words_vec4.wgsl), the others a word at a time
//! (compare_words.wgsl). Its shape (workgroup size, units per invocation, their words
//! preloaded or not, the most workgroups) is [`Tunables`].

use anyhow::{bail, Result};

use super::reference::threshold_units;
use super::tune::Tunables;
use super::{same_shape, Comparison, Counts, Options, Rect};
use crate::gpu::{Batch, Gpu, Kernel, Timings, Usage, Variant};
use crate::io::image::Image;
use crate::ops::{sample_bytes, ShaderCase};
use crate::shader;
use crate::tune::Tunable;

// The GPU pass's units (4 pixels, as wgsl/compare.wgsl reads them) and partials (its
// `PART_WORDS`, which the shader test checks).
const UNIT_PX: u64 = 4;
const PART_WORDS: usize = 27;
/// Bytes a strip's buffers may need past its rows: the part of a unit before the strip's
/// halo, and the rest of its last unit.
const SLACK: u64 = 128;
// Rows of halo each side of a strip: anti-aliasing detection looks two pixels away.
const HALO: u32 = 2;

/// The compare kernel's two reductions and two ways of reading, with one unit per invocation
/// and with the most preloaded, for the shader tests.
pub(super) fn shaders() -> Vec<ShaderCase> {
    let mut cases = Vec::new();
    for subgroups in [false, true] {
        for vec4 in [false, true] {
            for (units, preload) in [(1, false), (32, true)] {
                let v = variant(subgroups, vec4, units, preload);
                let t = Tunables {
                    units,
                    preload,
                    ..Tunables::for_pixels(1 << 20)
                };
                let all = Options {
                    threshold: Some(0.1),
                    antialiasing: true,
                    ignore: vec![Rect {
                        x1: 0,
                        y1: 0,
                        x2: 1,
                        y2: 1,
                    }],
                    diff: true,
                    ..Options::default()
                };
                let layout = if vec4 { (4, 8) } else { (3, 16) };
                let constants = overrides(&t, layout, &all, subgroups.then_some(8));
                cases.push(
                    ShaderCase::variant::<Params>(shader!("compare"), v)
                        .with_const("PART_WORDS", PART_WORDS as u32)
                        .with_const("MAX_GROUP_UNITS", super::MAX_GROUP_UNITS as u32)
                        .with_const("YIQ_Y", super::YIQ_Y.map(|v| v as i32))
                        .with_const("YIQ_I", super::YIQ_I.map(|v| v as i32))
                        .with_const("YIQ_Q", super::YIQ_Q.map(|v| v as i32))
                        .with_const("YIQ_W", super::YIQ_W.map(|v| v as u32))
                        .with_overrides(&constants),
                );
            }
        }
    }
    cases
}

/// The pass's overridable constants: its shape, the images' layout (channels, bits), what
/// `opts` asks of it, and on the subgroup path the adapter's smallest subgroup size.
fn overrides(
    t: &Tunables,
    (channels, bits): (u8, u32),
    opts: &Options,
    subgroup_min: Option<u32>,
) -> Vec<(&'static str, f64)> {
    let on = |b: bool| f64::from(u8::from(b));
    let mut constants = vec![
        ("WG_SIZE", f64::from(t.wg_size)),
        ("GRID_STRIDE", on(t.max_groups > 0)),
        ("CHANNELS", f64::from(channels)),
        ("BITS", f64::from(bits)),
        ("PERCEPTUAL", on(opts.threshold.is_some())),
        ("ANTIALIASING", on(opts.antialiasing)),
        ("IGNORE", on(!opts.ignore.is_empty())),
        ("DRAW", on(opts.diff)),
    ];
    if let Some(min) = subgroup_min {
        constants.push(("SUBGROUP_MIN", f64::from(min)));
    }
    constants
}

/// The kernel with its workgroup reduction on subgroup operations or on workgroup atomics,
/// its images read a vec4 or a word at a time, and `units` units per invocation, their words
/// preloaded or not (`UNITS` and `PRELOAD`, generated consts: they size arrays).
fn variant(subgroups: bool, vec4: bool, units: u32, preload: bool) -> Variant {
    let path = if subgroups { "subgroup" } else { "workgroup" };
    let mut v = Variant::consts(format!("{path} units{units}"), &[("UNITS", units)]);
    if preload {
        v.name += " preload";
        v.decls.push(("PRELOAD", "true".into()));
    }
    if vec4 {
        v.name += " vec4";
        v = v.slot("compare_words", "compare_words_vec4");
    }
    if subgroups {
        v = v.slot("compare_workgroup", "compare_subgroup");
    }
    v
}

/// Whether a unit of `img`'s layout is 4 or 8 words, which the kernel reads as vec4s.
fn vec4_units(img: &Image) -> bool {
    (u32::from(img.channels) * img.bit_depth() / 8).is_multiple_of(4)
}

/// Its WGSL twin is `Params` in wgsl/compare.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    width: u32,
    height: u32,
    row0: u32,
    rows: u32,
    buf_px0: u32,
    n_ignore: u32,
    t0: u32,
    t1: u32,
    t2: u32,
    t3: u32,
    groups: u32,
}

crate::ops::params_layout!(Params {
    width,
    height,
    row0,
    rows,
    buf_px0,
    n_ignore,
    t0,
    t1,
    t2,
    t3,
    groups
});

/// Comparisons on a GPU.
pub struct CompareGpu<'g> {
    gpu: &'g Gpu,
    /// The most bytes one image strip or the diff strip may take in one binding: the
    /// adapter's limit unless lowered (tests do, to reach the strip path with small images).
    pub binding_bytes: u64,
    /// Reduce with subgroup operations where the adapter has them and they suit the
    /// workgroup size ([`CompareGpu::subgroups_fit`]); tests turn it off to run the other
    /// path too.
    pub subgroups: bool,
}

impl<'g> CompareGpu<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        CompareGpu {
            gpu,
            binding_bytes: gpu
                .limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
            subgroups: gpu.features.subgroups && gpu.features.subgroup_size[0] > 0,
        }
    }

    /// Whether the subgroup reduction can run workgroups of `wg_size`: subgroups full (the
    /// largest size divides it) and the workgroup memory it takes (a partial per subgroup of
    /// the smallest size) within the adapter's.
    fn subgroups_fit(&self, wg_size: u32) -> bool {
        let [min, max] = self.gpu.features.subgroup_size;
        self.subgroups
            && max <= wg_size
            && wg_size.is_multiple_of(max)
            && PART_WORDS as u32 * 4 * (wg_size / min)
                <= self.gpu.limits.max_compute_workgroup_storage_size
    }

    /// Rows per strip: the strip and its halo must fit one binding, and so must its diff rows.
    fn strip_rows(&self, img: &Image) -> Result<u32> {
        let row_bytes = img.width as u64 * img.channels as u64 * u64::from(img.bit_depth() / 8);
        let room = self.binding_bytes.saturating_sub(SLACK);
        let by_input = (room / row_bytes).saturating_sub(2 * HALO as u64);
        let by_diff = room / (img.width as u64 * 3);
        let rows = by_input.min(by_diff).min(img.height as u64) as u32;
        if rows == 0 {
            bail!(
                "a row of {} pixels is too wide for this adapter's {}-byte bindings",
                img.width,
                self.binding_bytes
            );
        }
        Ok(rows)
    }

    /// The buffers, bind groups and strips that compare images of `img`'s layout and size
    /// under `opts`, in the shape `opts.tunables` gives, else the tune cache's for this
    /// adapter and size, else the default for the size ([`Tunables::for_pixels`]).
    pub fn plan(&self, img: &Image, opts: &Options) -> Result<ComparePlan> {
        let gpu = self.gpu;
        let t = opts
            .tunables
            .or_else(|| {
                crate::tune::choice(gpu, super::OP.name, img.pixels() as f64, Tunables::check)
            })
            .unwrap_or_else(|| Tunables::for_pixels(img.pixels() as u64));
        t.check(&gpu.limits)?;
        let subgroups = self.subgroups_fit(t.wg_size);
        let (w, c) = (img.width, img.channels as usize);
        let subgroup_min = subgroups.then_some(gpu.features.subgroup_size[0]);
        let layout = (img.channels, img.bit_depth());
        let constants = overrides(&t, layout, opts, subgroup_min);
        // Every loop of the kernel has a constant or uniform bound (docs of kernel_unrolled).
        let kernel = gpu.kernel_variant(
            &shader!("compare"),
            &variant(subgroups, vec4_units(img), t.units, t.preload),
            "main",
            &constants,
            true,
        )?;
        let strip = self.strip_rows(img)?;
        let row_bytes = u64::from(w) * c as u64 * u64::from(img.bit_depth() / 8);
        let buf_rows = u64::from((strip + 2 * HALO).min(img.height));
        let rects: Vec<[u32; 4]> = opts
            .ignore
            .iter()
            .map(|r| [r.x1, r.y1, r.x2, r.y2])
            .collect();
        // A strip's pixels span at most one unit more than they fill.
        let max_units = (u64::from(strip) * u64::from(w)).div_ceil(UNIT_PX) + 1;
        let max_groups = u64::from(t.groups(max_units));
        let diff_bytes = if opts.diff { max_units * 12 } else { 0 };
        let src_bytes = (buf_rows * row_bytes + SLACK).next_multiple_of(16);
        let buffers = Buffers {
            src_a: gpu.buffer("compare expected", Usage::Storage, src_bytes),
            src_b: gpu.buffer("compare actual", Usage::Storage, src_bytes),
            ignore: gpu.upload("compare ignore", Usage::Storage, &rects),
            partials: gpu.buffer(
                "compare partials",
                Usage::Storage,
                max_groups * PART_WORDS as u64 * 4,
            ),
            diff: gpu.buffer("compare diff", Usage::Storage, diff_bytes),
        };
        let strips = self.strips(&kernel, &buffers, img, opts, &t, strip, rects.len() as u32);
        Ok(ComparePlan {
            kernel,
            channels: c,
            pixel_bytes: c as u64 * u64::from(img.bit_depth() / 8),
            buffers,
            strips,
        })
    }

    /// The strips of `strip` rows (the last one shorter) that cover `img`, each with its
    /// params and bind group.
    #[expect(
        clippy::too_many_arguments,
        reason = "the plan's parts, passed down once"
    )]
    fn strips(
        &self,
        kernel: &Kernel,
        buffers: &Buffers,
        img: &Image,
        opts: &Options,
        t: &Tunables,
        strip: u32,
        n_ignore: u32,
    ) -> Vec<Strip> {
        let (w, h) = (img.width, img.height);
        let threshold = opts.threshold.map(threshold_units).unwrap_or(0);
        let mut strips = Vec::new();
        let mut row0 = 0u32;
        while row0 < h {
            let rows = strip.min(h - row0);
            let first = u64::from(row0) * u64::from(w);
            let end = first + u64::from(rows) * u64::from(w);
            // From the unit holding the first pixel of the halo above.
            let buf_px0 = u64::from(row0.saturating_sub(HALO)) * u64::from(w) / UNIT_PX * UNIT_PX;
            let units = end.div_ceil(UNIT_PX) - first / UNIT_PX;
            let groups = t.groups(units);
            let params = self.gpu.upload(
                "compare params",
                Usage::Uniform,
                &[Params {
                    width: w,
                    height: h,
                    row0,
                    rows,
                    buf_px0: buf_px0 as u32,
                    n_ignore,
                    t0: threshold as u32,
                    t1: (threshold >> 32) as u32,
                    t2: (threshold >> 64) as u32,
                    t3: (threshold >> 96) as u32,
                    groups,
                }],
            );
            let b = buffers;
            let bind = self.gpu.bind(
                kernel,
                &[&params, &b.src_a, &b.src_b, &b.ignore, &b.partials, &b.diff],
            );
            strips.push(Strip {
                row0,
                rows,
                buf_px0,
                buf_end: u64::from((row0 + rows + HALO).min(h)) * u64::from(w),
                units,
                groups,
                bind,
                _params: params,
            });
            row0 += rows;
        }
        strips
    }

    /// Compares `a` (expected) and `b` (actual), of one layout, as [`super::reference`] does.
    pub fn compare(
        &self,
        a: &Image,
        b: &Image,
        opts: &Options,
        timings: &mut Timings,
    ) -> Result<Comparison> {
        assert!(same_shape(a, b), "compare needs one size and layout");
        let gpu = self.gpu;
        let plan = timings.phase("pipeline", || self.plan(a, opts))?;
        let (w, h) = (a.width, a.height);
        let (bytes_a, bytes_b) = (sample_bytes(&a.samples), sample_bytes(&b.samples));
        let mut counts = Counts::zeros(plan.channels);
        let mut rgb = if opts.diff {
            vec![0u8; a.pixels() * 3]
        } else {
            Vec::new()
        };
        for (i, s) in plan.strips.iter().enumerate() {
            timings.phase("upload", || plan.upload(gpu, s, &bytes_a, &bytes_b));
            gpu.run_timed(timings, 1, |batch, _| plan.record(batch, i))?;
            let pixels = u64::from(s.rows) * u64::from(w);
            let words: Vec<u32> = timings.phase("download", || {
                gpu.read_vec(&plan.buffers.partials, s.groups as usize * PART_WORDS)
            })?;
            counts = counts.add(sum_partials(&words, plan.channels, pixels));
            if opts.diff {
                let first = u64::from(s.row0) * u64::from(w);
                let start = first as usize * 3;
                let out = &mut rgb[start..start + pixels as usize * 3];
                // The strip's units start with the one holding its first pixel.
                let skip = (first % UNIT_PX) as usize * 3;
                timings.phase("download", || {
                    gpu.read_with(&plan.buffers.diff, 0, s.units * 12, |bytes| {
                        out.copy_from_slice(&bytes[skip..skip + out.len()])
                    })
                })?;
            }
        }
        Ok(Comparison {
            counts,
            diff: opts.diff.then(|| Image::new_u8(w, h, 3, rgb)),
        })
    }
}

/// One strip of rows and its pass.
struct Strip {
    row0: u32,
    rows: u32,
    /// The pixels held in the buffers: the strip and its halo from the start of a unit,
    /// [buf_px0, buf_end).
    buf_px0: u64,
    buf_end: u64,
    /// Units of 4 pixels, from the one holding the strip's first pixel.
    units: u64,
    groups: u32,
    bind: wgpu::BindGroup,
    _params: wgpu::Buffer,
}

/// The device buffers of one plan.
struct Buffers {
    src_a: wgpu::Buffer,
    src_b: wgpu::Buffer,
    ignore: wgpu::Buffer,
    partials: wgpu::Buffer,
    diff: wgpu::Buffer,
}

/// One layout's comparison on the device: reusable for every pair of that layout and size.
pub struct ComparePlan {
    kernel: Kernel,
    channels: usize,
    pixel_bytes: u64,
    buffers: Buffers,
    strips: Vec<Strip>,
}

impl ComparePlan {
    /// Writes strip `s`'s pixels (with halo) of both images' bytes into the device buffers.
    fn upload(&self, gpu: &Gpu, s: &Strip, a: &[u8], b: &[u8]) {
        let from = (s.buf_px0 * self.pixel_bytes) as usize;
        let to = (s.buf_end * self.pixel_bytes) as usize;
        gpu.write_padded(&self.buffers.src_a, &a[from..to]);
        gpu.write_padded(&self.buffers.src_b, &b[from..to]);
    }

    /// Writes both images whole, for a plan of one strip (the bench cases).
    pub(super) fn upload_single(&self, gpu: &Gpu, a: &[u8], b: &[u8]) -> Result<()> {
        if self.strips.len() != 1 {
            bail!("the compare benchmark pair must fit one strip");
        }
        self.upload(gpu, &self.strips[0], a, b);
        Ok(())
    }

    /// Records strip `i`'s pass.
    pub(super) fn record(&self, batch: &mut Batch, i: usize) {
        let s = &self.strips[i];
        batch.dispatch("compare", &self.kernel, &s.bind, s.groups);
    }
}

/// The workgroups' partials (PART_WORDS words each) summed into the counts of `pixels` pixels.
/// A channel's sum of squares comes as three sums without carries: of the low 16 bits of the
/// invocations' low words, of their high 16 bits, and of their high words.
fn sum_partials(words: &[u32], channels: usize, pixels: u64) -> Counts {
    let mut k = Counts::zeros(channels);
    k.pixels = pixels;
    for part in words.chunks_exact(PART_WORDS) {
        for (ch, s) in k.channels.iter_mut().enumerate() {
            let p = &part[ch * 6..ch * 6 + 6];
            s.differing += u64::from(p[0]);
            s.max_abs = s.max_abs.max(p[1]);
            s.sum_abs += u64::from(p[2]);
            s.sum_sq += u128::from(p[3]) + (u128::from(p[4]) << 16) + (u128::from(p[5]) << 32);
        }
        k.differing += u64::from(part[24]);
        k.antialiased += u64::from(part[25]);
        k.ignored += u64::from(part[26]);
    }
    k
}
