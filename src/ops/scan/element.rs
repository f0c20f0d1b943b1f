//! The element types scan takes (u32, i32, f32) and their arithmetic on both sides.

use std::fmt;

use super::{Elem, Op};

/// A type scan takes, with its arithmetic: as the GPU does it (`identity`, `combine`), and as
/// the CPU reference does it (`Acc`: wrapping integers, f64 for f32).
pub trait Element: bytemuck::Pod + PartialEq + fmt::Debug + Send + Sync {
    const ELEM: Elem;
    /// The CPU reference's accumulator.
    type Acc: Copy;
    /// The twin of `identity` in wgsl/shared/scan_op.wgsl: tests/scan.rs
    /// (`identities_start_exclusive_scans`) holds the GPU's for every op and type against
    /// these values.
    fn identity(op: Op) -> Self;
    /// The twin of `combine` in wgsl/shared/scan_op.wgsl: tests/scan.rs
    /// (`*_matches_cpu_for_every_op_mode_and_path`) holds every op and type on the GPU
    /// against the CPU reference.
    fn combine(op: Op, a: Self, b: Self) -> Self;
    fn acc_identity(op: Op) -> Self::Acc;
    fn acc_combine(op: Op, a: Self::Acc, x: Self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
}

impl Element for u32 {
    const ELEM: Elem = Elem::U32;
    type Acc = u32;
    fn identity(op: Op) -> u32 {
        match op {
            Op::Sum => 0,
            Op::Min => u32::MAX,
            Op::Max => 0,
        }
    }
    fn combine(op: Op, a: u32, b: u32) -> u32 {
        match op {
            Op::Sum => a.wrapping_add(b),
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> u32 {
        Self::identity(op)
    }
    fn acc_combine(op: Op, a: u32, x: u32) -> u32 {
        Self::combine(op, a, x)
    }
    fn from_acc(a: u32) -> u32 {
        a
    }
}

impl Element for i32 {
    const ELEM: Elem = Elem::I32;
    type Acc = i32;
    fn identity(op: Op) -> i32 {
        match op {
            Op::Sum => 0,
            Op::Min => i32::MAX,
            Op::Max => i32::MIN,
        }
    }
    fn combine(op: Op, a: i32, b: i32) -> i32 {
        match op {
            Op::Sum => a.wrapping_add(b),
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> i32 {
        Self::identity(op)
    }
    fn acc_combine(op: Op, a: i32, x: i32) -> i32 {
        Self::combine(op, a, x)
    }
    fn from_acc(a: i32) -> i32 {
        a
    }
}

impl Element for f32 {
    const ELEM: Elem = Elem::F32;
    type Acc = f64;
    fn identity(op: Op) -> f32 {
        match op {
            Op::Sum => 0.0,
            Op::Min => f32::INFINITY,
            Op::Max => f32::NEG_INFINITY,
        }
    }
    fn combine(op: Op, a: f32, b: f32) -> f32 {
        match op {
            Op::Sum => a + b,
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> f64 {
        Self::identity(op) as f64
    }
    fn acc_combine(op: Op, a: f64, x: f32) -> f64 {
        match op {
            Op::Sum => a + x as f64,
            Op::Min => a.min(x as f64),
            Op::Max => a.max(x as f64),
        }
    }
    fn from_acc(a: f64) -> f32 {
        a as f32
    }
}
