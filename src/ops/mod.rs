//! The operations: for each, its options, `run` on an engine (GPU or CPU) with timings, the
//! CPU reference that defines its result, and beside them its GPU plan, bench cases and
//! tunables. [`REGISTRY`] lists them; `gpukit bench`, `gpukit tune` and their `--help` are
//! made from it. docs/ARCHITECTURE.md has the checklist for adding one.

/// Implements [`ParamsLayout`] for a `#[repr(C)]` params struct from its fields' names (its
/// padding left out): `params_layout!(CopyParams { n_vec4 });`.
macro_rules! params_layout {
    ($t:ty { $($field:ident),* $(,)? }) => {
        impl $crate::ops::ParamsLayout for $t {
            const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($field), std::mem::offset_of!($t, $field))),*];
        }
    };
}
pub(crate) use params_layout;

pub mod blur;
pub mod compare;
pub mod copy;
pub mod encode;
pub mod histogram;
pub mod matmul;
pub mod resize;
pub mod scan;

use std::borrow::Cow;
use std::time::Duration;

use anyhow::Result;

use crate::bench::{Case, Sizes};
use crate::gpu::{Engine, Shader, Variant};
use crate::io::image::Samples;
use crate::tune::{Level, OpResult};

/// The native CPU engine's time for `thread_ns` nanoseconds of one thread's work spread over
/// at most `max_threads` of its threads: a rough estimate from the engine's speeds measured on
/// 2 and 16 cores (docs/BENCHMARKS.md), rounded towards slower, made before a job starts to
/// choose its engine ([`crate::gpu::SMALL_JOB`]).
pub fn cpu_time(thread_ns: f64, max_threads: usize) -> Duration {
    let threads = rayon::current_num_threads().clamp(1, max_threads.max(1));
    Duration::try_from_secs_f64(thread_ns * 1e-9 / threads as f64).unwrap_or(Duration::MAX)
}

/// The GPU path's host time per byte it copies once, into staging or out of it: upload 0.16 s
/// and download 0.37 s for 128 RGB 1920x1080 images in a 16-core batch (H100, call L of
/// docs/BENCHMARKS.md).
const HOST_COPY_NS_PER_BYTE: f64 = 0.325;

/// What a GPU path saves against the native CPU engine on `files` images: `engine`, the
/// engine's time for one, less the host's copies of `copied_bytes` into staging and out of it
/// at [`HOST_COPY_NS_PER_BYTE`]. Both are CPU time, spread over the engine's threads: in a
/// batch the copies' threads share the cores with decoding and encoding, as the engine's do.
/// Never negative; saturates at `Duration::MAX`.
pub fn gpu_saving_over_copies(engine: Duration, copied_bytes: f64, files: u32) -> Duration {
    let copies = cpu_time(copied_bytes * HOST_COPY_NS_PER_BYTE, usize::MAX);
    engine
        .saturating_sub(copies)
        .checked_mul(files)
        .unwrap_or(Duration::MAX)
}

/// An op's tuning: the search (given the op's name) on an engine at a level; `progress` hears
/// what is measured. Each op's is [`crate::tune::tune`] over its [`crate::tune::OpTuning`].
pub type TuneFn = fn(&'static str, &Engine, Level, &mut dyn FnMut(&str)) -> Result<OpResult>;

/// What an op plugs into the tools that drive every op.
pub struct Op {
    /// Its name on the command line (`gpukit bench NAME`, `gpukit tune NAME`) and in the tune
    /// cache.
    pub name: &'static str,
    /// Its benchmark cases on an engine; `Sizes` carries the bench flags that size them.
    pub bench: for<'e> fn(&'e Engine, &Sizes) -> Result<Vec<Case<'e>>>,
    /// Its tuning (`None`: nothing to tune).
    pub tune: Option<TuneFn>,
    /// Every shader variant it builds, for the shader tests (which need no GPU).
    pub shaders: fn() -> Vec<ShaderCase>,
    /// Whether a subcommand does its work (`copy` is a bench baseline only).
    pub command: bool,
}

/// A Rust `#[repr(C)]` struct that a WGSL uniform struct mirrors: its fields' names and byte
/// offsets, padding left out, which the shader test holds against the WGSL struct's members
/// (made with `params_layout!`).
pub trait ParamsLayout {
    const FIELDS: &'static [(&'static str, usize)];
}

