// copy: dst = src, vec4<u32> at a time. The bandwidth speed of light for `gpukit bench`.

// import: grid

// Its Rust twin is `CopyParams` in src/ops/copy.rs (the shader test checks their fields).
struct Params {
    // Number of vec4<u32> to copy.
    n_vec4: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

override WG_SIZE: u32 = 256u;
// vec4s each invocation copies, WG_SIZE apart so that every load is coalesced.
override VEC_PER_THREAD: u32 = 1u;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = workgroup_index(wid, nwg);
    let base = wg * WG_SIZE * VEC_PER_THREAD + lid;
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        let i = base + k * WG_SIZE;
        if i < params.n_vec4 {
            dst[i] = src[i];
        }
    }
}
