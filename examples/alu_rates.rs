//! The adapter's rates of the arithmetic the blur kernels' sums could take: 32-bit integer
//! multiply-adds, 4 x 8-bit dot products (`dot4U8Packed` with an accumulate, one instruction
//! where the adapter has Vulkan's integer dot products), f32 fused multiply-adds, integer
//! adds and xors (the rest of the kernels' integer work), f32 adds, and integer
//! multiply-adds or adds issued beside f32 ones. Each invocation runs eight independent chains of
//! ITERS operations; the GPU time of the dispatch (timestamp queries) gives operations a
//! second. The figures bound what an exact sum can cost (docs/BENCHMARKS.md).
//!
//!     cargo run --release --example alu_rates

use anyhow::Result;
use gpukit::gpu::{open_gpu, span_ns, DeviceRequest, PassTimer, Shader, Usage};

const SOURCE: &str = r#"
override MODE: u32 = 0u;
override ITERS: u32 = 1024u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn alu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = gid.x + gid.y * nwg.x * 256u;
    var a: array<u32, 8>;
    var f: array<f32, 8>;
    for (var k = 0u; k < 8u; k++) {
        a[k] = id * (k + 3u);
        f[k] = f32(id + k);
    }
    let b = id | 0x01030507u;
    let c = id ^ 0x5a5a5a5au;
    let fb = f32(id & 7u) * 0.125 + 0.5;
    let fc = f32(id & 3u) + 0.25;
    for (var i = 0u; i < ITERS; i++) {
        for (var k = 0u; k < 8u; k++) {
            if MODE == 0u {
                a[k] = a[k] * b + c;
            } else if MODE == 1u {
                a[k] = dot4U8Packed(a[k], b) + a[k];
            } else if MODE == 2u {
                f[k] = fma(f[k], fb, fc);
            } else if MODE == 4u {
                a[k] = a[k] + a[(k + 1u) % 8u];
            } else if MODE == 5u {
                a[k] = a[k] ^ a[(k + 1u) % 8u];
            } else if MODE == 6u {
                f[k] = f[k] + f[(k + 1u) % 8u];
            } else if MODE == 7u {
                a[k] = a[k] + a[(k + 1u) % 8u];
                f[k] = fma(f[k], fb, fc);
            } else {
                a[k] = a[k] * b + c;
                f[k] = fma(f[k], fb, fc);
            }
        }
    }
    var s = 0u;
    for (var k = 0u; k < 8u; k++) {
        s += a[k] + bitcast<u32>(f[k]);
    }
    out[id] = s;
}
"#;

fn main() -> Result<()> {
    let gpu = open_gpu(&DeviceRequest::default())?;
    println!("{}", gpu.info.name);
    let shader = Shader {
        name: "alu_rates.wgsl",
        source: SOURCE,
    };
    let (groups, iters) = (8192u32, 2048u32);
    let invocations = groups as u64 * 256;
    let out = gpu.buffer("alu out", Usage::Storage, invocations * 4);
    for (mode, name, ops) in [
        (0, "u32 multiply-add", 8),
        (1, "dot4U8Packed + add", 8),
        (2, "f32 fma", 8),
        (3, "u32 multiply-add beside f32 fma", 16),
        (4, "u32 add", 8),
        (5, "u32 xor", 8),
        (6, "f32 add", 8),
        (7, "u32 add beside f32 fma", 16),
    ] {
        let kernel = gpu.kernel_unrolled(
            &shader,
            "alu",
            &[("MODE", mode as f64), ("ITERS", iters as f64)],
        )?;
        let bind = gpu.bind(&kernel, &[&out]);
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut timer = PassTimer::new(&gpu, 1);
            let mut batch = gpu.batch(Some(&mut timer));
            batch.dispatch("alu", &kernel, &bind, groups);
            batch.submit()?;
            let passes = timer.take(&gpu)?;
            best = best.min(span_ns(&passes).unwrap_or(f64::NAN));
        }
        let total = invocations as f64 * iters as f64 * ops as f64;
        println!(
            "{name:34} {:8.3} ms  {:8.2} Gop/s",
            best / 1e6,
            total / best
        );
    }
    Ok(())
}
