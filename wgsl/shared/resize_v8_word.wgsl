// resize_v8_word: wgsl/resize_v8.wgsl's input and output a word (the default) a unit. The plan
// takes it where a row's words are a multiple of VW, so that every unit starts on one (the
// buffers are bound whole); its twins are resize_v8_word, resize_v8_vec2 and resize_v8_vec4.

const VW: u32 = 1u;

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(4) var<storage, read_write> dst: array<u32>;

// Unit i of the input, its words in the low lanes.
fn load_vec(i: u32) -> vec4<u32> {
    let s = src[i];
    return vec4<u32>(s, 0u, 0u, 0u);
}

// Unit i of the output from the low lanes of v.
fn store_vec(i: u32, v: vec4<u32>) {
    dst[i] = v.x;
}
