// resize_regular: the weights of a whole-number reduction's regular positions, for
// wgsl/resize_h8s.wgsl and wgsl/resize_v8.wgsl. At such a reduction every position away from
// the edges weighs its window with one kernel (`Windows::regular` in
// src/ops/resize/stride.rs finds them), which the plan sets here, so that the multiply-adds
// take constant operands.

// Whether any position is regular (a kernel of at most 16 taps): where not, a kernel builds
// only the path that loads its weights.
override REGULAR: bool = false;
// The regular positions' weights over their window, in units of 2^-22 (0 past its taps).
override KW0: i32 = 0;
override KW1: i32 = 0;
override KW2: i32 = 0;
override KW3: i32 = 0;
override KW4: i32 = 0;
override KW5: i32 = 0;
override KW6: i32 = 0;
override KW7: i32 = 0;
override KW8: i32 = 0;
override KW9: i32 = 0;
override KW10: i32 = 0;
override KW11: i32 = 0;
override KW12: i32 = 0;
override KW13: i32 = 0;
override KW14: i32 = 0;
override KW15: i32 = 0;

// Tap i of a regular position whose window is `taps` long (0 outside it): with i known when
// the kernel is built, a constant.
fn kw(i: i32, taps: u32) -> i32 {
    let t = array<i32, 16>(
        KW0, KW1, KW2, KW3, KW4, KW5, KW6, KW7, KW8, KW9, KW10, KW11, KW12, KW13, KW14, KW15,
    );
    if i < 0 || i >= i32(min(taps, 16u)) {
        return 0i;
    }
    return t[i];
}