/// A WGSL struct's Rust twin: its size and its fields (names and byte offsets).
pub struct Twin {
    pub name: &'static str,
    pub size: usize,
    pub fields: &'static [(&'static str, usize)],
}

/// A WGSL `const`'s value as Rust has it, scalar by scalar (a vector's components in order).
#[derive(Clone, Debug, PartialEq)]
pub struct Const(pub Vec<Scalar>);

/// One scalar of a [`Const`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
}

impl From<u32> for Const {
    fn from(v: u32) -> Const {
        Const(vec![Scalar::U32(v)])
    }
}

impl From<bool> for Const {
    fn from(v: bool) -> Const {
        Const(vec![Scalar::Bool(v)])
    }
}

impl<const N: usize> From<[u32; N]> for Const {
    fn from(v: [u32; N]) -> Const {
        Const(v.into_iter().map(Scalar::U32).collect())
    }
}

impl<const N: usize> From<[i32; N]> for Const {
    fn from(v: [i32; N]) -> Const {
        Const(v.into_iter().map(Scalar::I32).collect())
    }
}

/// A shader variant an op builds, and what of it Rust relies on: the uniform structs it
/// shares, the named constants whose values Rust uses too, and the overridable constants its
/// plan sets. The shader test checks each against the parsed module (no GPU needed).
pub struct ShaderCase {
    pub shader: Shader,
    pub variant: Variant,
    /// Each WGSL struct of the shader that mirrors a Rust `#[repr(C)]` struct: the two must
    /// agree in size and in each field's name and offset.
    pub structs: Vec<Twin>,
    /// Named `const`s of the shader whose values Rust relies on, as Rust has them: each must
    /// be a `const` of the module with this value.
    pub consts: Vec<(&'static str, Const)>,
    /// The pipeline-overridable constants the op's plan sets when it builds this variant,
    /// made by the function the plan itself calls: each must be an `override` of the module
    /// whose type holds the value, and every `override` without a default must be set.
    pub overrides: Vec<(&'static str, f64)>,
}

impl ShaderCase {
    /// `shader` as it is, its `Params` the Rust struct `P`.
    pub fn params<P: ParamsLayout>(shader: Shader) -> ShaderCase {
        ShaderCase::variant::<P>(shader, Variant::default())
    }

    /// A variant of `shader`, its `Params` the Rust struct `P`.
    pub fn variant<P: ParamsLayout>(shader: Shader, variant: Variant) -> ShaderCase {
        ShaderCase {
            shader,
            variant,
            structs: vec![Twin {
                name: "Params",
                size: std::mem::size_of::<P>(),
                fields: P::FIELDS,
            }],
            consts: Vec::new(),
            overrides: Vec::new(),
        }
    }

    /// Rust relies on the shader's `const NAME` being `value`.
    pub fn with_const(mut self, name: &'static str, value: impl Into<Const>) -> ShaderCase {
        self.consts.push((name, value.into()));
        self
    }

    /// The overridable constants the plan sets for this variant.
    pub fn with_overrides(mut self, overrides: &[(&'static str, f64)]) -> ShaderCase {
        self.overrides = overrides.to_vec();
        self
    }
}

/// Every op, in the order `bench all` and `tune all` run them. One line per op.
pub const REGISTRY: &[Op] = &[
    copy::OP,
    blur::OP,
    histogram::OP,
    scan::OP,
    matmul::OP,
    compare::OP,
    resize::OP,
    encode::OP,
    encode::png::OP,
];

/// An image's samples as the bytes a kernel reads (`Gpu::write_padded` writes them): 8-bit as
/// they are, 16-bit little-endian.
pub(crate) fn sample_bytes(samples: &Samples) -> Cow<'_, [u8]> {
    match samples {
        Samples::U8(s) => Cow::Borrowed(s),
        Samples::U16(s) if cfg!(target_endian = "little") => Cow::Borrowed(bytemuck::cast_slice(s)),
        Samples::U16(s) => Cow::Owned(s.iter().flat_map(|v| v.to_le_bytes()).collect()),
    }
}

/// The op named `name`.
/// A zeroed buffer of `len` values for an op's result, or an error naming `what` and its size
/// where the memory cannot be had (a `ulimit -v`, a size past the address space): an
/// allocation failure would abort the process.
pub fn zeroed<T: Clone + Default>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    let bytes = (len as u128) * std::mem::size_of::<T>() as u128;
    v.try_reserve_exact(len).map_err(|_| {
        anyhow::anyhow!(
            "{what} needs {:.1} GB of memory, which cannot be allocated here",
            bytes as f64 / 1e9
        )
    })?;
    v.resize(len, T::default());
    Ok(v)
}

/// This machine's physical memory in bytes, where the system says (Unix).
pub fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads a system value.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let (pages, size) = (u64::try_from(pages).ok()?, u64::try_from(size).ok()?);
        pages.checked_mul(size).filter(|&b| b > 0)
    }
    #[cfg(not(unix))]
    None
}

