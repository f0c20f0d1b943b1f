// histogram_reduce: sums groups of FAN_IN chunks entry by entry into one; the last level adds into the image's counts.

// Its Rust twin is `ReduceParams` in src/ops/histogram/gpu.rs (the shader test checks their fields).
struct Params {
    // Counts per chunk (bins * channels).
    entries: u32,
    // Chunks in, and how many of them each output chunk sums.
    n_in: u32,
    fan_in: u32,
    // Chunks out: ceil(n_in / fan_in).
    n_out: u32,
    // Blocks of ENTRIES_PER_WG entries per chunk; workgroup w does block w % blocks of
    // output chunk w / blocks.
    blocks: u32,
    // 1: dst += sum (the last level, into the image's counts); 0: dst = sum.
    accumulate: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

override WG_SIZE: u32 = 256u;
// Consecutive entries a workgroup sums (one row of loads, coalesced); the WG_SIZE /
// ENTRIES_PER_WG lanes of each entry split its chunks between them.
override ENTRIES_PER_WG: u32 = 64u;
override LANES: u32 = WG_SIZE / ENTRIES_PER_WG;

var<workgroup> sh_sum: array<u32, WG_SIZE>;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = workgroup_index(wid, nwg);
    if wg >= params.n_out * params.blocks {
        return;
    }
    let group = wg / params.blocks;
    let col = lid % ENTRIES_PER_WG;
    let lane = lid / ENTRIES_PER_WG;
    let e = (wg % params.blocks) * ENTRIES_PER_WG + col;
    let c0 = group * params.fan_in;
    let c1 = min(c0 + params.fan_in, params.n_in);

    var sum = 0u;
    if e < params.entries {
        for (var c = c0 + lane; c < c1; c += LANES) {
            sum += src[c * params.entries + e];
        }
    }
    sh_sum[lid] = sum;
    workgroupBarrier();

    if lane == 0u && e < params.entries {
        var total = 0u;
        for (var l = 0u; l < LANES; l++) {
            total += sh_sum[l * ENTRIES_PER_WG + col];
        }
        let o = group * params.entries + e;
        if params.accumulate != 0u {
            total += dst[o];
        }
        dst[o] = total;
    }
}

// import: grid
