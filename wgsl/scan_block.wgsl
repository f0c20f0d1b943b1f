// scan_block: scans each tile of one scan level in place, starting from the tile's carry
// (the scanned total of the tiles before it, from the level above).
// The operator and the in-tile path (scan_workgroup or scan_subgroup, the `scan_tile` slot)
// are imported at the end: naga 30 panics when an override (WG_SIZE) is declared after a
// workgroup array sized by it.

// Its Rust twin is `BlockParams` in src/ops/scan/plan.rs (the shader test checks their fields).
struct Params {
    // Elements in this level.
    n: u32,
    // 1: out[i] includes in[i]; 0: it does not.
    inclusive: u32,
    // The carry of tile t is carries[carry_base + t].
    carry_base: u32,
    // The top level of a segment (one tile) writes carry + its total to carries[total_slot]
    // for the next segment; u32::MAX on other levels.
    total_slot: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> carries: array<u32>;
@group(0) @binding(2) var<storage, read_write> data: array<vec4<u32>>;

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
    var x: array<vec4<u32>, VEC_PER_THREAD>;
    var t: array<u32, VEC_PER_THREAD>;
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        let i = tile * tile_vec4 + k * WG_SIZE + p;
        x[k] = vec4<u32>(identity());
        if i < n_vec4 {
            x[k] = masked(data[i], 4u * i, params.n);
        }
        t[k] = combine4(x[k]);
    }
    let scan = tile_exclusive(t, lane);
    let carry = carries[params.carry_base + tile];
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        let i = tile * tile_vec4 + k * WG_SIZE + p;
        // Serial scan of the vec4, from everything before it.
        let v = x[k];
        let e0 = combine(carry, scan.prefix[k]);
        let e1 = combine(e0, v.x);
        let e2 = combine(e1, v.y);
        let e3 = combine(e2, v.z);
        if i < n_vec4 {
            if params.inclusive != 0u {
                data[i] = vec4<u32>(e1, e2, e3, combine(e3, v.w));
            } else {
                data[i] = vec4<u32>(e0, e1, e2, e3);
            }
        }
    }
    if params.total_slot != 0xffffffffu && p == 0u {
        carries[params.total_slot] = combine(carry, scan.total);
    }
}

// import: scan_op
// import: scan_tile
// import: grid
