// matmul: C = op(A) op(B), tiled in workgroup memory with register blocking, f32 accumulation.
//
// Built without wgpu's runtime checks (`Gpu::kernel_unchecked`, src/gpu/kernel.rs, called by
// src/ops/matmul/plan.rs): a clamp on every workgroup-memory index kept the driver from
// folding the inner loop's addresses into its loads, and cost 2-41% by tiling
// (docs/BENCHMARKS.md, call CW). So every index here is in range by construction, as the
// comments at each say, for the constants `Tunables::check` allows and the buffers the plan
// binds: A, B and C hold whole rows of lda4, ldb4 and ldc4 vec4s for their m (k when A_T),
// k (n when B_T) and m rows; and every divisor is nonzero.

// Its Rust twin is `MatmulParams` in src/ops/matmul/plan.rs (the shader test checks their fields).
struct Params {
    // C is m x n; the product runs over k.
    m: u32,
    n: u32,
    k: u32,
    // Row strides, in vec4s, of A, B and C as stored (A stored k x m when A_T, B stored
    // n x k when B_T). Rows are zero-padded to whole vec4s on upload.
    lda4: u32,
    ldb4: u32,
    ldc4: u32,
    // 1: add the product to C (K split into chunks, after the first); 0: overwrite C.
    accumulate: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem4>;
@group(0) @binding(2) var<storage, read> b: array<Elem4>;
@group(0) @binding(3) var<storage, read_write> c: array<vec4<f32>>;

// The element type of A and B. The f16 variant (`variant` in src/ops/matmul/plan.rs)
// replaces this line with `vec4<f16>` and prepends `enable f16;`; tiles and accumulators
// stay f32.
alias Elem4 = vec4<f32>;

// Tile of C per workgroup (BM x BN), depth of one K step (BK), block of C per invocation
// (TM x TN). Chosen by `Tunables` in src/ops/matmul/tune.rs, which checks the constraints:
// TM, TN in {4, 8}; BM and BN positive, BM % (4 TM) == 0 and BN % (4 TN) == 0; BK % 4 == 0
// and positive; GROUP_M positive; WG_SIZE == (BM / TM) * (BN / TN); at most 4 vec4 loads of
// each tile per invocation.
override BM: u32 = 64u;
override BN: u32 = 64u;
override BK: u32 = 8u;
override TM: u32 = 4u;
override TN: u32 = 4u;
override WG_SIZE: u32 = 256u;
// A is stored transposed (k x m), B is stored transposed (n x k).
override A_T: bool = false;
override B_T: bool = false;
// Workgroups run down GROUP_M tile rows before moving right, so that tiles running at the
// same time share rows of A and columns of B in the cache.
override GROUP_M: u32 = 8u;
// Whether each run of 32 invocations takes an 8 x 4 block of the invocation grid (TX % 8 == 0,
// TY % 4 == 0; `Tunables::warp_tiles`) rather than a row of it: a warp's workgroup-memory reads
// of a step then touch 8 vec4s of B and 4 of A, one 128-byte wavefront each. 1% faster on an
// H100 for 8 x 8 blocks, 1-2% slower for 4 x 4 (call CY). Any bijection of the invocations
// onto (tx, ty) computes the same sums.
override WARP_TILE: bool = false;
// The step's products run in chunks of KCHUNK rows of the tiles (`Tunables::k_chunk`), a loop
// of BK / KCHUNK around an inner loop the driver unrolls: for 8 x 8 blocks at BK 16 the driver
// would not unroll the step's 1024 FMAs in one loop, which then ran at 0.75x (call DB).
override KCHUNK: u32 = BK;

// Register arrays are sized for the largest block (8 x 8) and the most vec4 loads per
// invocation per tile; smaller configurations use a prefix.
const MAX_T4: u32 = 2u;
const MAX_LOADS: u32 = 4u;

// Threads along n and along m.
override TX: u32 = BN / TN;
override TY: u32 = BM / TM;
// Row strides of the tiles in workgroup memory, in vec4s: unpadded. A pad of one vec4 a row
// kept the transposing stores free of bank conflicts, but they are a few a step against the
// step's hundreds of FMAs: without it the 4 x 4 blocks ran 10% faster on an H100, the others
// the same, and 256 x 128 x 16 tiles fit 48 KiB (docs/BENCHMARKS.md, calls DB and DC).
override SA4: u32 = BM / 4u;
override SB4: u32 = BN / 4u;
// Two buffers of BK rows each (double buffering).
override SH_A_LEN: u32 = 2u * BK * SA4;
override SH_B_LEN: u32 = 2u * BK * SB4;
// A tile[k][m] (transposed, so that both operands are read as vec4 along m and n).
var<workgroup> sh_a: array<vec4<f32>, SH_A_LEN>;
// B tile[k][n].
var<workgroup> sh_b: array<vec4<f32>, SH_B_LEN>;

// The vec4s of an A and a B tile, and the most any invocation loads of each per step.
override TILE_A4: u32 = BM * BK / 4u;
override TILE_B4: u32 = BN * BK / 4u;
override LOADS_A: u32 = (TILE_A4 + WG_SIZE - 1u) / WG_SIZE;
override LOADS_B: u32 = (TILE_B4 + WG_SIZE - 1u) / WG_SIZE;

// Loads this invocation's part of the A tile at (m0, k0): zeros outside the matrix, so the
// inner loop needs no bounds checks. In range: l < LOADS_A <= MAX_LOADS (`Tunables::check`),
// and each read is of a row below k (A_T) or m, at a vec4 below lda4.
fn load_a(lid: u32, m0: u32, k0: u32) -> array<vec4<f32>, MAX_LOADS> {
    var r: array<vec4<f32>, MAX_LOADS>;
    for (var l = 0u; l < LOADS_A; l++) {
        let idx = lid + l * WG_SIZE;
        if idx >= TILE_A4 {
            break;
        }
        var v = vec4<f32>(0.0);
        if A_T {
            // Stored k x m: vec4s along m.
            let kk = idx / (BM / 4u);
            let q = idx % (BM / 4u);
            let gk = k0 + kk;
            let gm4 = m0 / 4u + q;
            if gk < params.k && gm4 < params.lda4 {
                v = vec4<f32>(a[gk * params.lda4 + gm4]);
            }
        } else {
            // Stored m x k: vec4s along k.
            let row = idx / (BK / 4u);
            let q = idx % (BK / 4u);
            let gm = m0 + row;
            let gk4 = k0 / 4u + q;
            if gm < params.m && gk4 < params.lda4 {
                v = vec4<f32>(a[gm * params.lda4 + gk4]);
            }
        }
        r[l] = v;
    }
    return r;
}

// Stores them into tile buffer `buf` (0 or 1) of two. In range: kk and 4 q + e are below BK,
// q and row / 4 below BM / 4 = SA4.
fn store_a(lid: u32, buf: u32, r: array<vec4<f32>, MAX_LOADS>) {
    let base = buf * BK * SA4;
    for (var l = 0u; l < LOADS_A; l++) {
        let idx = lid + l * WG_SIZE;
        if idx >= TILE_A4 {
            break;
        }
        if A_T {
            let kk = idx / (BM / 4u);
            let q = idx % (BM / 4u);
            sh_a[base + kk * SA4 + q] = r[l];
        } else {
            // Transpose into tile[k][m]: four scalar stores.
            let row = idx / (BK / 4u);
            let q = idx % (BK / 4u);
            for (var e = 0u; e < 4u; e++) {
                sh_a[base + (4u * q + e) * SA4 + row / 4u][row % 4u] = r[l][e];
            }
        }
    }
}

// As load_a and store_a, for B (rows below n when B_T, else k; vec4s below ldb4).
fn load_b(lid: u32, n0: u32, k0: u32) -> array<vec4<f32>, MAX_LOADS> {
    var r: array<vec4<f32>, MAX_LOADS>;
    for (var l = 0u; l < LOADS_B; l++) {
        let idx = lid + l * WG_SIZE;
        if idx >= TILE_B4 {
            break;
        }
        var v = vec4<f32>(0.0);
        if B_T {
            // Stored n x k: vec4s along k.
            let col = idx / (BK / 4u);
            let q = idx % (BK / 4u);
            let gn = n0 + col;
            let gk4 = k0 / 4u + q;
            if gn < params.n && gk4 < params.ldb4 {
                v = vec4<f32>(b[gn * params.ldb4 + gk4]);
            }
        } else {
            // Stored k x n: vec4s along n.
            let kk = idx / (BN / 4u);
            let q = idx % (BN / 4u);
            let gk = k0 + kk;
            let gn4 = n0 / 4u + q;
            if gk < params.k && gn4 < params.ldb4 {
                v = vec4<f32>(b[gk * params.ldb4 + gn4]);
            }
        }
        r[l] = v;
    }
    return r;
}

fn store_b(lid: u32, buf: u32, r: array<vec4<f32>, MAX_LOADS>) {
    let base = buf * BK * SB4;
    for (var l = 0u; l < LOADS_B; l++) {
        let idx = lid + l * WG_SIZE;
        if idx >= TILE_B4 {
            break;
        }
        if B_T {
            let col = idx / (BK / 4u);
            let q = idx % (BK / 4u);
            for (var e = 0u; e < 4u; e++) {
                sh_b[base + (4u * q + e) * SB4 + col / 4u][col % 4u] = r[l][e];
            }
        } else {
            let kk = idx / (BN / 4u);
            let q = idx % (BN / 4u);
            sh_b[base + kk * SB4 + q] = r[l];
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Linear workgroup index of a 1-D or 2-D grid, then its tile of C.
    let tiles_m = (params.m + BM - 1u) / BM;
    let tiles_n = (params.n + BN - 1u) / BN;
    let pid = workgroup_index(wid, nwg);
    if pid >= tiles_m * tiles_n {
        return;
    }
    // GROUP_M capped at the tile rows first, so that the group's tiles (at most all of them,
    // fewer than 2^32) cannot wrap to a zero divisor whatever GROUP_M a tune cache holds.
    let rows_m = min(GROUP_M, tiles_m);
    let group = rows_m * tiles_n;
    let first_m = (pid / group) * rows_m;
    let group_m = min(tiles_m - first_m, rows_m);
    let m0 = (first_m + (pid % group) % group_m) * BM;
    let n0 = ((pid % group) / group_m) * BN;

    // This invocation's block of C: rows g * 4 TY + 4 ty + e and columns g * 4 TX + 4 tx + e
    // for g < TM / 4 (TN / 4), e < 4, so that neighbouring invocations read neighbouring
    // vec4s of the tiles.
    var tx = lid % TX;
    var ty = lid / TX;
    if WARP_TILE {
        let warp = lid / 32u;
        let lane = lid % 32u;
        let warps_x = TX / 8u;
        // tx < warps_x * 8 = TX; ty < (WG_SIZE / 32 / warps_x) * 4 = TY.
        tx = (warp % warps_x) * 8u + lane % 8u;
        ty = (warp / warps_x) * 4u + lane / 8u;
    }
    var acc: array<vec4<f32>, MAX_T4 * 4u * MAX_T4>;
    for (var i = 0u; i < TM * TN / 4u; i++) {
        acc[i] = vec4<f32>(0.0);
    }

    let steps = (params.k + BK - 1u) / BK;
    store_a(lid, 0u, load_a(lid, m0, 0u));
    store_b(lid, 0u, load_b(lid, n0, 0u));
    workgroupBarrier();
    for (var s = 0u; s < steps; s++) {
        let cur = s % 2u;
        // Start the next tile's global loads; they land in registers during the products.
        let more = s + 1u < steps;
        var next_a: array<vec4<f32>, MAX_LOADS>;
        var next_b: array<vec4<f32>, MAX_LOADS>;
        if more {
            next_a = load_a(lid, m0, (s + 1u) * BK);
            next_b = load_b(lid, n0, (s + 1u) * BK);
        }
        let base_a = cur * BK * SA4;
        let base_b = cur * BK * SB4;
        // In range: kk < BK (KCHUNK divides BK), g * TY + ty < (TM / 4) * TY = BM / 4 = SA4
        // (B likewise), g < TM / 4 <= MAX_T4, and i * (TN / 4) + g < TM * TN / 4, the sums'
        // length.
        for (var kc = 0u; kc < BK; kc += KCHUNK) {
            for (var kk = kc; kk < kc + KCHUNK; kk++) {
                var av: array<vec4<f32>, MAX_T4>;
                var bv: array<vec4<f32>, MAX_T4>;
                for (var g = 0u; g < TM / 4u; g++) {
                    av[g] = sh_a[base_a + kk * SA4 + g * TY + ty];
                }
                for (var g = 0u; g < TN / 4u; g++) {
                    bv[g] = sh_b[base_b + kk * SB4 + g * TX + tx];
                }
                for (var i = 0u; i < TM; i++) {
                    let ai = vec4<f32>(av[i / 4u][i % 4u]);
                    for (var g = 0u; g < TN / 4u; g++) {
                        acc[i * (TN / 4u) + g] = fma(ai, bv[g], acc[i * (TN / 4u) + g]);
                    }
                }
            }
        }
        if more {
            store_a(lid, 1u - cur, next_a);
            store_b(lid, 1u - cur, next_b);
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < TM; i++) {
        let gm = m0 + (i / 4u) * 4u * TY + 4u * ty + i % 4u;
        if gm >= params.m {
            continue;
        }
        for (var g = 0u; g < TN / 4u; g++) {
            let gn4 = n0 / 4u + g * TX + tx;
            if gn4 < params.ldc4 {
                // In range: a row below m, a vec4 below ldc4.
                let at = gm * params.ldc4 + gn4;
                var v = acc[i * (TN / 4u) + g];
                if params.accumulate != 0u {
                    v += c[at];
                }
                c[at] = v;
            }
        }
    }
}

// import: grid
