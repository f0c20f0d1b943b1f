//! The device's optimal Huffman tables (wgsl/encode_tables.wgsl) against the CPU encoder's
//! `Table::optimal` (jchuff.c's `jpeg_gen_optimal_table`) on adversarial counts: ties, zeros,
//! a single symbol, all 256 symbols, and counts whose codes need the 16-bit length limit.

use super::plan::device_tables;
use crate::gpu::{open_gpu, DeviceRequest};
use crate::io::jpeg::Table;

/// Four histograms at a time (the kernel's four tables), each against the CPU's table and its
/// codes.
fn check(cases: &[(&str, [u32; 256])]) {
    let gpu = open_gpu(&DeviceRequest {
        tune: crate::tune::Settings::off(),
        ..DeviceRequest::default()
    })
    .expect("GPU tests need a wgpu adapter: install mesa-vulkan-drivers for lavapipe");
    for group in cases.chunks(4) {
        let mut counts = [[0u32; 256]; 4];
        for (k, (_, c)) in group.iter().enumerate() {
            counts[k] = *c;
        }
        let (tables, codes) = device_tables(&gpu, &counts).unwrap();
        for (k, (name, c)) in group.iter().enumerate() {
            let want = Table::optimal(&c.map(u64::from));
            assert_eq!(tables[k], want, "{name}: the table");
            let want_codes = want.codes();
            for s in 0..256 {
                let w = want_codes.code[s] | u32::from(want_codes.size[s]) << 16;
                assert_eq!(codes[k * 256 + s], w, "{name}: the code of symbol {s}");
            }
        }
    }
}

fn xorshift(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed.wrapping_mul(2654435761) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    }
}

#[test]
fn device_tables_equal_the_cpu_tables_on_adversarial_counts() {
    let mut cases: Vec<(&str, [u32; 256])> = Vec::new();
    cases.push(("all zero", [0; 256]));
    let mut one = [0; 256];
    one[77] = 5;
    cases.push(("a single symbol", one));
    let mut two = [0; 256];
    two[0] = 1;
    two[255] = 1;
    cases.push(("two symbols at the ends, tied with the pseudo-symbol", two));
    cases.push(("256 equal counts", [3; 256]));
    cases.push(("256 counts of 1 (ties with the pseudo-symbol)", [1; 256]));
    // Fibonacci counts: the deepest tree, codes past 16 bits to fold.
    let mut fib = [0u32; 256];
    let (mut a, mut b) = (1u32, 1u32);
    for f in fib.iter_mut().take(28) {
        *f = a;
        (a, b) = (b, a + b);
    }
    cases.push(("Fibonacci counts (lengths to fold)", fib));
    let mut fib_spread = [0u32; 256];
    for (i, f) in fib.iter().take(28).enumerate() {
        fib_spread[255 - 8 * i] = *f;
    }
    cases.push(("Fibonacci counts spread, reversed", fib_spread));
    // Powers of two with many ties, and zeros between.
    let mut pow = [0u32; 256];
    for (i, p) in pow.iter_mut().enumerate().step_by(3) {
        *p = 1 << (i % 24);
    }
    cases.push(("powers of two, zeros between", pow));
    // A DC-like histogram and an AC-like one.
    let mut dc = [0u32; 256];
    for (i, d) in dc.iter_mut().enumerate().take(12) {
        *d = 4000 >> i.min(11);
    }
    cases.push(("DC-like", dc));
    let mut rng = xorshift(7);
    let mut ac = [0u32; 256];
    for (s, v) in ac.iter_mut().enumerate() {
        let size = s & 15;
        if size <= 10 && (s >> 4 == 15 || size > 0 || s == 0) {
            *v = (rng() % 5000) >> (size + (s >> 4)).min(12);
        }
    }
    cases.push(("AC-like with zeros", ac));
    for seed in 1..=6 {
        let mut r = xorshift(seed);
        let mut c = [0u32; 256];
        for v in c.iter_mut() {
            // Small values: many ties; one in four zero.
            let x = r();
            *v = if x.is_multiple_of(4) { 0 } else { x % 7 };
        }
        cases.push(("random small counts with ties", c));
    }
    let mut big = [0u32; 256];
    let mut r = xorshift(99);
    for v in big.iter_mut() {
        *v = r() % 600_000;
    }
    cases.push(("large counts", big));
    check(&cases);
}
