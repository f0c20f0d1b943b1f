//! The operations: for each, the host-side plan (sizes, passes, dispatch counts), the GPU
//! path and the CPU reference that defines its result.

pub mod blur;
pub mod compare;
pub mod copy;
pub mod histogram;
pub mod matmul;
pub mod scan;
