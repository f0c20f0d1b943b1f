//! JPEG output through the command line: the flags read back from the file's own markers
//! (SOF, DQT, DHT, SOS, parsed here), round trips within a PSNR bound (decoded by zune-jpeg,
//! not by the encoder's code), libjpeg-turbo's bytes (fixtures/jpeg, made by Pillow), and a
//! JPEG input's quality and subsampling kept.

use std::path::{Path, PathBuf};

use gpukit::io::image::{self, Samples};

use crate::util::{run, tempdir};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What a JPEG's markers say.
#[derive(Debug, Default)]
struct Markers {
    /// The frame marker: 0xC0 baseline, 0xC2 progressive.
    sof: u8,
    /// (id, h, v) of each component.
    comps: Vec<(u8, u8, u8)>,
    /// Quantisation table 0, zigzag order.
    luma: Vec<u8>,
    /// Each DHT table: class and index, then its BITS and HUFFVAL bytes.
    dht: Vec<(u8, Vec<u8>)>,
    /// Each scan's (Ss, Se, Ah<<4|Al).
    scans: Vec<(u8, u8, u8)>,
}

/// Walks every segment, scans included (their entropy-coded data skipped).
fn markers(path: &Path) -> Markers {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..2], &[0xFF, 0xD8], "SOI");
    let mut m = Markers::default();
    let mut at = 2;
    loop {
        assert_eq!(b[at], 0xFF, "a marker at {at}");
        let marker = b[at + 1];
        if marker == 0xD9 {
            assert_eq!(at + 2, b.len(), "EOI ends the file");
            return m;
        }
        let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        let p = &b[at + 4..at + 2 + len];
        match marker {
            0xC0..=0xC2 => {
                m.sof = marker;
                for c in p[6..].chunks(3) {
                    m.comps.push((c[0], c[1] >> 4, c[1] & 15));
                }
            }
            0xDB => {
                let mut i = 0;
                while i < p.len() {
                    if p[i] == 0 {
                        m.luma = p[i + 1..i + 65].to_vec();
                    }
                    i += 65;
                }
            }
            0xC4 => {
                let mut i = 0;
                while i < p.len() {
                    let n: usize = p[i + 1..i + 17].iter().map(|&c| usize::from(c)).sum();
                    m.dht.push((p[i], p[i + 1..i + 17 + n].to_vec()));
                    i += 17 + n;
                }
            }
            0xDA => {
                let n = usize::from(p[0]);
                m.scans.push((p[1 + 2 * n], p[2 + 2 * n], p[3 + 2 * n]));
            }
            _ => {}
        }
        at += 2 + len;
        if marker == 0xDA {
            // Entropy-coded data: up to the next marker that is not a stuffed 0xFF00 or RSTn.
            while !(b[at] == 0xFF && b[at + 1] != 0 && !(0xD0..=0xD7).contains(&b[at + 1])) {
                at += 1;
            }
        }
    }
}

/// The IJG luminance table at `q`, zigzag order (T.81 K.1 scaled as libjpeg does).
fn ijg_luma(q: u32) -> Vec<u8> {
    const K1_ZIGZAG: [u32; 64] = [
        16, 11, 12, 14, 12, 10, 16, 14, 13, 14, 18, 17, 16, 19, 24, 40, 26, 24, 22, 22, 24, 49, 35,
        37, 29, 40, 58, 51, 61, 60, 57, 51, 56, 55, 64, 72, 92, 78, 64, 68, 87, 69, 55, 56, 80,
        109, 81, 87, 95, 98, 103, 104, 103, 62, 77, 113, 121, 112, 100, 120, 92, 101, 103, 99,
    ];
    let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
    K1_ZIGZAG
        .iter()
        .map(|&v| ((v * scale + 50) / 100).clamp(1, 255) as u8)
        .collect()
}

