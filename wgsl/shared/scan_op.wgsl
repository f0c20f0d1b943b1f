// scan_op: the element type and operator of a scan, on u32 bit patterns (included by the scan kernels).

// The codes of `OP` and `DTYPE`: the shader test checks each against `Op::code` and
// `Elem::code` in src/ops/scan/mod.rs.
const OP_SUM: u32 = 0u;
const OP_MIN: u32 = 1u;
const OP_MAX: u32 = 2u;
const DTYPE_U32: u32 = 0u;
const DTYPE_I32: u32 = 1u;
const DTYPE_F32: u32 = 2u;
// The operator: OP_SUM, OP_MIN or OP_MAX.
override OP: u32 = OP_SUM;
// The element type: DTYPE_U32, DTYPE_I32 or DTYPE_F32. Values travel as u32 bits;
// `combine` reinterprets them.
override DTYPE: u32 = DTYPE_U32;

// vec4s each invocation owns in a tile, WG_SIZE apart so that every load is coalesced.
// A const (it sizes function-scope arrays): src/ops/scan/plan.rs sets it per pipeline
// (`Tunables::vec_per_thread`); this is the default, `VEC_PER_THREAD` there.
const VEC_PER_THREAD: u32 = 4u;

// The value a scan starts from: 0 for sums, the largest value for min, the smallest for max.
// The twin of `Element::identity` in src/ops/scan/element.rs: tests/scan.rs
// (`identities_start_exclusive_scans`, every op and type) checks they agree.
fn identity() -> u32 {
    switch OP {
        case OP_MIN: {
            switch DTYPE {
                case DTYPE_I32: { return 0x7fffffffu; }   // i32::MAX
                case DTYPE_F32: { return 0x7f800000u; }   // +inf
                default: { return 0xffffffffu; }   // u32::MAX
            }
        }
        case OP_MAX: {
            switch DTYPE {
                case DTYPE_I32: { return 0x80000000u; }   // i32::MIN
                case DTYPE_F32: { return 0xff800000u; }   // -inf
                default: { return 0u; }
            }
        }
        default: { return 0u; }                    // 0 and +0.0 share their bits
    }
}

// a op b. Integer sums wrap (two's complement: u32 and i32 sums have the same bits).
fn combine(a: u32, b: u32) -> u32 {
    switch DTYPE {
        case DTYPE_F32: {
            let x = bitcast<f32>(a);
            let y = bitcast<f32>(b);
            switch OP {
                case OP_MIN: { return bitcast<u32>(min(x, y)); }
                case OP_MAX: { return bitcast<u32>(max(x, y)); }
                default: { return bitcast<u32>(x + y); }
            }
        }
        case DTYPE_I32: {
            let x = bitcast<i32>(a);
            let y = bitcast<i32>(b);
            switch OP {
                case OP_MIN: { return bitcast<u32>(min(x, y)); }
                case OP_MAX: { return bitcast<u32>(max(x, y)); }
                default: { return a + b; }
            }
        }
        default: {
            switch OP {
                case OP_MIN: { return min(a, b); }
                case OP_MAX: { return max(a, b); }
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
