// blur_box: one pass of a box blur (see shared/blur_pass.wgsl).

// import: blur_pass

// ---- box: a sliding window carried along each line, chunk by chunk -------------------------
// Set per pipeline by `Tunables::box_overrides` in src/ops/blur/tune.rs, which also counts
// the workgroup memory they take. BOX_PPT sizes a function-scope array, so it is a const
// that the host rewrites per variant.
override BOX_ROWS: u32; // lines per workgroup
override BOX_TPL: u32; // threads per line
const BOX_PPT: u32 = 4u; // positions per thread per chunk
override BOX_CH: u32; // positions per chunk: BOX_TPL * BOX_PPT
override BOX_WG: u32; // BOX_ROWS * BOX_TPL
// The transposition tile, one element of padding a line so that reading it across lines is
// free of bank conflicts: BOX_CH + 1 a line, BOX_ROWS lines.
override BOX_TILE_STRIDE: u32;
// The tile: BOX_ROWS * BOX_TILE_STRIDE elements (its TILE_LEN).
// import: blur_tile

// Sums across a line's threads: box_lines_workgroup, or its twin box_lines_subgroup where
// the adapter's subgroups hold whole lines (`box_variant` in src/ops/blur/plan.rs).
struct LineScan {
    before: vec4<u32>,
    total: vec4<u32>,
}
// import: box_lines_workgroup

// A thread's running window sums over its positions of a chunk: box_runs, or its twin
// box_runs_quads where the pass reads four pixels at a time (`io_variant` in
// src/ops/blur/plan.rs), whose loads (`load4`) box_load4_host8 or box_load4_pack16 hold in
// place of box_load4.
// import: box_load4
// import: box_runs

// Window sums S(x) = S(x-1) + e(x+r) - e(x-r-1) over the clamped line e, in wrapping u32
// arithmetic: the true S always fits (the host checks), so the wrapped result is exact. The
// cost per output is two loads whatever the radius.
@compute @workgroup_size(BOX_WG)
fn box_pass(lane: Lane) {
    let wk = work(lane.wid, lane.nwg, BOX_ROWS);
    let line0 = wk.line0;
    if wk.start >= wk.end {
        return;
    }
    let lid = lane.lid;
    let at = line_lane(lane);
    let row = at.x;
    let t = at.y;
    let line = line0 + row;
    let in_range = line < params.lines;
    let r = i32(params.radius);
    let len = i32(params.len);

    // S at the segment's start - 1: the in-line part summed by the line's threads, the clamped
    // parts as counts times the edge samples.
    let c = i32(wk.start) - 1;
    let lo = c - r;
    let hi = c + r;
    var part = vec4<u32>(0u);
    if in_range {
        for (var j = max(lo, 0) + i32(t); j <= min(hi, len - 1); j += i32(BOX_TPL)) {
            part += load(line, j);
        }
        if t == 0u {
            let left = max(0, min(hi, -1) - lo + 1);
            let right = max(0, hi - max(lo, len) + 1);
            part += u32(left) * load(line, 0) + u32(right) * load(line, len - 1);
        }
    }
    // The window sum before the chunk's first position, the same in each of a line's threads.
    var carry = line_sum(part, lane);

    for (var c0 = wk.start; c0 < wk.end; c0 += BOX_CH) {
        let local = box_runs(line, i32(c0 + t * BOX_PPT), i32(wk.end), in_range);
        let run = local[BOX_PPT - 1u];
        let sums = line_scan(run, lane);
        let excl = carry + sums.before;
        for (var i = 0u; i < BOX_PPT; i++) {
            tile_set(row * BOX_TILE_STRIDE + t * BOX_PPT + i, finish(excl + local[i]));
        }
        carry += sums.total;
        workgroupBarrier();
        // Transposed store: consecutive threads take consecutive lines of one position (or,
        // in the host's layout, consecutive words of them).
        if OUT_FMT == FMT_HOST && HOST_BYTES == 1u {
            // (At least 1: where the plan never writes this format, the divisions below
            // must still not be by a constant 0.)
            let words = max(BOX_ROWS * HOST_CHANNELS / 4u, 1u);
            for (var k = 0u; k < BOX_PPT; k++) {
                let flat = k * BOX_WG + lid;
                let p = flat / words;
                let wi = flat % words;
                // A word's lines are all in the image or all past it.
                if p < BOX_CH && c0 + p < wk.end && line0 + 4u * wi / HOST_CHANNELS < params.lines {
                    store_host(c0 + p, line0, wi, tile_host_word(wi, p, BOX_TILE_STRIDE));
                }
            }
        } else if OUT_FMT == FMT_HOST {
            // 16-bit samples: the chunk's words BOX_WG at a time, as the gaussian's
            // `store_chunk` (16-bit RGB takes more turns than BOX_PPT). The 8-bit loop above
            // stays as it was: NVIDIA's compiler made the RGB8 column pass 2% slower with
            // this one's bound in its place (call GV).
            let words = host_words(BOX_ROWS);
            for (var k = lid; k < BOX_CH * words; k += BOX_WG) {
                let p = k / words;
                let wi = k % words;
                if c0 + p < wk.end && host_word_line(line0, wi) < params.lines {
                    store_host(c0 + p, line0, wi, tile_host16_word(wi, p, BOX_TILE_STRIDE));
                }
            }
        } else {
            for (var k = 0u; k < BOX_PPT; k++) {
                let flat = k * BOX_WG + lid;
                let p = flat / BOX_ROWS;
                let rr = flat % BOX_ROWS;
                if c0 + p < wk.end && line0 + rr < params.lines {
                    store_from_tile((c0 + p - params.out_start) * params.out_pos_stride + line0 + rr, rr * BOX_TILE_STRIDE + p);
                }
            }
        }
    }
}
