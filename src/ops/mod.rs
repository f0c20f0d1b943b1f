//! The operations: for each, its options, `run` on an engine (GPU or CPU) with timings, the
//! CPU reference that defines its result, and beside them its GPU plan, bench cases and
//! tunables. [`REGISTRY`] lists them; `gpukit bench`, `gpukit tune` and their `--help` are
//! made from it. docs/ARCHITECTURE.md has the checklist for adding one.

pub mod blur;
pub mod copy;
pub mod histogram;
pub mod matmul;
pub mod scan;

use anyhow::Result;

use crate::bench::{Case, Sizes};
use crate::gpu::Engine;
use crate::tune::{Level, OpResult};

/// An op's tuning: the search on an engine at a level; `progress` hears what is measured.
pub type TuneFn = fn(&Engine, Level, &mut dyn FnMut(&str)) -> Result<OpResult>;

/// What an op plugs into the tools that drive every op.
pub struct Op {
    /// Its name on the command line (`gpukit bench NAME`, `gpukit tune NAME`) and in the tune
    /// cache.
    pub name: &'static str,
    /// Its benchmark cases on an engine; `Sizes` carries the bench flags that size them.
    pub bench: for<'e> fn(&'e Engine, &Sizes) -> Result<Vec<Case<'e>>>,
    /// Its tuning (`None`: nothing to tune).
    pub tune: Option<TuneFn>,
}

/// Every op, in the order `bench all` and `tune all` run them. One line per op.
pub const REGISTRY: &[Op] = &[copy::OP, blur::OP, histogram::OP, scan::OP, matmul::OP];

/// The op named `name`.
pub fn find(name: &str) -> Option<&'static Op> {
    REGISTRY.iter().find(|op| op.name == name)
}

/// The ops that have something to tune.
pub fn tunable() -> impl Iterator<Item = &'static Op> {
    REGISTRY.iter().filter(|op| op.tune.is_some())
}
