// histogram_total: adds one image's counts into the 64-bit running total (for --sum and the plot).

// Its Rust twin is `TotalParams` in src/ops/histogram/gpu.rs (the shader test checks their fields).
struct Params {
    // Counts per histogram (bins * channels).
    entries: u32,
    // Copies of the image's counts in `counts`, one after another, summed here.
    slices: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> counts: array<u32>;
// (low word, high word) of each 64-bit count.
@group(0) @binding(2) var<storage, read_write> total: array<vec2<u32>>;

override WG_SIZE: u32 = 256u;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i < params.entries {
        let t = total[i];
        // The slices' sum is one count of one image: below 2^32.
        var n = 0u;
        for (var s = 0u; s < params.slices; s++) {
            n += counts[s * params.entries + i];
        }
        let lo = t.x + n;
        // A carry happened when the low word wrapped below its old value.
        total[i] = vec2<u32>(lo, t.y + select(0u, 1u, lo < t.x));
    }
}

// import: grid
