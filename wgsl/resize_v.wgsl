// resize_v: the vertical 1-D pass of Pillow's resampling over packed 8- or 16-bit samples.
// A thread writes one output word: its samples lie side by side in one row (a word across
// two rows takes the per-sample path), so each tap reads the one or two input words under
// them, with one weight for them all; neighbouring threads read neighbouring words.

// import: resize_pass
// import: grid

override WG_SIZE: u32 = 64u;
// Taps a position (Pillow's ksize): every output word sums this many, those past its own
// count with weight 0 (the weights are zero-padded to ksize), so that the tap loop has a
// constant count the compiler unrolls and its loads are all in flight at once. Such a tap's
// row may lie past the input's last: its index is clamped to the buffer by the module's
// bounds checks, and what it reads adds nothing.
override KSIZE: u32;

// Where RV > 0 (8-bit samples, rows ending on a word, at least KSIZE input rows): a thread
// makes the words at one column of RV consecutive output rows (`n_words` counts the
// threads), so that the input rows their taps share come from the cache after the first.
// Each row's window is KSIZE taps that lie inside the input (moved back at the bottom edge,
// with zero weights outside the row's own taps), its weights position-major (tap i of row y
// at y * KSIZE + i: `device_axis_windows` in src/ops/resize/plan.rs). Such a module is built
// without bounds checks (`Gpu::kernel_unchecked`) and runs `rows8` only, whose indices are
// in range by construction (each says why), given the plan's guarantees: rows ending on a
// word, every window inside the input.
override RV: u32 = 0u;

// A word's four samples as lanes.
fn lanes4(v: u32) -> vec4<i32> {
    return vec4<i32>(vec4<u32>(v & 255u, (v >> 8u) & 255u, (v >> 16u) & 255u, v >> 24u));
}

// The colour samples of a word of whole pixels (CHANNELS 1, 2 or 4) premultiplied by their
// pixel's alpha (`premultiply`), or divided by it (`unpremultiply`).
fn alpha_word(v: u32, divide: bool) -> u32 {
    var out = v;
    for (var b = 0u; b < 4u; b++) {
        let ch = b % CHANNELS;
        if ch != CHANNELS - 1u {
            let c = (v >> (8u * b)) & 255u;
            let a = (v >> (8u * (b - ch + CHANNELS - 1u))) & 255u;
            var x = premultiply(c, a);
            if divide {
                x = unpremultiply(c, a);
            }
            out = (out & ~(255u << (8u * b))) | (x << (8u * b));
        }
    }
    return out;
}

fn rows8(g: u32) {
    // Words a row, in the input and the output alike (a vertical pass keeps the width);
    // at least 1.
    let row_words = params.out_w * CHANNELS / 4u;
    let yg = g / row_words;
    let col = g - yg * row_words;
    for (var j = 0u; j < RV; j++) {
        let y = yg * RV + j;
        if y < params.n_pos {
            // y < n_pos: inside the bounds (2 n_pos words) and the weights (n_pos rows of
            // KSIZE).
            let first = bounds[2u * y];
            var acc = vec4<i32>();
            for (var i = 0u; i < KSIZE; i++) {
                // Rows first to first + KSIZE - 1 are inside the input, col < row_words.
                var v = src[(first + i) * row_words + col];
                if PREMULTIPLY {
                    v = alpha_word(v, false);
                }
                acc += lanes4(v) * weights[y * KSIZE + i];
            }
            var out = 0u;
            for (var b = 0u; b < 4u; b++) {
                out |= finish(vec2<i32>(0i, acc[b])) << (8u * b);
            }
            if UNPREMULTIPLY {
                out = alpha_word(out, true);
            }
            // y < n_pos output rows, col < row_words.
            dst[y * row_words + col] = out;
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let word = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if word >= params.n_words {
        return;
    }
    if RV > 0u {
        rows8(word);
        return;
    }
    let per = 32u / DEPTH;
    let s0 = word * per;
    let n = min(per, params.n_samples - s0);
    // Samples a row, the same in the input and the output.
    let row = params.out_w * CHANNELS;
    let y = s0 / row;
    var v: array<u32, 4>;
    if (s0 + n - 1u) / row == y {
        let col = s0 - y * row;
        let t = taps(y);
        var acc: array<vec2<i32>, 4>;
        for (var i = 0u; i < KSIZE; i++) {
            let k = weight(y, i);
            // The input sample under s0 at this tap, and the word(s) holding the n samples.
            let i0 = (t.x + i) * row + col;
            let shift = (i0 % per) * DEPTH;
            var bits = src[i0 / per] >> shift;
            if shift != 0u && (i0 % per) + n > per {
                bits |= src[i0 / per + 1u] << (32u - shift);
            }
            for (var j = 0u; j < n; j++) {
                var x = (bits >> (j * DEPTH)) & max_value();
                if PREMULTIPLY {
                    let ch = (col + j) % CHANNELS;
                    if ch != CHANNELS - 1u {
                        let ja = j - ch + CHANNELS - 1u;
                        var alpha: u32;
                        if ja < n {
                            alpha = (bits >> (ja * DEPTH)) & max_value();
                        } else {
                            alpha = load(i0 + ja);
                        }
                        x = premultiply(x, alpha);
                    }
                }
                acc[j] = tap(acc[j], x, k);
            }
        }
        for (var j = 0u; j < n; j++) {
            v[j] = finish(acc[j]);
        }
    } else {
        for (var j = 0u; j < n; j++) {
            v[j] = sample_global(s0 + j, false);
        }
    }
    var out = 0u;
    for (var j = 0u; j < n; j++) {
        if UNPREMULTIPLY {
            let ch = (s0 + j) % CHANNELS;
            if ch != CHANNELS - 1u {
                let ja = j - ch + CHANNELS - 1u;
                var alpha: u32;
                if ja < n {
                    alpha = v[ja];
                } else {
                    alpha = sample_global(s0 + ja, false);
                }
                v[j] = unpremultiply(v[j], alpha);
            }
        }
        out |= v[j] << (j * DEPTH);
    }
    dst[word] = out;
}