pub fn find(name: &str) -> Option<&'static Op> {
    REGISTRY.iter().find(|op| op.name == name)
}

/// The ops whose subcommand does work on files, by name: "blur, histogram, ..." (the help
/// texts that name them).
pub fn command_names() -> String {
    let names: Vec<&str> = REGISTRY
        .iter()
        .filter(|op| op.command)
        .map(|op| op.name)
        .collect();
    names.join(", ")
}

/// The ops that have something to tune.
pub fn tunable() -> impl Iterator<Item = &'static Op> {
    REGISTRY.iter().filter(|op| op.tune.is_some())
}

#[cfg(test)]
mod tests {
    use wgpu::naga;

    use super::{Const, Scalar, REGISTRY};
    use crate::gpu::compose;

    // A mistake in any shader, or a uniform struct out of step with its Rust twin, fails
    // here on any machine, before an adapter is opened.
    #[test]
    fn every_shader_variant_parses_validates_and_matches_its_rust_structs() {
        let mut checked = 0;
        for op in REGISTRY {
            for case in (op.shaders)() {
                let c = compose(&case.shader, &case.variant).unwrap();
                let module = naga::front::wgsl::parse_str(&c.source)
                    .unwrap_or_else(|e| panic!("{}: {}", c.label, e.emit_to_string(&c.source)));
                let flags = naga::valid::ValidationFlags::all();
                let caps = naga::valid::Capabilities::all();
                naga::valid::Validator::new(flags, caps)
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{}: {:?}", c.label, e.into_inner()));
                for twin in &case.structs {
                    let (name, rust_size) = (twin.name, twin.size);
                    let (span, members) = module
                        .types
                        .iter()
                        .find_map(|(_, t)| match (&t.name, &t.inner) {
                            (Some(n), naga::TypeInner::Struct { span, members }) if n == name => {
                                Some((*span, members))
                            }
                            _ => None,
                        })
                        .unwrap_or_else(|| panic!("{}: no struct {name}", c.label));
                    assert_eq!(
                        span as usize, rust_size,
                        "{}: struct {name} is {span} bytes in WGSL, {rust_size} in Rust",
                        c.label
                    );
                    // Each field by name and byte offset, padding (`_...`) left out.
                    let wgsl: Vec<(&str, usize)> = members
                        .iter()
                        .map(|m| (m.name.as_deref().unwrap_or(""), m.offset as usize))
                        .filter(|(n, _)| !n.starts_with('_'))
                        .collect();
                    assert_eq!(
                        wgsl, twin.fields,
                        "{}: struct {name}'s fields (name, offset) in WGSL against Rust",
                        c.label
                    );
                }
                for (name, rust) in &case.consts {
                    let wgsl = module
                        .constants
                        .iter()
                        .find(|(_, k)| k.name.as_deref() == Some(*name))
                        .map(|(_, k)| const_value(&module, k.init))
                        .unwrap_or_else(|| panic!("{}: no const {name}", c.label));
                    assert_eq!(
                        &wgsl, rust,
                        "{}: const {name} in WGSL against Rust",
                        c.label
                    );
                }
                check_overrides(&module, &c.label, &case.overrides);
                checked += 1;
            }
        }
        assert!(checked >= 20, "{checked} variants");
    }

    /// A named constant's value, evaluated by naga (a literal, or a vector of them).
    fn const_value(module: &naga::Module, init: naga::Handle<naga::Expression>) -> Const {
        let mut scalars = Vec::new();
        let mut stack = vec![init];
        while let Some(e) = stack.pop() {
            match &module.global_expressions[e] {
                naga::Expression::Literal(l) => scalars.push(match *l {
                    naga::Literal::U32(v) => Scalar::U32(v),
                    naga::Literal::I32(v) => Scalar::I32(v),
                    naga::Literal::F32(v) => Scalar::F32(v),
                    naga::Literal::Bool(v) => Scalar::Bool(v),
                    other => panic!("a const of a type Rust does not compare: {other:?}"),
                }),
                naga::Expression::Compose { components, .. } => {
                    stack.extend(components.iter().rev())
                }
                naga::Expression::Splat { size, value } => {
                    stack.extend(std::iter::repeat_n(*value, *size as usize))
                }
                naga::Expression::Constant(k) => stack.push(module.constants[*k].init),
                other => panic!("a const naga left unevaluated: {other:?}"),
            }
        }
        Const(scalars)
    }

