//! Unit tests of the scan's layout, depth bound and CPU mirrors.

use super::*;

#[test]
fn layout_levels_shrink_by_tiles_until_one_tile() {
    let l = Layout::new(10, 4, 8);
    assert_eq!(
        l.segments,
        vec![
            Segment {
                start: 0,
                levels: vec![8, 2]
            },
            Segment {
                start: 8,
                levels: vec![2]
            },
        ]
    );
    assert_eq!(l.passes(), 3 + 1);
    let l = Layout::new(65, 4, 1 << 20);
    assert_eq!(l.segments[0].levels, vec![65, 17, 5, 2]);
    assert!(Layout::new(0, 4, 4).segments.is_empty());
}

#[test]
fn f32_depths_quoted_in_docs() {
    // docs/scan.md, "f32 sums": 2^28 elements in one segment of 4096-element tiles.
    let layout = Layout::new(1 << 28, 4096, 1 << 30);
    assert_eq!(layout.segments[0].levels, vec![1 << 28, 65536, 16]);
    assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, None), 69);
    assert_eq!(
        f32_sum_depth(&layout, Tunables::DEFAULT, Some([32, 32])),
        178
    );
    let layout = Layout::new((1 << 20) + 3, 4096, 1 << 30);
    assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, None), 49);
    assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, Some([8, 8])), 94);
    assert_eq!(
        f32_sum_depth(&layout, Tunables::DEFAULT, Some([32, 32])),
        127
    );
}

#[test]
fn cpu_reference_by_hand() {
    let x = [3u32, 1, 4, 1, 5];
    assert_eq!(reference(&x, Op::Sum, Mode::Exclusive), [0, 3, 4, 8, 9]);
    assert_eq!(reference(&x, Op::Sum, Mode::Inclusive), [3, 4, 8, 9, 14]);
    assert_eq!(
        reference(&x, Op::Min, Mode::Exclusive),
        [u32::MAX, 3, 1, 1, 1]
    );
    assert_eq!(reference(&x, Op::Max, Mode::Inclusive), [3, 3, 4, 4, 5]);
    assert_eq!(
        reference(&[u32::MAX, 2], Op::Sum, Mode::Inclusive),
        [u32::MAX, 1]
    );
    assert_eq!(
        reference(&[i32::MAX, 1, -5], Op::Sum, Mode::Inclusive),
        [i32::MAX, i32::MIN, i32::MIN.wrapping_sub(5)]
    );
    assert_eq!(
        reference(&[-1i32, 7], Op::Max, Mode::Exclusive),
        [i32::MIN, -1]
    );
    // f32 accumulates in f64: 1e8 + 1 + ... keeps the ones that f32 sums would drop.
    let f = reference(&[1e8f32, 1.0, 1.0, 1.0, 1.0], Op::Sum, Mode::Inclusive);
    assert_eq!(f[4], 100_000_004.0);
    assert_eq!(
        reference(&[2.0f32], Op::Min, Mode::Exclusive),
        [f32::INFINITY]
    );
}

#[test]
fn staged_mirror_matches_reference_on_many_layouts() {
    let data: Vec<u32> = (0..200u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let signed: Vec<i32> = (0..200i32).map(|i| (i * 7919) % 211 - 105).collect();
    for n in [0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 200] {
        for (tile, seg) in [(4, 4), (4, 8), (4, 64), (2, 6), (8, 1 << 20)] {
            let layout = Layout::new(n, tile, seg);
            for op in [Op::Sum, Op::Min, Op::Max] {
                for mode in [Mode::Exclusive, Mode::Inclusive] {
                    assert_eq!(
                        scan_staged_cpu(&data[..n], op, mode, &layout),
                        reference(&data[..n], op, mode),
                        "u32 n={n} tile={tile} seg={seg} {op:?} {mode:?}"
                    );
                    assert_eq!(
                        scan_staged_cpu(&signed[..n], op, mode, &layout),
                        reference(&signed[..n], op, mode),
                        "i32 n={n} tile={tile} seg={seg} {op:?} {mode:?}"
                    );
                }
            }
        }
    }
}
