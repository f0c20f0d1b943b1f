// scan_op: the element type and operator of a scan, on u32 bit patterns (included by the scan kernels).

// Keep in sync with `Op::code` and `Elem::code` in src/ops/scan/mod.rs.
// 0 sum, 1 min, 2 max.
override OP: u32 = 0u;
// 0 u32, 1 i32, 2 f32. Values travel as u32 bits; `combine` reinterprets them.
override DTYPE: u32 = 0u;

// vec4s each invocation owns in a tile, WG_SIZE apart so that every load is coalesced.
// A const (it sizes function-scope arrays): src/ops/scan/plan.rs sets it per pipeline
// (`Tunables::vec_per_thread`); this is the default, `VEC_PER_THREAD` there.
const VEC_PER_THREAD: u32 = 4u;

// The value a scan starts from: 0 for sums, the largest value for min, the smallest for max.
// Keep in sync with `Element::identity` in src/ops/scan/element.rs.
fn identity() -> u32 {
    switch OP {
        case 1u: {
            switch DTYPE {
                case 1u: { return 0x7fffffffu; }   // i32::MAX
                case 2u: { return 0x7f800000u; }   // +inf
                default: { return 0xffffffffu; }   // u32::MAX
            }
        }
        case 2u: {
            switch DTYPE {
                case 1u: { return 0x80000000u; }   // i32::MIN
                case 2u: { return 0xff800000u; }   // -inf
                default: { return 0u; }
            }
        }
        default: { return 0u; }                    // 0 and +0.0 share their bits
    }
}

// a op b. Integer sums wrap (two's complement: u32 and i32 sums have the same bits).
fn combine(a: u32, b: u32) -> u32 {
    switch DTYPE {
        case 2u: {
            let x = bitcast<f32>(a);
            let y = bitcast<f32>(b);
            switch OP {
                case 1u: { return bitcast<u32>(min(x, y)); }
                case 2u: { return bitcast<u32>(max(x, y)); }
                default: { return bitcast<u32>(x + y); }
            }
        }
        case 1u: {
            let x = bitcast<i32>(a);
            let y = bitcast<i32>(b);
            switch OP {
                case 1u: { return bitcast<u32>(min(x, y)); }
                case 2u: { return bitcast<u32>(max(x, y)); }
                default: { return a + b; }
            }
        }
        default: {
            switch OP {
                case 1u: { return min(a, b); }
                case 2u: { return max(a, b); }
                default: { return a + b; }
            }
        }
    }
}

// The total of one vec4, left to right.
fn combine4(v: vec4<u32>) -> u32 {
    return combine(combine(combine(v.x, v.y), v.z), v.w);
}

// Elements at or past `n` (the level's length) become the identity. `first` is v.x's index.
fn masked(v: vec4<u32>, first: u32, n: u32) -> vec4<u32> {
    let index = vec4<u32>(first) + vec4<u32>(0u, 1u, 2u, 3u);
    return select(vec4<u32>(identity()), v, index < vec4<u32>(n));
}
