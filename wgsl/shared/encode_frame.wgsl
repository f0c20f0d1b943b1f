// encode_frame: the JPEG encoder's frame (its params) and where block i of the scan's coding
// order lies: its component, its place in that component's padded block grid, and the block
// of the same component coded just before it (whose DC its DC difference is taken from).
// The CPU twin is `scan_order` in src/io/jpeg/mod.rs; `Layout` in src/ops/encode/plan.rs
// mirrors it on the host.

// Its Rust twin is `EncodeParams` in src/ops/encode/plan.rs (the shader test checks their
// fields).
struct Params {
    width: u32,
    height: u32,
    // 1 (gray, one component) or 3 (RGB in, Y Cb Cr coded).
    channels: u32,
    // MCUs across (interleaved scans).
    mcus_x: u32,
    // Blocks in one MCU (1 for gray).
    blocks_per_mcu: u32,
    // Blocks in the scan, dummy blocks included.
    nblocks: u32,
    // 32-bit words the entropy-coded bits may take at most (the stuffing passes run over them).
    nwords: u32,
    _pad: u32,
    // Per component: h, v (sampling factors), blocks with samples across, down.
    comp: array<vec4<u32>, 3>,
    // Per component: blocks across padded to whole MCUs, table (0 luma, 1 chroma), its
    // first block in an MCU, unused.
    place: array<vec4<u32>, 3>,
}

const NO_BLOCK: u32 = 0xFFFFFFFFu;

struct Loc {
    c: u32,
    bx: u32,
    by: u32,
    // Coding index of the previous block of component c, or NO_BLOCK.
    prev: u32,
}

fn locate(i: u32) -> Loc {
    if params.channels == 1u {
        // One component, not interleaved: its blocks row by row.
        let wb = params.comp[0].z;
        return Loc(0u, i % wb, i / wb, select(NO_BLOCK, i - 1u, i > 0u));
    }
    // Interleaved: MCU by MCU, each MCU Y's h x v blocks row by row, then Cb, then Cr.
    let per_mcu = params.blocks_per_mcu;
    let mcu = i / per_mcu;
    let r = i % per_mcu;
    var c = 0u;
    if r >= params.place[2].z {
        c = 2u;
    } else if r >= params.place[1].z {
        c = 1u;
    }
    let h = params.comp[c].x;
    let n = h * params.comp[c].y;
    let bi = r - params.place[c].z;
    var prev = NO_BLOCK;
    if bi > 0u {
        prev = i - 1u;
    } else if mcu > 0u {
        prev = i - per_mcu + n - 1u;
    }
    let mx = mcu % params.mcus_x;
    let my = mcu / params.mcus_x;
    return Loc(c, mx * h + bi % h, my * params.comp[c].y + bi / h, prev);
}
