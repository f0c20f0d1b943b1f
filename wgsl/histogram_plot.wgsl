// histogram_plot: a full-screen quad whose fragments light the channels whose bar reaches them and pick one of 16 colours from those bits.

// Its Rust twin is `PlotParams` in src/ops/histogram/plot.rs (the shader test checks their fields).
struct Params {
    width: u32,
    height: u32,
    // Rows of the top panel; with two panels, `gap` separator rows follow, then the bottom
    // panel down to the last row.
    top_height: u32,
    gap: u32,
    // Channel bit masks of the top and bottom panels.
    top_mask: u32,
    bottom_mask: u32,
    _pad0: u32,
    _pad1: u32,
    separator: vec4<f32>,
    // Colour of each set of lit channels: palette[bits], bit c for channel c.
    palette: array<vec4<f32>, 16>,
}

@group(0) @binding(0) var<uniform> params: Params;
// From histogram_plot_scale.wgsl.
@group(0) @binding(1) var<storage, read> columns: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> scale: array<f32, 2>;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    // A triangle strip: (-1, -1), (1, -1), (-1, 1), (1, 1).
    let x = f32(i & 1u) * 2.0 - 1.0;
    let y = f32(i >> 1u) * 2.0 - 1.0;
    return vec4<f32>(x, y, 0.0, 1.0);
}

// Whether a bar of value v on scale s in a panel of h rows reaches row r (0 = the panel's
// bottom row). Bars are drawn on a square-root scale, height h * sqrt(v / s), so that small
// counts stay visible beside a spike: the row's centre y lies below the top when
// y^2 * s < v * h^2. Any non-zero bar shows its bottom row. Products only (correctly
// rounded), no division or square root, so every adapter and the CPU agree.
// The twin of `lit` in src/ops/histogram/plot.rs (tests/histogram.rs,
// `plot_matches_its_cpu_mirror`, holds the plots against each other).
fn lit(v: f32, s: f32, h: u32, r: u32) -> bool {
    let y = f32(r) + 0.5;
    let hf = f32(h);
    return v > 0.0 && (r == 0u || y * y * s < v * hf * hf);
}

@fragment
fn fs_main(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let x = u32(pos.x);
    let y = u32(pos.y);
    var mask = params.top_mask;
    var h = params.top_height;
    var r = params.top_height - 1u - y;
    var s = scale[0];
    if y >= params.top_height {
        if y < params.top_height + params.gap {
            return params.separator;
        }
        mask = params.bottom_mask;
        h = params.height - params.top_height - params.gap;
        r = params.height - 1u - y;
        s = scale[1];
    }
    let col = columns[x];
    var bits = 0u;
    for (var c = 0u; c < 4u; c++) {
        if ((mask >> c) & 1u) != 0u && lit(col[c], s, h, r) {
            bits |= 1u << c;
        }
    }
    return params.palette[bits];
}
