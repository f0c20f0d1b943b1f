// encode_png: the PNG encoder's image (its params) and the pieces its deflate stream is cut
// into: each row's filtered bytes (its filter byte first) in 8-byte chunks, then the row's
// tail (the bytes past its last whole chunk), one piece each, piece p of row p / pieces_per_row.
// The CPU twin is src/ops/encode/png/deflate.rs.

// Its Rust twin is `PngParams` in src/ops/encode/png/plan.rs (the shader test checks their
// fields).
struct Params {
    // Bytes a row of samples (the filter byte not counted).
    row_len: u32,
    height: u32,
    // Bytes a pixel: Paeth's left neighbour is this far back.
    bpp: u32,
    // 1 where the samples are 16-bit (stored little-endian, written big-endian), else 0.
    swap: u32,
    // Whole 8-byte chunks a filtered row (row_len + 1 bytes) holds.
    chunks_per_row: u32,
    // chunks_per_row + 1: the chunks and the tail.
    pieces_per_row: u32,
    // pieces_per_row * height.
    npieces: u32,
    _pad: u32,
}

// Bytes of piece c of a row: 8 for a chunk, the rest of the row for its tail.
fn piece_len(c: u32) -> u32 {
    if c < params.chunks_per_row {
        return 8u;
    }
    return params.row_len + 1u - 8u * params.chunks_per_row;
}
