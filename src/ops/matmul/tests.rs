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
    // LARGE fits lavapipe's limits, but it is for discrete GPUs.
    Tunables::LARGE.check(&lavapipe).unwrap();
    assert_eq!(Tunables::for_limits(&lavapipe), Tunables::FAST);
    let nvidia = wgpu::Limits {
        max_compute_workgroup_storage_size: 49152,
        ..lavapipe.clone()
    };
    assert_eq!(Tunables::for_limits(&nvidia), Tunables::LARGE);
    assert_eq!(Tunables::LARGE.wg_size(), 512);
    assert_eq!(Tunables::LARGE.workgroup_bytes(), 25088);
    let nvidia_256 = wgpu::Limits {
        max_compute_invocations_per_workgroup: 256,
        max_compute_workgroup_size_x: 256,
        ..nvidia.clone()
    };
    assert_eq!(Tunables::for_limits(&nvidia_256), Tunables::FAST);
    // Smaller tiles where LARGE's would leave a large GPU idle; none on smaller adapters.
    // 4096^2: 512 tiles, 4 waves of 132 (97% busy); 2048^2: 128, one (97%).
    assert_eq!(Tunables::for_dims(&nvidia, 4096, 4096), Tunables::LARGE);
    assert_eq!(Tunables::for_dims(&nvidia, 2048, 2048), Tunables::LARGE);
    // 136 of LARGE's tiles (52% busy over two waves) against WIDE's 264 (100%).
    assert_eq!(Tunables::for_dims(&nvidia, 2049, 2047), Tunables::WIDE);
    // 32 of LARGE's tiles, 64 of WIDE's, 128 of MID's.
    assert_eq!(Tunables::for_dims(&nvidia, 1024, 1024), Tunables::MID);
    assert_eq!(Tunables::for_dims(&nvidia, 1, 1000), Tunables::MID);
    assert_eq!(Tunables::WIDE.workgroup_bytes(), 41984);
    assert_eq!(Tunables::MID.wg_size(), 512);
    assert_eq!(Tunables::MID.workgroup_bytes(), 25600);
    assert_eq!(Tunables::for_dims(&nvidia_256, 1024, 1024), Tunables::FAST);
    assert_eq!(Tunables::for_dims(&lavapipe, 1024, 1024), Tunables::FAST);
    assert_eq!(Tunables::FAST.wg_size(), 256);
    assert_eq!(Tunables::FAST.workgroup_bytes(), 16896);
    // Runs of 32 invocations as 8 x 4 blocks for the 8 x 8 blocks only.
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
