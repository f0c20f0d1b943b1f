// scan_lookback: scans a whole segment in one pass by decoupled look-back (Merrill and
// Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016): each
// workgroup scans one tile, publishes the tile's total, walks back over the tiles before it
// until one has published its inclusive prefix (one tile a step, scan_walk_serial, or on the
// subgroup path a subgroup's size of tiles a step, scan_walk_subgroup), publishes its own,
// and writes its tile.
// Tiles are numbered in the order workgroups start (an atomic ticket), so every tile a
// workgroup waits for belongs to a workgroup that is already running: the wait never depends
// on the scheduler starting another workgroup (WebGPU promises no order between
// workgroups). The operator and the in-tile path (the `scan_tile` slot) are imported at the
// end: naga 30 panics when an override (WG_SIZE) is declared after a workgroup array sized
// by it.

// Its Rust twin is `LookbackParams` in src/ops/scan/plan.rs (the shader test checks their
// fields).
struct Params {
    // Elements in this segment.
    n: u32,
    // 1: out[i] includes in[i]; 0: it does not.
    inclusive: u32,
    // carries[carry_slot] is the segment's carry (the scanned total of the segments before
    // it); the last tile writes carry + the segment's total to carries[carry_slot + 1].
    carry_slot: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> carries: array<u32>;
@group(0) @binding(2) var<storage, read_write> data: array<vec4<u32>>;
// Zeroed before the pass. state[0]: the next ticket. state[1 + 2t] and state[2 + 2t]: what
// tile t published, its low and its high 16 bits, each as (flag << 16) | bits. Value and flag
// share one atomic word, so a reader that sees the flag sees the value with it (WGSL's
// atomics are relaxed: there is no release/acquire order between two locations).
@group(0) @binding(3) var<storage, read_write> state: array<atomic<u32>>;

// Set to 1 by a workgroup that gave up waiting (see `wait_for`); the host checks it.
@group(0) @binding(4) var<storage, read_write> fault: array<atomic<u32>>;

override WG_SIZE: u32 = 256u;
// Iterations of `wait_for`'s loop (32 polls each) before it gives up.
const ROUNDS: u32 = 65536u;

// The flags: nothing yet, the tile's own total, the combination of every tile up to it.
const NOT_READY: u32 = 0u;
const AGGREGATE: u32 = 1u;
const PREFIX: u32 = 2u;

var<workgroup> sh_tile: u32;
var<workgroup> sh_before: u32;

fn publish(tile: u32, flag: u32, v: u32) {
    atomicStore(&state[1u + 2u * tile], (flag << 16u) | (v & 0xffffu));
    atomicStore(&state[2u + 2u * tile], (flag << 16u) | (v >> 16u));
}

// What tile t published (x) and its flag (y): NOT_READY until both halves carry the same
// flag (each half is written once per flag, so two equal flags are one publication). Read
// with atomicOr(p, 0): lavapipe makes one load of an atomicLoad polled in a loop.
fn published(tile: u32) -> vec2<u32> {
    let lo = atomicOr(&state[1u + 2u * tile], 0u);
    let hi = atomicOr(&state[2u + 2u * tile], 0u);
    let flag = lo >> 16u;
    if flag != hi >> 16u {
        return vec2<u32>(0u, NOT_READY);
    }
    return vec2<u32>((lo & 0xffffu) | (hi << 16u), flag);
}

// `s` if tile j had published it, else a fresh look.
fn poll(s: vec2<u32>, j: u32) -> vec2<u32> {
    if s.y == NOT_READY {
        return published(j);
    }
    return s;
}

// Eight polls in straight-line code (see `wait_for`).
fn poll8(s: vec2<u32>, j: u32) -> vec2<u32> {
    var t = poll(s, j);
    t = poll(t, j);
    t = poll(t, j);
    t = poll(t, j);
    t = poll(t, j);
    t = poll(t, j);
    t = poll(t, j);
    return poll(t, j);
}

// What tile j published, once it has (a flag other than NOT_READY). Tile j's workgroup is
// running (it drew its ticket first), so the wait ends wherever a running workgroup keeps
// running; past ROUNDS * 32 polls it gives up with NOT_READY. lavapipe (llvmpipe) leaves
// every loop of an invocation once they have taken 65535 iterations between them, hence 32
// polls an iteration.
fn wait_for(j: u32) -> vec2<u32> {
    var s = published(j);
    for (var round = 0u; round < ROUNDS && s.y == NOT_READY; round++) {
        s = poll8(poll8(poll8(poll8(s, j), j), j), j);
    }
    return s;
}

// After the walk: publishes the tile's inclusive prefix (`before`, the combination of every
// element before the tile, with its `total`), the segment's carry from its last tile, and
// `before` for the workgroup. By one invocation.
fn finish(tile: u32, before: u32, total: u32, last: bool) {
    let through = combine(before, total);
    publish(tile, PREFIX, through);
    if last {
        carries[params.carry_slot + 1u] = through;
    }
    sh_before = before;
}

@compute @workgroup_size(WG_SIZE)
fn main(lane: Lane) {
    if lane.lid == 0u {
        sh_tile = atomicAdd(&state[0], 1u);
    }
    let tile = workgroupUniformLoad(&sh_tile);
    let tile_vec4 = WG_SIZE * VEC_PER_THREAD;
    let n_vec4 = (params.n + 3u) / 4u;
    // A 2-D grid's spare workgroups draw the last tickets.
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
    look_back(tile, scan.total, tile == (n_vec4 - 1u) / tile_vec4, lane);
    let carry = workgroupUniformLoad(&sh_before);
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
}

// import: scan_op
// import: scan_tile
// The walk (`look_back`): one invocation a tile at a time, or on the subgroup path a whole
// subgroup, a tile a lane.
// import: scan_walk_serial
