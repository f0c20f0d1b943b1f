// scan_subgroup: the in-tile reduction and scan of the scan kernels with subgroup operations, of any subgroup size.
// (naga 30 takes subgroup operations on devices with the SUBGROUP feature and rejects `enable subgroups;`.)

// import: lane_subgroup

// One total per subgroup and per k: VEC_PER_THREAD * WG_SIZE / subgroup size of them
// (32 entries for 32-lane subgroups). Their count, SH_WORDS, is `Tunables::workgroup_bytes`
// / 4 (src/ops/scan/tune.rs), set by the plan.
override SH_WORDS: u32;
var<workgroup> sh_totals: array<u32, SH_WORDS>;

// Where this invocation's values sit in the tile's order: subgroup after subgroup, so that
// a subgroup's lanes are consecutive whatever local_invocation_index they have. Subgroups are
// full: the host takes this path only when the largest subgroup size divides WG_SIZE.
fn lane_position(lane: Lane) -> u32 {
    return lane.sid * lane.sgs + lane.sgi;
}

// Exclusive (x) and inclusive (y) scan of `x` across the subgroup, in lane order. Sums use the
// hardware scan; min and max have none, so they take log2(size) shuffle-up steps (Hillis and
// Steele).
fn subgroup_scan(x: u32, lane: Lane) -> vec2<u32> {
    var exclusive: u32;
    if OP == 0u {
        if DTYPE == 2u {
            exclusive = bitcast<u32>(subgroupExclusiveAdd(bitcast<f32>(x)));
        } else {
            // u32 and i32 sums have the same bits.
            exclusive = subgroupExclusiveAdd(x);
        }
        return vec2<u32>(exclusive, combine(exclusive, x));
    }
    var v = x;
    for (var delta = 1u; delta < lane.sgs; delta <<= 1u) {
        let up = subgroupShuffleUp(v, delta);
        if lane.sgi >= delta {
            v = combine(up, v);
        }
    }
    exclusive = select(subgroupShuffleUp(v, 1u), identity(), lane.sgi == 0u);
    return vec2<u32>(exclusive, v);
}

// The combination of `x` over the subgroup.
fn subgroup_reduce(x: u32) -> u32 {
    switch DTYPE {
        case 2u: {
            let f = bitcast<f32>(x);
            switch OP {
                case 1u: { return bitcast<u32>(subgroupMin(f)); }
                case 2u: { return bitcast<u32>(subgroupMax(f)); }
                default: { return bitcast<u32>(subgroupAdd(f)); }
            }
        }
        case 1u: {
            let i = bitcast<i32>(x);
            switch OP {
                case 1u: { return bitcast<u32>(subgroupMin(i)); }
                case 2u: { return bitcast<u32>(subgroupMax(i)); }
                default: { return subgroupAdd(x); }
            }
        }
        default: {
            switch OP {
                case 1u: { return subgroupMin(x); }
                case 2u: { return subgroupMax(x); }
                default: { return subgroupAdd(x); }
            }
        }
    }
}

// The combination of every invocation's `x`, returned to all of them.
fn tile_reduce(x: u32, lane: Lane) -> u32 {
    let r = subgroup_reduce(x);
    if lane.sgi == 0u {
        sh_totals[lane.sid] = r;
    }
    workgroupBarrier();
    var total = identity();
    for (var s = 0u; s < WG_SIZE / lane.sgs; s++) {
        total = combine(total, sh_totals[s]);
    }
    return total;
}

struct TileScan {
    // Exclusive prefix of value k of this invocation, in tile order (k * WG_SIZE + position).
    prefix: array<u32, VEC_PER_THREAD>,
    // The combination of all values of the tile.
    total: u32,
}

// Exclusive scan of the WG_SIZE * VEC_PER_THREAD values `t` of the workgroup. Each subgroup
// scans its k-th values; the subgroup totals, in tile order, go to workgroup memory; after the
// one barrier every subgroup scans those totals itself (in chunks of its size, one chunk for
// 32 lanes) and takes the prefixes of its own entries.
fn tile_exclusive(t: array<u32, VEC_PER_THREAD>, lane: Lane) -> TileScan {
    let subgroups = WG_SIZE / lane.sgs;
    var within: array<u32, VEC_PER_THREAD>;
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        let scan = subgroup_scan(t[k], lane);
        within[k] = scan.x;
        if lane.sgi == lane.sgs - 1u {
            sh_totals[k * subgroups + lane.sid] = scan.y;
        }
    }
    workgroupBarrier();
    let count = VEC_PER_THREAD * subgroups;
    var out: TileScan;
    var carry = identity();
    for (var base = 0u; base < count; base += lane.sgs) {
        let i = base + lane.sgi;
        var v = identity();
        if i < count {
            v = sh_totals[i];
        }
        let scan = subgroup_scan(v, lane);
        for (var k = 0u; k < VEC_PER_THREAD; k++) {
            // Entry k of this subgroup; the same for all its lanes, so the shuffle broadcasts.
            let entry = k * subgroups + lane.sid;
            let before = subgroupShuffle(scan.x, entry % lane.sgs);
            if entry >= base && entry < base + lane.sgs {
                out.prefix[k] = combine(carry, before);
            }
        }
        carry = combine(carry, subgroupShuffle(scan.y, lane.sgs - 1u));
    }
    for (var k = 0u; k < VEC_PER_THREAD; k++) {
        out.prefix[k] = combine(out.prefix[k], within[k]);
    }
    out.total = carry;
    return out;
}