    /// Every override the plan sets is one of the module's, of a type that holds the value
    /// (wgpu converts the f64), and every override without a default is set.
    fn check_overrides(module: &naga::Module, label: &str, set: &[(&str, f64)]) {
        for &(key, value) in set {
            let o = module
                .overrides
                .iter()
                .find(|(_, o)| o.name.as_deref() == Some(key))
                .map(|(_, o)| o)
                .unwrap_or_else(|| {
                    panic!("{label}: the plan sets {key}, no override of the shader")
                });
            let naga::TypeInner::Scalar(scalar) = module.types[o.ty].inner else {
                panic!("{label}: override {key} is not a scalar");
            };
            let whole = value.fract() == 0.0;
            let fits = match scalar.kind {
                naga::ScalarKind::Bool => value == 0.0 || value == 1.0,
                naga::ScalarKind::Uint => whole && (0.0..=f64::from(u32::MAX)).contains(&value),
                naga::ScalarKind::Sint => {
                    whole && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&value)
                }
                naga::ScalarKind::Float => value.is_finite(),
                naga::ScalarKind::AbstractInt | naga::ScalarKind::AbstractFloat => false,
            };
            assert!(
                fits,
                "{label}: override {key} is {scalar:?}, the plan sets {value}"
            );
        }
        for (_, o) in module.overrides.iter() {
            let name = o.name.as_deref().unwrap_or("");
            if o.init.is_none() {
                assert!(
                    set.iter().any(|&(k, _)| k == name),
                    "{label}: override {name} has no default and the plan does not set it"
                );
            }
        }
    }

    // The contract checks themselves, on a small module: each kind of mismatch is refused.
    #[test]
    fn override_and_const_checks_refuse_what_does_not_fit() {
        let src = "override A: u32;\noverride B: bool = false;\noverride C: i32 = 0;\n\
                   const K: vec2<i32> = vec2<i32>(-1, 2);\n\
                   @compute @workgroup_size(1) fn main() { _ = A; _ = B; _ = C; _ = K; }";
        let module = naga::front::wgsl::parse_str(src).unwrap();
        check_overrides(&module, "t", &[("A", 7.0), ("B", 1.0), ("C", -3.0)]);
        let refused = |set: &[(&str, f64)]| {
            let check = std::panic::AssertUnwindSafe(|| check_overrides(&module, "t", set));
            std::panic::catch_unwind(check).is_err()
        };
        assert!(refused(&[("A", 1.0), ("D", 1.0)]), "no override D");
        assert!(refused(&[("A", 1.0), ("B", 2.0)]), "a bool holds 0 or 1");
        assert!(refused(&[("A", -1.0)]), "a u32 holds no negative value");
        assert!(refused(&[("A", 1.5)]), "nor a fraction");
        assert!(refused(&[("B", 0.0)]), "A has no default");
        let (_, k) = module.constants.iter().next().unwrap();
        assert_eq!(const_value(&module, k.init), Const::from([-1, 2]));
        assert_ne!(const_value(&module, k.init), Const::from([1u32, 2]));
    }

    /// Every file of wgsl/ is a kernel some op builds, and every snippet of wgsl/shared/ is
    /// imported by one: a file no op owns is dead, or an op forgot to list it in `shaders()`.
    #[test]
    fn every_wgsl_file_belongs_to_some_op() {
        let mut kernels = std::collections::BTreeSet::new();
        let mut snippets = std::collections::BTreeSet::new();
        for op in REGISTRY {
            for case in (op.shaders)() {
                kernels.insert(case.shader.name.to_string());
                let c = compose(&case.shader, &case.variant).unwrap();
                snippets.extend(c.snippets);
            }
        }
        let listed = |dir: &str| -> std::collections::BTreeSet<String> {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter_map(|n| n.strip_suffix(".wgsl").map(str::to_string))
                .collect()
        };
        let files: std::collections::BTreeSet<String> =
            listed("wgsl").into_iter().map(|n| n + ".wgsl").collect();
        assert_eq!(files, kernels, "wgsl/ against the kernels the ops build");
        assert_eq!(
            listed("wgsl/shared"),
            snippets,
            "wgsl/shared/ against the imports"
        );
        assert!(files.len() >= 15, "{files:?}");
    }

    /// The estimates behind the engine choice, against hand-computed thread times: each op's
    /// nanoseconds a unit of work, divided by the threads it can use.
    #[test]
    fn cpu_estimates_follow_the_documented_rates() {
        use super::{blur, compare, histogram, matmul, scan};
        let threads = rayon::current_num_threads() as f64;
        let ms = |t: std::time::Duration| t.as_secs_f64() * 1e3;
        // Within a millionth, and the nanosecond each estimate is rounded to per thread.
        let close = |got: f64, want: f64| {
            assert!((got - want).abs() < 1e-6 * (want + threads), "{got} {want}")
        };
        // 8-bit RGB in AVX2 lanes: a box 0.9 ns a sample and iteration, any radius; a
        // gaussian of radius 15 0.5 + 0.075 * 31 ns. Alpha: 5 ns, 2.5 + 0.2 * 31 ns. 16-bit
        // (or no AVX2): 1.2 ns, 0.2 * 31 ns.
        let lanes = blur::engine::has_avx2();
        let bx = blur::Options::new(blur::Kind::Box, 15, 2);
        let g = blur::Options::new(blur::Kind::Gaussian { sigma: 5.0 }, 15, 1);
        // (Large enough that rounding to whole nanoseconds after dividing by the threads
        // stays far below the tolerance.)
        let per_sample = |o: &blur::Options, channels: u8, depth: u32| {
            let samples = 4096.0 * 4096.0 * f64::from(channels);
            ms(o.cpu_estimate(4096, 4096, channels, depth)) * threads / samples * 1e6
        };
        close(per_sample(&bx, 3, 8), if lanes { 1.8 } else { 2.4 });
        close(per_sample(&bx, 3, 16), 2.4);
        close(per_sample(&bx, 4, 8), 10.0);
        close(per_sample(&g, 1, 8), if lanes { 2.825 } else { 6.2 });
        close(per_sample(&g, 3, 16), 6.2);
        close(per_sample(&g, 2, 8), 8.7);
        // What a GPU saves: the engine's time less 0.65 ns a byte of copies, per file.
        let saving = |files: u32| ms(g.gpu_saving(4096, 4096, 3, 16, files)) * threads;
        close(saving(1), 3.0 * 4096.0 * 4096.0 * (6.2 - 2.0 * 0.65) * 1e-6);
        close(saving(7), 7.0 * saving(1));
        // Absurd sizes saturate rather than overflow.
        let huge = blur::Options::new(blur::Kind::Gaussian { sigma: 100.0 }, 300, u32::MAX);
        assert_eq!(
            huge.gpu_saving(u32::MAX, u32::MAX, 4, 16, u32::MAX),
            std::time::Duration::MAX
        );
        close(ms(histogram::cpu_estimate(1_000_000)) * threads, 4.0);
        let cmp = compare::Options {
            threshold: None,
            antialiasing: false,
            ignore: Vec::new(),
            diff: true,
            tunables: None,
        };
        close(ms(cmp.cpu_estimate(1_000_000)) * threads, 10.0);
        // A scan uses at most 4 threads.
        let scan_ms = ms(scan::cpu_estimate(1 << 20));
        close(scan_ms * threads.min(4.0), (1 << 20) as f64 * 1e-6);
        let dims = matmul::Dims {
            m: 1024,
            n: 1024,
            k: 1024,
        };
        close(
            ms(dims.cpu_estimate()) * threads,
            2.0 * 1024f64.powi(3) / 15.0 * 1e-6,
        );
        // A 64x64 image is a small job on any machine; a batch of 128 1080p photos with a
        // gaussian of sigma 10 on 16 threads is not.
        assert!(g.gpu_saving(64, 64, 4, 8, 1) < crate::gpu::SMALL_JOB);
        let g10 = blur::Options::new(blur::Kind::Gaussian { sigma: 10.0 }, 30, 1);
        let batch = ms(g10.gpu_saving(1920, 1080, 3, 8, 128)) * threads / 16.0;
        assert!(batch > ms(crate::gpu::SMALL_JOB), "{batch}");
    }
}
