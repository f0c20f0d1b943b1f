// blur_tile: the output tile of the workgroup kernels (box_pass, gauss_pass): a chunk's
// finished outputs of the workgroup's lines, from which consecutive threads store consecutive
// lines. It keeps the pass's output packing (a word a pixel where the pass writes 8-bit
// pixels, a pair where it writes 16-bit or 18-bit ones, a vec4 only for the wide formats,
// FMT_PACK24 packed as it is stored): a quarter of
// the workgroup memory of a vec4 tile for 8-bit output. Less workgroup memory a workgroup
// leaves more of each SM's on-chip memory to the L1 cache: on an H100 the 4K RGBA8 box
// column pass went from 0.152 to 0.121 ms, the RGB8 row pass from 0.087 to 0.071
// (docs/BENCHMARKS.md, call CI). Imported after the kernel's own overrides (naga 30 panicked
// on overrides declared below workgroup arrays).

// The tile's elements: the kernel's lines times its chunk plus one of padding a line.
override TILE_LEN: u32 = 1u;

// The host's layout of 8-bit samples takes a word a pixel, of 16-bit ones a pair.
override TILE_HOST8: bool = OUT_FMT == FMT_HOST && HOST_BYTES == 1u;
override TILE_HOST16: bool = OUT_FMT == FMT_HOST && HOST_BYTES == 2u;

var<workgroup> sh_tile8: array<u32, select(1u, TILE_LEN, OUT_FMT == FMT_PACK8 || TILE_HOST8)>;
var<workgroup> sh_tile16: array<vec2<u32>, select(1u, TILE_LEN, OUT_FMT == FMT_PACK16 || OUT_FMT == FMT_PACK18 || TILE_HOST16)>;
var<workgroup> sh_tile32: array<vec4<u32>, select(1u, TILE_LEN, OUT_FMT == FMT_WIDE || OUT_FMT == FMT_PACK24)>;

// Sets element i to a finished output.
fn tile_set(i: u32, v: vec4<u32>) {
    if OUT_FMT == FMT_PACK8 || TILE_HOST8 {
        sh_tile8[i] = pack8(v);
    } else if TILE_HOST16 {
        sh_tile16[i] = pack16(v);
    } else if OUT_FMT == FMT_PACK16 {
        sh_tile16[i] = pack16(v);
    } else if OUT_FMT == FMT_PACK18 {
        sh_tile16[i] = pack18(v);
    } else {
        sh_tile32[i] = v;
    }
}

// Stores element i at output pixel `index` (as `store` of blur_pass.wgsl would its lanes),
// copied as packed: the tile holds the output's format (not FMT_HOST: `tile_host_word`).
fn store_from_tile(index: u32, i: u32) {
    let word = params.out_base + index * words_per_px(OUT_FMT);
    if OUT_FMT == FMT_PACK8 {
        dst_word(word, sh_tile8[i]);
    } else if OUT_FMT == FMT_PACK16 || OUT_FMT == FMT_PACK18 {
        dst_pair(word, sh_tile16[i]);
    } else if OUT_FMT == FMT_PACK24 {
        store(index, sh_tile32[i]);
    } else {
        dst_wide(word, sh_tile32[i]);
    }
}

// Word `wi` of one position's words in the host's layout of 16-bit samples (the tile a pair
// a pixel), from the tile's pixels of that position, line q's at `at + q * stride`: two
// samples, of one pixel or two.
fn tile_host16_word(wi: u32, at: u32, stride: u32) -> u32 {
    var word = 0u;
    for (var j = 0u; j < 2u; j++) {
        let s = 2u * wi + j;
        let q = s / HOST_CHANNELS;
        let l = s - q * HOST_CHANNELS;
        let pair = sh_tile16[at + q * stride];
        let lanes = select(pair.y, pair.x, l < 2u);
        word |= ((lanes >> (16u * (l & 1u))) & 0xffffu) << (16u * j);
    }
    return word;
}

// Word `wi` of one position's words in the host's layout of 8-bit samples (the tile a word a
// pixel), from the tile's pixels of that position, line q's at `at + q * stride`: a word
// holds bytes of at most two pixels of three or two channels (of four pixels of one), read
// once each, their lanes past HOST_CHANNELS masked off (they hold the pass's sums of zeros).
fn tile_host_word(wi: u32, at: u32, stride: u32) -> u32 {
    let b = 4u * wi;
    let q = b / HOST_CHANNELS;
    let px = at + q * stride;
    if HOST_CHANNELS == 1u {
        var word = 0u;
        for (var j = 0u; j < 4u; j++) {
            word |= (sh_tile8[px + j * stride] & 255u) << (8u * j);
        }
        return word;
    }
    if HOST_CHANNELS == 2u {
        return (sh_tile8[px] & 0xffffu) | (sh_tile8[px + stride] << 16u);
    }
    // Three channels: pixel q from its lane b % 3, then pixel q + 1's first lanes (inside the
    // position's lines: byte b + 3 is, and it lies in pixel q + 1 or q).
    let l = b - q * 3u;
    return ((sh_tile8[px] & 0xffffffu) >> (8u * l)) | (sh_tile8[px + stride] << (8u * (3u - l)));
}
