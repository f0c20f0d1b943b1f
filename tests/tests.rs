//! gpukit's integration tests: one binary, one module per area. GPU tests run on whatever
//! adapter is there (Mesa lavapipe in CI) and fail, never skip, when there is none.

mod util;

mod batch;
mod blur;
mod cli;
mod compare;
mod compare_ci;
mod copy;
mod devices;
mod encode;
mod encode_png;
mod fidelity;
mod histogram;
mod input;
mod install;
mod jpeg;
mod matmul;
mod npy;
#[cfg(unix)]
mod output;
mod property;
mod resize;
mod scan;
mod tune;
mod video;
