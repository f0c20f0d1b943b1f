//! Unit tests of the tilings and the split.

use super::plan::round4;
use super::*;

#[test]
fn configs_fit_the_limits_they_are_chosen_for() {
    let webgpu = wgpu::Limits::default();
    assert_eq!(webgpu.max_compute_workgroup_storage_size, 16384);
    Tunables::SAFE.check(&webgpu).unwrap();
    assert_eq!(Tunables::for_limits(&webgpu), Tunables::SAFE);
    let lavapipe = wgpu::Limits {
        max_compute_workgroup_storage_size: 32768,
        max_compute_invocations_per_workgroup: 1024,
        max_compute_workgroup_size_x: 1024,
        ..webgpu.clone()
    };
    assert_eq!(Tunables::for_limits(&lavapipe), Tunables::FAST);
    let nvidia = wgpu::Limits {
        max_compute_workgroup_storage_size: 49152,
        ..lavapipe.clone()
    };
    assert_eq!(Tunables::for_limits(&nvidia), Tunables::LARGE);
    assert_eq!(Tunables::LARGE.wg_size(), 512);
    assert_eq!(Tunables::LARGE.workgroup_bytes(), 49152);
    let nvidia_256 = wgpu::Limits {
        max_compute_invocations_per_workgroup: 256,
        max_compute_workgroup_size_x: 256,
        ..nvidia.clone()
    };
    assert_eq!(Tunables::for_limits(&nvidia_256), Tunables::FAST);
    // Smaller tiles where LARGE's would leave the waves of a large GPU partly idle; none on
    // smaller adapters. 4096^2: 512 tiles, 4 waves of 132 (97% busy); 2048^2: 128, one (97%).
    assert_eq!(Tunables::for_dims(&nvidia, 4096, 4096), Tunables::LARGE);
    assert_eq!(Tunables::for_dims(&nvidia, 2048, 2048), Tunables::LARGE);
    // 544 tiles in 5 waves against MID's 2080 in 16 waves of quarter tiles at 0.73x the rate:
    // 5 x 4 / 1 against 16 / 0.73 quarter-tile times.
    assert_eq!(Tunables::for_dims(&nvidia, 4097, 4095), Tunables::LARGE);
    // 144 tiles in 2 waves against MID's 528 in 4: 8 against 5.5.
    assert_eq!(Tunables::for_dims(&nvidia, 2049, 2047), Tunables::MID);
    // One wave each: a whole tile against a quarter.
    assert_eq!(Tunables::for_dims(&nvidia, 1024, 1024), Tunables::MID);
    assert_eq!(Tunables::for_dims(&nvidia, 1, 1000), Tunables::MID);
    assert_eq!(Tunables::MID.wg_size(), 512);
    assert_eq!(Tunables::MID.workgroup_bytes(), 24576);
    assert_eq!(Tunables::for_dims(&nvidia_256, 1024, 1024), Tunables::FAST);
    assert_eq!(Tunables::for_dims(&lavapipe, 1024, 1024), Tunables::FAST);
    assert_eq!(Tunables::FAST.wg_size(), 256);
    assert_eq!(Tunables::FAST.workgroup_bytes(), 16384);
    // Runs of 32 invocations as 8 x 4 blocks, and a step in chunks of 8 rows, for the 8 x 8
    // blocks only.
    assert!(Tunables::LARGE.warp_tiles() && Tunables::FAST.warp_tiles());
    assert!(!Tunables::MID.warp_tiles() && !Tunables::SAFE.warp_tiles());
    let narrow = Tunables {
        bn: 32,
        ..Tunables::FAST
    };
    assert!(
        !narrow.warp_tiles(),
        "4 invocations across: not a multiple of 8"
    );
    assert_eq!(
        (Tunables::LARGE.k_chunk(), Tunables::FAST.k_chunk()),
        (8, 8)
    );
    assert_eq!((Tunables::MID.k_chunk(), Tunables::SAFE.k_chunk()), (16, 8));
    let bk12 = Tunables {
        bk: 12,
        ..Tunables::FAST
    };
    assert_eq!(bk12.k_chunk(), 4);
    let empty = Tunables {
        bm: 0,
        ..Tunables::SAFE
    };
    assert!(empty.check(&nvidia).is_err());
    let bad = Tunables {
        tm: 3,
        ..Tunables::SAFE
    };
    assert!(bad.check(&nvidia).is_err());
}

#[test]
fn split_keeps_every_block_within_the_binding() {
    let a = vec![0.0; 100 * 60];
    let b = vec![0.0; 60 * 30];
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims {
            m: 100,
            n: 30,
            k: 60,
        },
        trans_a: false,
        trans_b: false,
        precision: Precision::F32,
    };
    let whole = plan_split(&p, Tunables::SAFE, 1 << 20, u64::MAX).unwrap();
    assert_eq!(
        whole,
        Split {
            mc: 100,
            nc: 30,
            kc: 60
        }
    );
    // 1 KiB: 256 f32 per block.
    let s = plan_split(&p, Tunables::SAFE, 1024, u64::MAX).unwrap();
    assert!(s.mc * round4(s.kc) * 4 <= 1024, "{s:?}");
    assert!(s.kc * round4(s.nc) * 4 <= 1024, "{s:?}");
    assert!(s.mc * round4(s.nc) * 4 <= 1024, "{s:?}");
    assert!(s.kc < 60 && s.kc.is_multiple_of(4), "{s:?}");
    assert!(plan_split(&p, Tunables::SAFE, 32, u64::MAX).is_err());
}
