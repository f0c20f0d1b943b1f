//! numpy's own arrays, as `np.save` writes them (fixtures/npy, made by
//! scripts/make_npy_fixtures.py): every real dtype, either byte order, C or Fortran order,
//! read by `scan` and `matmul` and checked against numpy's results or hand-computed ones.

use std::path::{Path, PathBuf};

use crate::util::{run, tempdir, Run};

fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "fixtures", "npy", name]
        .iter()
        .collect();
    p.to_str().unwrap().to_owned()
}

/// A 1-D or 2-D float64 or int64 .npy's values in C order, read here without gpukit (the
/// header's dict is taken as numpy writes it).
fn numpy_values(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let dict = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    let data = &bytes[10 + len..];
    assert!(dict.contains("'fortran_order': False"), "{dict}");
    if dict.contains("'<f8'") {
        data.chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    } else {
        assert!(dict.contains("'<i8'"), "{dict}");
        data.chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect()
    }
}

fn json_values(r: &Run) -> Vec<f64> {
    r.code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    fn flat(v: &serde_json::Value, out: &mut Vec<f64>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| flat(i, out)),
            n => out.push(n.as_f64().unwrap()),
        }
    }
    let mut out = Vec::new();
    flat(&v, &mut out);
    out
}

fn scan(args: &[&str]) -> Run {
    let mut all = vec!["--backend", "cpu", "scan"];
    all.extend_from_slice(args);
    run(&all)
}

#[test]
fn np_arange_int64_scans_as_numpy_cumsum() {
    let dir = tempdir();
    let out = dir.path().join("prefix.npy");
    scan(&[&fixture("arange_i8.npy"), "-o", out.to_str().unwrap()]).code(0);
    // Read back as JSON by a second run, and against numpy's exclusive cumsum.
    let back = scan(&[out.to_str().unwrap(), "--inclusive", "--op", "max"]);
    let want = numpy_values(Path::new(&fixture("cumsum_arange.npy")));
    assert_eq!(json_values(&back), want);
}

#[test]
fn every_integer_and_bool_dtype_is_read() {
    // np.arange(7) * 3 % 5 = [0, 3, 1, 4, 2, 0, 3]; as bool [0, 1, 1, 1, 1, 0, 1].
    let sums = [0.0, 3.0, 4.0, 8.0, 10.0, 10.0, 13.0];
    for dt in [
        "int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64",
    ] {
        let r = scan(&[&fixture(&format!("v_{dt}.npy")), "--inclusive"]);
        assert_eq!(json_values(&r), sums, "{dt}");
    }
    let r = scan(&[&fixture("v_bool.npy"), "--inclusive"]);
    assert_eq!(json_values(&r), [0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0]);
    // Big-endian int16 of -3..=3: read as i32.
    let r = scan(&[&fixture("v_int16_be.npy"), "--inclusive"]);
    assert_eq!(json_values(&r), [-3.0, -5.0, -6.0, -6.0, -5.0, -3.0, 0.0]);
    let r = scan(&[&fixture("v_int64_neg.npy"), "--inclusive"]);
    assert_eq!(json_values(&r), [5.0, 3.0, 10.0, 1.0]);
}

#[test]
fn float16_and_big_endian_float32_scan_as_float32() {
    let r = scan(&[&fixture("v_float16.npy"), "--inclusive"]);
    assert_eq!(json_values(&r), [0.5, 1.75, -0.25, 65503.75]);
    let r = scan(&[&fixture("v_float32_be.npy"), "--inclusive"]);
    assert_eq!(json_values(&r), [0.5, 1.75, -0.25]);
}

#[test]
fn values_that_do_not_fit_are_named_with_their_index() {
    scan(&[&fixture("v_int64_big.npy")])
        .code(1)
        .one_error_line("v_int64_big.npy: element [1]: 1099511627776 does not fit u32");
    // 2^40 is a float32 exactly.
    // (Printed as float32's shortest text; compared as float32.)
    let r = scan(&[&fixture("v_int64_big.npy"), "--dtype", "f32", "--inclusive"]);
    let got: Vec<f32> = json_values(&r).iter().map(|&v| v as f32).collect();
    assert_eq!(got, [1.0, 1_099_511_627_777.0]);
    scan(&[&fixture("v_float64_huge.npy")])
        .code(1)
        .one_error_line("element [1]: 1e300 is outside float32's range");
    scan(&[&fixture("v_float64_frac.npy"), "--dtype", "u32"])
        .code(1)
        .one_error_line("v_float64_frac.npy: element [1]: 2.5 is not an integer (u32)");
    run(&["--backend", "cpu", "matmul", &fixture("m_int64_big.npy"), &fixture("m_int64.npy")])
        .code(1)
        .one_error_line(
            "m_int64_big.npy: element [0, 1]: 16777217 is not exactly a float32 (the nearest is 16777216)",
        );
}

#[test]
fn float64_matrices_in_either_order_multiply_as_numpy_does() {
    let want = numpy_values(Path::new(&fixture("ab_f8.npy")));
    for b in ["b_f8_fortran.npy", "b_f8_be.npy"] {
        let r = run(&[
            "--backend",
            "cpu",
            "matmul",
            &fixture("a_f8.npy"),
            &fixture(b),
        ]);
        let got = json_values(&r);
        assert_eq!(got.len(), want.len(), "{b}");
        for (g, w) in got.iter().zip(&want) {
            // K = 3 products of values in [0, 1), in f32: well within 1e-5.
            assert!((g - w).abs() < 1e-5, "{b}: {g} against numpy's {w}");
        }
    }
    // np.arange(6).reshape(2, 3) @ its transpose, exact in f32.
    let m = fixture("m_int64.npy");
    let r = run(&["--backend", "cpu", "matmul", &m, &m, "--transpose-b"]);
    assert_eq!(json_values(&r), [5.0, 14.0, 14.0, 50.0]);
}
