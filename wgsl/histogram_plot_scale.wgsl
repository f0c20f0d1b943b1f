// histogram_plot_scale: the plot's columns (each channel's largest count over the bins under each pixel column) and each panel's scale (its largest column).

// Its Rust twin is `ScaleParams` in src/ops/histogram/plot.rs (the shader test checks their fields).
struct Params {
    // Plot width in pixels: one column each.
    width: u32,
    // Bins per channel, and channels per bin in `total`.
    bins: u32,
    channels: u32,
    // Channels plotted (the first `plotted`, at most 4).
    plotted: u32,
    // Channel bit masks of the top and bottom panels.
    top_mask: u32,
    bottom_mask: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// (low word, high word) of each 64-bit count, bin-major: total[bin * channels + channel].
@group(0) @binding(1) var<storage, read> total: array<vec2<u32>>;
// Column x's value of plotted channel c in component c.
@group(0) @binding(2) var<storage, read_write> columns: array<vec4<f32>>;
// The largest column value of the top panel's channels, then of the bottom panel's.
@group(0) @binding(3) var<storage, read_write> scale: array<f32, 2>;

// One workgroup does it all: a plot has at most a few thousand columns.
override WG_SIZE: u32 = 256u;

var<workgroup> sh_top: array<f32, WG_SIZE>;
var<workgroup> sh_bottom: array<f32, WG_SIZE>;

// A 64-bit count as f32: the twin of `count_f32` in src/ops/histogram/plot.rs
// (tests/histogram.rs, `plot_matches_its_cpu_mirror`, holds the plots against each other).
fn count_f32(c: vec2<u32>) -> f32 {
    return f32(c.y) * 4294967296.0 + f32(c.x);
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32) {
    var top = 0.0;
    var bottom = 0.0;
    for (var x = lid; x < params.width; x += WG_SIZE) {
        // The bins under column x: at least one, several when bins > width.
        let b0 = x * params.bins / params.width;
        let b1 = max((x + 1u) * params.bins / params.width, b0 + 1u);
        var m = vec4<f32>(0.0);
        for (var b = b0; b < b1; b++) {
            for (var c = 0u; c < params.plotted; c++) {
                m[c] = max(m[c], count_f32(total[b * params.channels + c]));
            }
        }
        columns[x] = m;
        for (var c = 0u; c < params.plotted; c++) {
            if ((params.top_mask >> c) & 1u) != 0u {
                top = max(top, m[c]);
            }
            if ((params.bottom_mask >> c) & 1u) != 0u {
                bottom = max(bottom, m[c]);
            }
        }
    }
    sh_top[lid] = top;
    sh_bottom[lid] = bottom;
    workgroupBarrier();
    for (var step = WG_SIZE / 2u; step > 0u; step /= 2u) {
        if lid < step {
            sh_top[lid] = max(sh_top[lid], sh_top[lid + step]);
            sh_bottom[lid] = max(sh_bottom[lid], sh_bottom[lid + step]);
        }
        workgroupBarrier();
    }
    if lid == 0u {
        scale[0] = sh_top[0];
        scale[1] = sh_bottom[0];
    }
}
