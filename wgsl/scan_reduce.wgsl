// scan_reduce: the total of each tile of one scan level, which the level above scans.
// The operator and the in-tile path (scan_workgroup or scan_subgroup, the `scan_tile` slot)
// are imported at the end: naga 30 panics when an override (WG_SIZE) is declared after a
// workgroup array sized by it.

// Its Rust twin is `ReduceParams` in src/ops/scan/plan.rs (the shader test checks their fields).
struct Params {
    // Elements in this level.
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> totals: array<u32>;

override WG_SIZE: u32 = 256u;

@compute @workgroup_size(WG_SIZE)
fn main(lane: Lane) {
    // One tile per workgroup.
    let tile = workgroup_index(lane.wid, lane.nwg);
    let tile_vec4 = WG_SIZE * VEC_PER_THREAD;
    let n_vec4 = (params.n + 3u) / 4u;
    if tile * tile_vec4 >= n_vec4 {
        return;
    }
    let p = lane_position(lane);
    var acc = identity();
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        let i = tile * tile_vec4 + k * WG_SIZE + p;
        if i < n_vec4 {
            acc = combine(acc, combine4(masked(src[i], 4u * i, params.n)));
        }
    }
    let total = tile_reduce(acc, lane);
    if p == 0u {
        totals[tile] = total;
    }
}

// import: scan_op
// import: scan_tile
// import: grid
