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