/// T.81 K.3's luminance DC table: BITS then HUFFVAL.
fn annex_k_dc_luma() -> Vec<u8> {
    let mut t = vec![0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
    t.extend(0..12);
    t
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    10.0 * (255.0f64.powi(2) / (se / a.len() as f64)).log10()
}

fn pixels(path: &Path) -> Vec<u8> {
    match image::load(path).unwrap().samples {
        Samples::U8(d) => d,
        Samples::U16(_) => panic!("8-bit expected"),
    }
}

#[test]
fn flags_are_read_back_from_the_markers() {
    let dir = tempdir();
    let input = fixture("jpeg/rgb64x48.png");
    let out = dir.path().join("out.jpg");
    let blur = |extra: &[&str]| {
        let mut args = vec!["blur", s(&input), "-r", "0", "-o", s(&out)];
        args.extend_from_slice(extra);
        run(&args).code(0);
        markers(&out)
    };
    // Defaults (a PNG input): quality 90, 4:2:0, baseline, optimised tables.
    let m = blur(&[]);
    assert_eq!(m.sof, 0xC0);
    assert_eq!(m.comps, [(1, 2, 2), (2, 1, 1), (3, 1, 1)]);
    assert_eq!(m.luma, ijg_luma(90));
    assert_eq!(m.scans, [(0, 63, 0)]);
    assert_eq!(m.dht.len(), 4);
    assert_ne!(
        m.dht[0],
        (0x00, annex_k_dc_luma()),
        "optimised, not Annex K's"
    );

    for (flag, factors) in [("444", (1, 1)), ("422", (2, 1)), ("420", (2, 2))] {
        let m = blur(&["--subsampling", flag, "--quality", "63"]);
        assert_eq!(
            m.comps[0],
            (1, factors.0, factors.1),
            "--subsampling {flag}"
        );
        assert_eq!(&m.comps[1..], [(2, 1, 1), (3, 1, 1)]);
        assert_eq!(m.luma, ijg_luma(63));
    }

    let m = blur(&["--jpeg-tables", "standard"]);
    assert_eq!(m.dht[0], (0x00, annex_k_dc_luma()));

    // libjpeg's progressive script: 10 scans for YCbCr, the first the DC of all three.
    let m = blur(&["--progressive"]);
    assert_eq!(m.sof, 0xC2);
    assert_eq!(
        m.scans,
        [
            (0, 0, 0x01),
            (1, 5, 0x02),
            (1, 63, 0x01),
            (1, 63, 0x01),
            (6, 63, 0x02),
            (1, 63, 0x21),
            (0, 0, 0x10),
            (1, 63, 0x10),
            (1, 63, 0x10),
            (1, 63, 0x10),
        ]
    );

    // Gray: one component, 1x1 whatever --subsampling says; 6 progressive scans.
    let gray = fixture("jpeg/gray17x33.png");
    run(&["blur", s(&gray), "-r", "0", "-o", s(&out), "--progressive"]).code(0);
    let m = markers(&out);
    assert_eq!(m.comps, [(1, 1, 1)]);
    assert_eq!(m.scans.len(), 6);
}

/// Through the whole command, the bytes libjpeg-turbo writes (Pillow's goldens): a PNG input
/// without metadata, radius 0 (the identity), the golden's settings.
#[test]
fn blur_writes_libjpeg_turbos_bytes() {
    let dir = tempdir();
    for (input, golden, args) in [
        (
            "rgb17x33",
            "rgb17x33-q75-420",
            &["--quality", "75", "--jpeg-tables", "standard"][..],
        ),
        ("rgb17x33", "rgb17x33-q90-420-opt", &["--quality", "90"][..]),
        (
            "rgb64x48",
            "rgb64x48-q95-420-prog",
            &["--quality", "95", "--progressive"][..],
        ),
        ("gray7x9", "gray7x9-q50-444-opt", &["--quality", "50"][..]),
    ] {
        let out = dir.path().join(format!("{golden}.jpg"));
        let png = fixture(&format!("jpeg/{input}.png"));
        let mut argv = vec!["blur", s(&png), "-r", "0", "-o", s(&out)];
        argv.extend_from_slice(args);
        run(&argv).code(0);
        let want = std::fs::read(fixture(&format!("jpeg/{golden}.jpg"))).unwrap();
        assert!(
            std::fs::read(&out).unwrap() == want,
            "{golden}: differs from libjpeg-turbo's"
        );
    }
}

/// Decoded by zune-jpeg (another implementation than the encoder), the output is close to
/// its input: libjpeg-turbo's own files at these settings, decoded by libjpeg-turbo (Pillow),
/// reach 35.40, 38.91, 32.22 and 52.46 dB on this image; the bounds are 0.1 dB under.
#[test]
fn round_trips_within_a_psnr_bound() {
    let dir = tempdir();
    let input = fixture("hopper.png");
    let want = pixels(&input);
    for (args, bound) in [
        (&["--quality", "90"][..], 35.30),
        (&["--quality", "90", "--subsampling", "444"][..], 38.81),
        (&["--quality", "75", "--progressive"][..], 32.12),
        (&["--quality", "100", "--subsampling", "444"][..], 52.36),
    ] {
        let out = dir.path().join("out.jpg");
        let mut argv = vec!["blur", s(&input), "-r", "0", "-o", s(&out)];
        argv.extend_from_slice(args);
        run(&argv).code(0);
        let got = psnr(&pixels(&out), &want);
        assert!(got > bound, "{args:?}: PSNR {got:.2} dB, bound {bound}");
    }
}

/// Optimised tables (the default) never make a larger file than the standard's.
#[test]
fn optimised_tables_are_no_larger() {
    let dir = tempdir();
    let input = fixture("hopper.png");
    let (opt, std_) = (dir.path().join("o.jpg"), dir.path().join("s.jpg"));
    run(&["blur", s(&input), "-r", "2", "-o", s(&opt)]).code(0);
    run(&[
        "blur",
        s(&input),
        "-r",
        "2",
        "-o",
        s(&std_),
        "--jpeg-tables",
        "standard",
    ])
    .code(0);
    let (o, st) = (
        std::fs::metadata(&opt).unwrap().len(),
        std::fs::metadata(&std_).unwrap().len(),
    );
    assert!(o < st, "optimised {o} bytes, standard {st}");
    // Same coefficients, other codes: the same pixels.
    assert_eq!(pixels(&opt), pixels(&std_));
}

#[test]
fn a_jpeg_input_keeps_its_quality_and_subsampling() {
    let dir = tempdir();
    let src = dir.path().join("src.jpg");
    let hopper = fixture("hopper.png");
    run(&[
        "blur",
        s(&hopper),
        "-r",
        "0",
        "-o",
        s(&src),
        "--quality",
        "70",
        "--subsampling",
        "422",
    ])
    .code(0);
    let out = dir.path().join("out.jpg");
    run(&["blur", s(&src), "-r", "1", "-o", s(&out)]).code(0);
    let m = markers(&out);
    assert_eq!(m.luma, ijg_luma(70));
    assert_eq!(m.comps[0], (1, 2, 1));
    // Told otherwise, it does as told.
    run(&[
        "blur",
        s(&src),
        "-r",
        "1",
        "-o",
        s(&out),
        "--subsampling",
        "444",
        "--quality",
        "80",
    ])
    .code(0);
    let m = markers(&out);
    assert_eq!(m.luma, ijg_luma(80));
    assert_eq!(m.comps[0], (1, 1, 1));
}

#[test]
fn jpeg_flags_without_a_jpeg_output_are_usage_errors() {
    let dir = tempdir();
    let out = dir.path().join("out.png");
    let input = fixture("jpeg/rgb7x9.png");
    for flag in [
        &["--subsampling", "420"][..],
        &["--progressive"],
        &["--jpeg-tables", "standard"],
    ] {
        let mut argv = vec!["blur", s(&input), "-o", s(&out)];
        argv.extend_from_slice(flag);
        run(&argv)
            .code(2)
            .one_error_line("applies to JPEG output only");
    }
    run(&[
        "blur",
        s(&input),
        "-o",
        s(&dir.path().join("o.jpg")),
        "--subsampling",
        "411",
    ])
    .code(2);
}
