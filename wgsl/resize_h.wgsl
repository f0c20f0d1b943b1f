// resize_h: the horizontal 1-D pass of Pillow's resampling over packed 8- or 16-bit
// samples. A workgroup writes a run of output words: it loads the input pixels they read
// into workgroup memory once (one word a thread at a time, coalesced; premultiplied there),
// a thread then sums two output pixels' taps from it, and the pixels are packed back into
// words and written coalesced.

// import: resize_pass
// import: grid

// Threads a workgroup, and output pixels a thread: `ResizePlan` keeps the pixels of a
// workgroup's words at most WG_SIZE * PIXELS_PER_THREAD (`PIXELS_PER_THREAD` of
// src/ops/resize/plan.rs: the shader test checks they agree). Two pixels a thread halve the
// workgroups, and with them each workgroup's fixed latency (its span, its loads, barriers).
override WG_SIZE: u32 = 128u;
const PIXELS_PER_THREAD: u32 = 2u;
// The samples a workgroup can hold (16 KiB, the WebGPU default limit, less `sh_span`):
// `SH_SAMPLES` of src/ops/resize/plan.rs (the shader test checks they agree).
const SH_SAMPLES: u32 = 4092u;

// The input pixels a workgroup reads (in row-major order over the whole image): the first,
// and how many (0: too many, taps are read from global memory).
var<workgroup> sh_span: vec2<u32>;
// The input, one plane a channel: channel ch of pixel first + q at ch * SH_SAMPLES /
// CHANNELS + q (neighbouring threads then read words about the scale factor apart). After
// the sums, the output samples in order.
var<workgroup> sh: array<u32, SH_SAMPLES>;

// Output pixel p (row-major over the whole output), all its channels: its taps read from
// workgroup memory where the workgroup's input is there (span.y > 0), else from global memory.
fn pixel(p: u32, span: vec2<u32>, plane: u32) -> array<u32, 4> {
    let y = p / params.out_w;
    let x = p - y * params.out_w;
    let t = taps(x);
    var acc: array<vec2<i32>, 4>;
    if span.y > 0u {
        let base = y * params.in_w + t.x - span.x;
        for (var i = 0u; i < t.y; i++) {
            let k = weight(x, i);
            for (var ch = 0u; ch < CHANNELS; ch++) {
                acc[ch] = tap(acc[ch], sh[ch * plane + base + i], k);
            }
        }
    } else {
        let base = (y * params.in_w + t.x) * CHANNELS;
        for (var i = 0u; i < t.y; i++) {
            let k = weight(x, i);
            for (var ch = 0u; ch < CHANNELS; ch++) {
                acc[ch] = tap(acc[ch], input(base + i * CHANNELS + ch), k);
            }
        }
    }
    var res: array<u32, 4>;
    for (var ch = 0u; ch < CHANNELS; ch++) {
        res[ch] = finish(acc[ch]);
    }
    if UNPREMULTIPLY {
        for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
            res[ch] = unpremultiply(res[ch], res[CHANNELS - 1u]);
        }
    }
    return res;
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per = 32u / DEPTH;
    let w0 = workgroup_index(wid, nwg) * params.wg_words;
    if w0 >= params.n_words {
        return;
    }
    let w1 = min(w0 + params.wg_words, params.n_words);
    // The output pixels [p0, p1] that the words' samples belong to.
    let p0 = w0 * per / CHANNELS;
    let p1 = (min(w1 * per, params.n_samples) - 1u) / CHANNELS;
    let plane = SH_SAMPLES / CHANNELS;
    if lid == 0u {
        // Both ends of a row's taps move right with the output column, so the first pixel's
        // first tap and the last pixel's last tap bound what the workgroup reads.
        let y0 = p0 / params.out_w;
        let y1 = p1 / params.out_w;
        let a = taps(p0 - y0 * params.out_w);
        let b = taps(p1 - y1 * params.out_w);
        let first = y0 * params.in_w + a.x;
        let n = y1 * params.in_w + b.x + b.y - first;
        sh_span = vec2<u32>(first, select(0u, n, n <= plane));
    }
    let span = workgroupUniformLoad(&sh_span);
    if span.y > 0u {
        let a = span.x * CHANNELS;
        let b = a + span.y * CHANNELS;
        for (var w = a / per + lid; w < (b + per - 1u) / per; w += WG_SIZE) {
            let word = src[w];
            for (var j = 0u; j < per; j++) {
                let i = w * per + j;
                if i >= a && i < b {
                    let k = i - a;
                    sh[(k % CHANNELS) * plane + k / CHANNELS] = (word >> (j * DEPTH)) & max_value();
                }
            }
        }
        workgroupBarrier();
        if PREMULTIPLY {
            for (var q = lid; q < span.y; q += WG_SIZE) {
                let alpha = sh[(CHANNELS - 1u) * plane + q];
                for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
                    sh[ch * plane + q] = premultiply(sh[ch * plane + q], alpha);
                }
            }
            workgroupBarrier();
        }
    }
    // This thread's output pixels, all their channels, WG_SIZE apart.
    var res: array<array<u32, 4>, PIXELS_PER_THREAD>;
    for (var q = 0u; q < PIXELS_PER_THREAD; q++) {
        let p = p0 + q * WG_SIZE + lid;
        if p <= p1 {
            res[q] = pixel(p, span, plane);
        }
    }
    workgroupBarrier();
    for (var q = 0u; q < PIXELS_PER_THREAD; q++) {
        let p = p0 + q * WG_SIZE + lid;
        if p <= p1 {
            for (var ch = 0u; ch < CHANNELS; ch++) {
                sh[(p - p0) * CHANNELS + ch] = res[q][ch];
            }
        }
    }
    workgroupBarrier();
    let s0 = p0 * CHANNELS;
    for (var w = w0 + lid; w < w1; w += WG_SIZE) {
        var out = 0u;
        for (var j = 0u; j < per; j++) {
            let s = w * per + j;
            if s < params.n_samples {
                out |= sh[s - s0] << (j * DEPTH);
            }
        }
        dst[w] = out;
    }
}
