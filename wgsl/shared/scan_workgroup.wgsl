// scan_workgroup: the in-tile reduction and scan of the scan kernels in workgroup memory only (no subgroups).

// import: lane_workgroup

// Blelloch's tree holds VEC_PER_THREAD values per invocation; every 32nd slot is skipped
// (GPU Gems 3, ch. 39) so that the tree's strided accesses fall in different banks.
// The tree's words, WG_SIZE * VEC_PER_THREAD and one in 32 more, are SH_WORDS:
// `Tunables::workgroup_bytes` / 4 (src/ops/scan/tune.rs), set by the plan.
const LOG_BANKS: u32 = 5u;
override SH_WORDS: u32;
var<workgroup> sh_tree: array<u32, SH_WORDS>;

fn padded(i: u32) -> u32 {
    return i + (i >> LOG_BANKS);
}

// Where this invocation's values sit in the tile's order.
fn lane_position(lane: Lane) -> u32 {
    return lane.lid;
}

// The combination of every invocation's `x`, returned to all of them: a tree in workgroup
// memory with sequential addressing (neighbouring invocations, neighbouring banks).
fn tile_reduce(x: u32, lane: Lane) -> u32 {
    sh_tree[lane.lid] = x;
    for (var stride = WG_SIZE >> 1u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if lane.lid < stride {
            sh_tree[lane.lid] = combine(sh_tree[lane.lid], sh_tree[lane.lid + stride]);
        }
    }
    workgroupBarrier();
    return sh_tree[0];
}

struct TileScan {
    // Exclusive prefix of value k of this invocation, in tile order (k * WG_SIZE + position).
    prefix: array<u32, VEC_PER_THREAD>,
    // The combination of all values of the tile.
    total: u32,
}

// Blelloch's work-efficient exclusive scan of the WG_SIZE * VEC_PER_THREAD values `t` of the
// workgroup: an up-sweep builds partial totals in place, a down-sweep turns them into prefixes.
fn tile_exclusive(t: array<u32, VEC_PER_THREAD>, lane: Lane) -> TileScan {
    let count = WG_SIZE * VEC_PER_THREAD;
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        sh_tree[padded(k * WG_SIZE + lane.lid)] = t[k];
    }
    var offset = 1u;
    for (var d = count >> 1u; d > 0u; d >>= 1u) {
        workgroupBarrier();
        for (var i = lane.lid; i < d; i += WG_SIZE) {
            let ai = offset * (2u * i + 1u) - 1u;
            let bi = offset * (2u * i + 2u) - 1u;
            sh_tree[padded(bi)] = combine(sh_tree[padded(ai)], sh_tree[padded(bi)]);
        }
        offset <<= 1u;
    }
    workgroupBarrier();
    var out: TileScan;
    out.total = sh_tree[padded(count - 1u)];
    // Every invocation has read the total before the root is cleared.
    workgroupBarrier();
    if lane.lid == 0u {
        sh_tree[padded(count - 1u)] = identity();
    }
    for (var d = 1u; d < count; d <<= 1u) {
        offset >>= 1u;
        workgroupBarrier();
        for (var i = lane.lid; i < d; i += WG_SIZE) {
            let ai = offset * (2u * i + 1u) - 1u;
            let bi = offset * (2u * i + 2u) - 1u;
            let left = sh_tree[padded(ai)];
            sh_tree[padded(ai)] = sh_tree[padded(bi)];
            sh_tree[padded(bi)] = combine(sh_tree[padded(bi)], left);
        }
    }
    workgroupBarrier();
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        out.prefix[k] = sh_tree[padded(k * WG_SIZE + lane.lid)];
    }
    return out;
}
