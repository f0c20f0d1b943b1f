//! x86-64 vector helpers shared by the CPU kernels (the JPEG encoder's quantiser in
//! src/io/jpeg/dct.rs, the blur engine's 8-bit box in src/ops/blur/engine/box8.rs).

use std::arch::x86_64::__m256i;

/// `_mm256_mulhi_epu16` as the one instruction it names. The intrinsic is written as 32-bit
/// arithmetic that LLVM lowers to `vpmulhuw` only where it sees both operands' widening in
/// the same block; with an operand's widening hoisted out of a loop it multiplies 32-bit lanes
/// instead, twice the multiplies and packs (measured: the JPEG quantiser, and the blur's row
/// pass, which took half again as long).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn mulhi_epu16(a: __m256i, b: __m256i) -> __m256i {
    let r;
    // SAFETY: the caller runs on AVX2; the instruction touches only these registers.
    std::arch::asm!(
        "vpmulhuw {r}, {a}, {b}",
        r = lateout(ymm_reg) r,
        a = in(ymm_reg) a,
        b = in(ymm_reg) b,
        options(pure, nomem, nostack, preserves_flags),
    );
    r
}
