//! Frame streams through real ffmpeg (Debian's, installed by .ci/run; these tests fail when
//! it is missing): Y4M and raw frames blurred on both engines and checked pixel for pixel
//! against the CPU reference on the frames ffmpeg decoded, per-frame histograms against
//! counts computed here from ffmpeg's raw frames, and the stream's errors.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use gpukit::io::image::Image;
use gpukit::ops::blur::{self, Kind, Options};

use crate::util::{gpukit, tempdir};

/// Runs ffmpeg (quiet) with `args`, asserting it worked.
#[track_caller]
fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-loglevel", "error", "-y"])
        .args(args)
        .output()
        .expect("ffmpeg runs (Debian's ffmpeg; .ci/run installs it)");
    assert!(
        out.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A short clip of ffmpeg's testsrc2 (moving, so frames differ), `frames` frames of `size`.
fn clip(dir: &Path, name: &str, size: &str, frames: u32, format: &[&str]) -> String {
    let path = dir.join(name).display().to_string();
    let source = format!("testsrc2=size=64x48:rate=10,scale={size}");
    let n = frames.to_string();
    let mut args = vec!["-f", "lavfi", "-i", &source, "-frames:v", &n];
    args.extend(format);
    args.push(&path);
    ffmpeg(&args);
    path
}

/// What ffmpeg decodes `input` (a Y4M file) to as raw frames of `pix_fmt`.
fn decoded(dir: &Path, input: &str, pix_fmt: &str) -> Vec<u8> {
    let out = dir.join(format!("decoded-{pix_fmt}.raw"));
    let o = out.display().to_string();
    ffmpeg(&["-i", input, "-f", "rawvideo", "-pix_fmt", pix_fmt, &o]);
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    bytes
}

/// Runs gpukit with `args`, `stdin` fed to it; its exit code, stdout and stderr.
fn gpukit_piped(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    gpukit_piped_env(args, stdin, &[])
}

/// [`gpukit_piped`] with `env` set for gpukit.
fn gpukit_piped_env(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> (i32, Vec<u8>, String) {
    let mut child = gpukit()
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The planes of 8-bit 4:2:0 frames of `w` x `h`, frame by frame.
fn planes_420(bytes: &[u8], w: u32, h: u32) -> Vec<[Image; 3]> {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let (ys, cs) = ((w * h) as usize, (cw * ch) as usize);
    bytes
        .chunks_exact(ys + 2 * cs)
        .map(|f| {
            [
                Image::new_u8(w, h, 1, f[..ys].to_vec()),
                Image::new_u8(cw, ch, 1, f[ys..ys + cs].to_vec()),
                Image::new_u8(cw, ch, 1, f[ys + cs..].to_vec()),
            ]
        })
        .collect()
}

fn samples(img: &Image) -> &[u8] {
    match &img.samples {
        gpukit::io::image::Samples::U8(s) => s,
        _ => unreachable!("8-bit"),
    }
}

// An odd 4:2:0 size (chroma planes 32x24 rounded up) through both engines: every plane equals
// the reference blur of ffmpeg's own decode of the input, luma with -r 3 and chroma with 2.
#[test]
fn y4m_420_odd_size_blurs_every_plane_exactly_on_both_engines() {
    let dir = tempdir();
    let d = dir.path();
    let (w, h) = (63, 47);
    let input = clip(d, "in.y4m", "63:47", 5, &["-pix_fmt", "yuv420p"]);
    let frames_in = planes_420(&decoded(d, &input, "yuv420p"), w, h);
    assert_eq!(frames_in.len(), 5);
    let luma = Options::new(Kind::Box, 3, 1);
    let chroma = Options::new(Kind::Box, 2, 1);
    for engine in [&["--backend", "cpu"][..], &["--device", "0"]] {
        let out = d.join("out.y4m").display().to_string();
        let mut args = engine.to_vec();
        args.extend(["blur", &input, "-r", "3", "-o", &out]);
        let r = gpukit().args(&args).output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let header = std::fs::read(&out).unwrap();
        assert!(header.starts_with(b"YUV4MPEG2 W63 H47 F10:1"));
        let frames_out = planes_420(&decoded(d, &out, "yuv420p"), w, h);
        assert_eq!(frames_out.len(), 5, "{engine:?}");
        for (i, (a, b)) in frames_in.iter().zip(&frames_out).enumerate() {
            for p in 0..3 {
                let o = if p == 0 { luma } else { chroma };
                let want = blur::reference(&a[p], &o).unwrap();
                assert!(
                    samples(&want) == samples(&b[p]),
                    "{engine:?}: frame {i}, plane {p} differs from the reference"
                );
            }
        }
    }
}

// Raw rgb24 on stdin, raw rgb24 out on stdout, in order: each frame is the reference blur of
// the frame ffmpeg wrote (a gaussian, to take the other kernel too).
#[test]
fn raw_rgb24_frames_blur_in_order_through_stdin_and_stdout() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(
        d,
        "in.rgb",
        "40:30",
        4,
        &["-f", "rawvideo", "-pix_fmt", "rgb24"],
    );
    let bytes = std::fs::read(&input).unwrap();
    let args = [
        "--backend",
        "cpu",
        "blur",
        "-",
        "--raw",
        "40x30",
        "--pix-fmt",
        "rgb24",
        "--kind",
        "gaussian",
        "-r",
        "4",
        "-o",
        "-",
    ];
    let (code, out, err) = gpukit_piped(&args, &bytes);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.len(), bytes.len());
    let o = Options::new(Kind::Gaussian { sigma: 4.0 / 3.0 }, 4, 1);
    for (i, (a, b)) in bytes.chunks(3600).zip(out.chunks(3600)).enumerate() {
        let want = blur::reference(&Image::new_u8(40, 30, 3, a.to_vec()), &o).unwrap();
        assert!(samples(&want) == b, "frame {i} differs");
    }
}

// `-v` says the stream's engine rule: the per-frame figures, the frames counted (300 for a
// pipe, whose length cannot be known; a file's own count), and the verdict, which for small
// frames is the cores (a GPU's gain on them is less than opening one costs); the frames are
// the reference blur's.
#[test]
fn verbose_says_the_stream_engine_rule_and_small_streams_stay_on_the_cores() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "48:32", 5, &["-pix_fmt", "yuv420p"]);
    let bytes = std::fs::read(&input).unwrap();
    let (code, out, err) = gpukit_piped(
        &[
            "-v",
            "blur",
            "-",
            "-r",
            "2",
            "--chroma-radius",
            "2",
            "-o",
            "-",
        ],
        &bytes,
    );
    assert_eq!(code, 0, "{err}");
    let rule = err
        .lines()
        .find(|l| l.starts_with("gpukit: stdin: a frame takes about"))
        .unwrap_or_else(|| panic!("no rule line: {err}"));
    assert!(rule.contains("ms through the pipes; "), "{rule}");
    assert!(
        rule.contains(" 300 frames") && rule.ends_with(": the cores"),
        "{rule}"
    );
    assert!(err.contains("engine: native CPU"), "{err}");
    // Every plane of every frame out is the reference blur of the one in.
    let (frames_in, frames_out) = (stream_planes(&bytes, None), stream_planes(&out, None));
    assert_eq!((frames_in.len(), frames_out.len()), (5, 5));
    for (i, (a, b)) in frames_in.iter().zip(&frames_out).enumerate() {
        for (p, (pa, pb)) in a.iter().zip(b).enumerate() {
            let want = blur::reference(pa, &Options::new(Kind::Box, 2, 1)).unwrap();
            assert!(
                want == *pb,
                "frame {i}, plane {p} differs from the reference"
            );
        }
    }
    let (code, _, err) = gpukit_piped(&["-v", "blur", &input, "-r", "2", "-o", "-"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(" 5 frames") && err.contains(": the cores\n"),
        "{err}"
    );
}

/// Every frame of a stream (Y4M, or raw frames of `raw`'s size and pixel format) as its
/// planes, read with gpukit's own reader.
fn stream_planes(bytes: &[u8], raw: Option<(u32, u32, &str)>) -> Vec<Vec<Image>> {
    use gpukit::io::video::{VideoFormat, VideoReader};
    let mut reader = match raw {
        None => VideoReader::y4m(bytes, u64::MAX).unwrap(),
        Some((w, h, pix)) => {
            VideoReader::raw(bytes, VideoFormat::raw(w, h, pix).unwrap(), u64::MAX).unwrap()
        }
    };
    let format = reader.format().clone();
    let mut frames = Vec::new();
    while let Some((i, planes)) = reader.next_planes().unwrap() {
        assert_eq!(i, frames.len() as u64);
        frames.push(format.images(planes));
    }
    frames
}

// The GPU stream (a ring of four slots, frames read straight into them) on nine frames of
// odd sizes: 4:2:0, 4:2:2 and 4:4:4 at 8 and 16 bits, and raw rgba and gray16le, every
// frame's every plane the reference blur of the input's (luma -r 3, chroma 2), in order; a
// stream cut inside frame 6 is one line naming it, and no output file is left.
#[test]
fn gpu_stream_blurs_more_frames_than_slots_exactly_in_every_layout() {
    let dir = tempdir();
    let d = dir.path();
    let out = d.join("out").display().to_string();
    type Case<'a> = (&'a str, &'a str, Option<(u32, u32, &'a str)>);
    let cases: [Case; 7] = [
        ("yuv420p", "33:19", None),
        ("yuv422p", "33:19", None),
        ("yuv444p", "31:17", None),
        ("yuv420p16le", "34:19", None),
        ("yuv444p16le", "31:17", None),
        ("rgba", "21:13", Some((21, 13, "rgba"))),
        ("gray16le", "23:11", Some((23, 11, "gray16le"))),
    ];
    for (pix_fmt, size, raw) in cases {
        let mut format = vec!["-strict", "-1", "-pix_fmt", pix_fmt];
        format.extend([
            "-f",
            if raw.is_some() {
                "rawvideo"
            } else {
                "yuv4mpegpipe"
            },
        ]);
        let input = clip(d, "in", size, 9, &format);
        let bytes = std::fs::read(&input).unwrap();
        let frames_in = stream_planes(&bytes, raw);
        assert_eq!(frames_in.len(), 9, "{pix_fmt}");
        let raw_args = raw.map(|(w, h, pix)| (format!("{w}x{h}"), pix));
        let mut args = vec!["--device", "0", "blur", "-", "-r", "3"];
        args.extend(["--chroma-radius", "2", "-o", &out]);
        if let Some((size, pix)) = &raw_args {
            args.extend(["--raw", size, "--pix-fmt", pix]);
        }
        if raw.is_some() {
            // --chroma-radius is for Y'CbCr only.
            args.retain(|a| *a != "--chroma-radius" && *a != "2");
        }
        let (code, _, err) = gpukit_piped(&args, &bytes);
        assert_eq!(code, 0, "{pix_fmt}: {err}");
        let frames_out = stream_planes(&std::fs::read(&out).unwrap(), raw);
        assert_eq!(frames_out.len(), 9, "{pix_fmt}");
        for (i, (a, b)) in frames_in.iter().zip(&frames_out).enumerate() {
            for (p, (pa, pb)) in a.iter().zip(b).enumerate() {
                let r = if p == 0 || raw.is_some() { 3 } else { 2 };
                let want = blur::reference(pa, &Options::new(Kind::Box, r, 1)).unwrap();
                assert!(want == *pb, "{pix_fmt}: frame {i}, plane {p} differs");
            }
        }
        std::fs::remove_file(&out).unwrap();
        if pix_fmt == "yuv420p" {
            let frame = (bytes.len() - bytes.iter().position(|&b| b == b'\n').unwrap()) / 9;
            let cut = &bytes[..bytes.len() - 2 * frame - frame / 2];
            let (code, _, err) = gpukit_piped(&args, cut);
            assert_eq!(code, 1, "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("stdin: frame 6 is cut short"), "{err}");
            assert!(!Path::new(&out).exists(), "a half-written output was left");
        }
    }
}

// 16-bit 4:4:4 Y4M (ffmpeg's C444p16): each plane a 16-bit gray image, the same radius on all.
#[test]
fn y4m_16_bit_444_blurs_each_plane_as_16_bit_gray() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(
        d,
        "in.y4m",
        "20:10",
        2,
        &["-strict", "-1", "-pix_fmt", "yuv444p16le"],
    );
    let out = d.join("out.y4m").display().to_string();
    let r = gpukit()
        .args(["--device", "0", "blur", &input, "-r", "2", "-o", &out])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (a, b) = (
        decoded(d, &input, "yuv444p16le"),
        decoded(d, &out, "yuv444p16le"),
    );
    assert_eq!(a.len(), 2 * 3 * 200 * 2);
    let o = Options::new(Kind::Box, 2, 1);
    for (pa, pb) in a.chunks(400).zip(b.chunks(400)) {
        let s = |x: &[u8]| -> Vec<u16> {
            x.chunks(2)
                .map(|v| u16::from_le_bytes([v[0], v[1]]))
                .collect()
        };
        let want = blur::reference(&Image::new_u16(20, 10, 1, s(pa)), &o).unwrap();
        assert_eq!(want, Image::new_u16(20, 10, 1, s(pb)));
    }
}

/// Little-endian 16-bit samples.
fn words(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|v| u16::from_le_bytes([v[0], v[1]]))
        .collect()
}

// 10-bit 4:2:0 (ffmpeg's `-pix_fmt yuv420p10le`, `C420p10` in the header) at an odd height
// (ffmpeg 5.1's Y4M demuxer cannot read back its own odd-width 10-bit frames), through both
// engines: written back as C420p10, every plane the reference blur of ffmpeg's
// own decode as 16-bit gray (samples that stay within 10 bits); 12-bit 4:2:2 and 12-bit mono
// on the CPU engine likewise.
#[test]
fn y4m_10_and_12_bit_blur_exactly_and_keep_their_format() {
    let dir = tempdir();
    let d = dir.path();
    let (w, h) = (22u32, 11u32);
    // The pixel format, its Y4M tag, the chroma planes' size (0: none), the engines.
    type Case<'a> = (&'a str, &'a str, u32, u32, &'a [&'a [&'a str]]);
    let cases: [Case; 3] = [
        (
            "yuv420p10le",
            "C420p10",
            w.div_ceil(2),
            h.div_ceil(2),
            &[&["--backend", "cpu"], &["--device", "0"]],
        ),
        (
            "yuv422p12le",
            "C422p12",
            w.div_ceil(2),
            h,
            &[&["--backend", "cpu"]],
        ),
        ("gray12le", "Cmono12", 0, 0, &[&["--backend", "cpu"]]),
    ];
    for (pix_fmt, tag, cw, ch, engines) in cases {
        let input = clip(
            d,
            "in.y4m",
            "22:11",
            3,
            &["-strict", "-1", "-pix_fmt", pix_fmt],
        );
        let head = std::fs::read(&input).unwrap();
        assert!(
            String::from_utf8_lossy(&head[..60]).contains(tag),
            "{pix_fmt}"
        );
        let a = decoded(d, &input, pix_fmt);
        let sizes = match cw {
            0 => vec![(w, h)],
            _ => vec![(w, h), (cw, ch), (cw, ch)],
        };
        let frame: usize = sizes.iter().map(|(x, y)| 2 * (x * y) as usize).sum();
        assert_eq!(a.len(), 3 * frame, "{pix_fmt}");
        let max = *words(&a).iter().max().unwrap();
        let bits = if tag.contains("10") { 10 } else { 12 };
        assert!(
            max < 1 << bits && max >= 1 << (bits - 2),
            "{pix_fmt}: {max}"
        );
        for engine in engines {
            let out = d.join("out.y4m").display().to_string();
            let mut args = engine.to_vec();
            args.extend([
                "blur",
                &input,
                "-r",
                "3",
                "--chroma-radius",
                "2",
                "-o",
                &out,
            ]);
            let r = gpukit().args(&args).output().unwrap();
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            let header = std::fs::read(&out).unwrap();
            let line = String::from_utf8_lossy(
                &header[..header.iter().position(|&b| b == b'\n').unwrap()],
            )
            .into_owned();
            assert!(line.contains(&format!(" {tag}")), "{line}");
            let b = decoded(d, &out, pix_fmt);
            assert_eq!(b.len(), a.len(), "{pix_fmt} {engine:?}");
            for (i, (fa, fb)) in a.chunks(frame).zip(b.chunks(frame)).enumerate() {
                let mut at = 0;
                for (p, &(pw, ph)) in sizes.iter().enumerate() {
                    let n = 2 * (pw * ph) as usize;
                    let o = Options::new(Kind::Box, if p == 0 { 3 } else { 2 }, 1);
                    let img = Image::new_u16(pw, ph, 1, words(&fa[at..at + n]));
                    let want = blur::reference(&img, &o).unwrap();
                    let got = Image::new_u16(pw, ph, 1, words(&fb[at..at + n]));
                    assert!(want == got, "{pix_fmt} {engine:?}: frame {i}, plane {p}");
                    at += n;
                }
            }
        }
        // A 10- or 12-bit histogram is counted on its own maximum: more bins than values is a
        // usage error in one line.
        let too_many = ((1u32 << bits) + 1).to_string();
        let args = ["histogram", "-", "--per-frame", "--bins", &too_many];
        let (code, _, err) = gpukit_piped(&args, &head);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let want = format!(
            "--bins {too_many}: {bits}-bit frames take 1 to {} bins",
            1 << bits
        );
        assert!(err.contains(&want), "{err}");
    }
}

/// Counts of `values` in 256 bins.
fn counts(values: impl Iterator<Item = u32>) -> Vec<u64> {
    let mut c = vec![0u64; 256];
    for v in values {
        c[v as usize] += 1;
    }
    c
}

/// The JSON lines of `histogram --per-frame`.
fn lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn channel(line: &serde_json::Value, name: &str) -> Vec<u64> {
    let ch = line["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    serde_json::from_value(ch["counts"].clone()).unwrap()
}

/// R', G', B' of one limited-range BT.601 `bits`-bit Y'CbCr sample, by the formula of
/// docs/formats.md ("What the histogram counts"): Y' from 16 << (bits - 8) scaled by
/// max / (219 << (bits - 8)), chroma from the half scaled by max / (224 << (bits - 8)), the
/// factors in 16.16 fixed point, rounded, clamped to 0..=max.
fn rgb_of_bits(y: u32, u: u32, v: u32, bits: u32) -> [u32; 3] {
    let (kr, kb) = (0.299, 0.114);
    let kg = 1.0 - kr - kb;
    let (max, scale) = ((1i64 << bits) - 1, 1i64 << (bits - 8));
    let (ky, kc) = (
        max as f64 / (219 * scale) as f64,
        max as f64 / (224 * scale) as f64,
    );
    let q = |f: f64| (f * 65536.0).round() as i64;
    let half = 1i64 << (bits - 1);
    let (y, u, v) = (
        q(ky) * (i64::from(y) - 16 * scale),
        i64::from(u) - half,
        i64::from(v) - half,
    );
    let f = |s: i64| ((s + 32768) >> 16).clamp(0, max) as u32;
    [
        f(y + q(kc * 2.0 * (1.0 - kr)) * v),
        f(y - q(kc * 2.0 * kb * (1.0 - kb) / kg) * u - q(kc * 2.0 * kr * (1.0 - kr) / kg) * v),
        f(y + q(kc * 2.0 * (1.0 - kb)) * u),
    ]
}

// 10-bit 4:2:0 (ffmpeg's `-pix_fmt yuv420p10le`) through `histogram --per-frame` on both
// engines: each frame's red, green, blue and luminance counts are those of ffmpeg's own decode
// converted here, binned on the stream's own maximum, 1023, as 8- and 16-bit samples are on
// 255 and 65535: bin = min(floor(v * bins / 1023), bins - 1), with 256 bins and with 1024
// (one a value).
#[test]
fn per_frame_histograms_of_10_bit_420_count_on_their_own_maximum() {
    let dir = tempdir();
    let d = dir.path();
    let (w, h) = (22usize, 11usize);
    let input = clip(
        d,
        "in.y4m",
        "22:11",
        3,
        &["-strict", "-1", "-pix_fmt", "yuv420p10le"],
    );
    let raw = words(&decoded(d, &input, "yuv420p10le"));
    let bytes = std::fs::read(&input).unwrap();
    let (cw, cs) = (w.div_ceil(2), w.div_ceil(2) * h.div_ceil(2));
    let frames: Vec<&[u16]> = raw.chunks(w * h + 2 * cs).collect();
    assert_eq!(frames.len(), 3);
    for bins in [256u32, 1024] {
        for engine in [["--backend", "cpu"], ["--device", "0"]] {
            let b = bins.to_string();
            let mut args = engine.to_vec();
            args.extend(["histogram", "-", "--per-frame", "--bins", &b]);
            let (code, out, err) = gpukit_piped(&args, &bytes);
            assert_eq!(code, 0, "{err}");
            let got = lines(&out);
            assert_eq!(got.len(), 3, "{engine:?}");
            for (i, (line, f)) in got.iter().zip(&frames).enumerate() {
                assert_eq!(line["bins"], bins);
                let rgb: Vec<[u32; 3]> = (0..w * h)
                    .map(|p| {
                        let c = (p / w / 2) * cw + (p % w) / 2;
                        let (y, u, v) = (f[p], f[w * h + c], f[w * h + cs + c]);
                        rgb_of_bits(y.into(), u.into(), v.into(), 10)
                    })
                    .collect();
                let binned = |values: &mut dyn Iterator<Item = u32>| {
                    let mut counts = vec![0u64; bins as usize];
                    for v in values {
                        counts[(v * bins / 1023).min(bins - 1) as usize] += 1;
                    }
                    counts
                };
                for (c, name) in ["red", "green", "blue"].iter().enumerate() {
                    let want = binned(&mut rgb.iter().map(|p| p[c]));
                    assert_eq!(channel(line, name), want, "{engine:?} frame {i} {name}");
                }
                let lum = |p: &[u32; 3]| (6966 * p[0] + 23436 * p[1] + 2366 * p[2] + 16384) >> 15;
                let want = binned(&mut rgb.iter().map(lum));
                assert_eq!(channel(line, "luminance"), want, "{engine:?} frame {i}");
            }
        }
    }
}

// Mono Y4M: each frame's gray counts are the counts of ffmpeg's gray decode of that frame,
// with the frame's index and time from the stream's rate (10 fps).
#[test]
fn per_frame_histograms_of_mono_y4m_match_ffmpegs_frames_with_their_times() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "33:17", 5, &["-pix_fmt", "gray"]);
    let gray = decoded(d, &input, "gray");
    for engine in [["--backend", "cpu"], ["--device", "0"]] {
        let r = gpukit()
            .args(engine)
            .args(["histogram", &input, "--per-frame"])
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let got = lines(&r.stdout);
        assert_eq!(got.len(), 5);
        for (i, (line, frame)) in got.iter().zip(gray.chunks(33 * 17)).enumerate() {
            assert_eq!(line["schema"], "gpukit.histogram-frame/1");
            assert_eq!(line["frame"], i as u64);
            assert!((line["time"].as_f64().unwrap() - i as f64 / 10.0).abs() < 1e-9);
            assert_eq!(
                channel(line, "gray"),
                counts(frame.iter().map(|&v| u32::from(v)))
            );
        }
    }
}

// Raw rgb24 frames on stdin: red, green, blue and luminance counted here from the bytes
// (luminance with the documented integer weights); no rate, so no time.
#[test]
fn per_frame_histograms_of_raw_rgb24_count_each_frame() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(
        d,
        "in.rgb",
        "16:12",
        3,
        &["-f", "rawvideo", "-pix_fmt", "rgb24"],
    );
    let bytes = std::fs::read(&input).unwrap();
    let args = [
        "--backend",
        "cpu",
        "histogram",
        "-",
        "--raw",
        "16x12",
        "--pix-fmt",
        "rgb24",
        "--per-frame",
    ];
    let (code, out, err) = gpukit_piped(&args, &bytes);
    assert_eq!(code, 0, "{err}");
    let got = lines(&out);
    assert_eq!(got.len(), 3);
    for (line, frame) in got.iter().zip(bytes.chunks(16 * 12 * 3)) {
        assert!(line["time"].is_null());
        for (c, name) in ["red", "green", "blue"].iter().enumerate() {
            let want = counts(frame.chunks(3).map(|p| u32::from(p[c])));
            assert_eq!(channel(line, name), want, "{name}");
        }
        let luma = frame.chunks(3).map(|p| {
            let [r, g, b] = [p[0], p[1], p[2]].map(u32::from);
            (6966 * r + 23436 * g + 2366 * b + (1 << 14)) >> 15
        });
        assert_eq!(channel(line, "luminance"), counts(luma));
    }
}

/// BT.601 or BT.709 limited-range Y'CbCr to 8-bit R'G'B' as docs/formats.md writes it, from
/// the textbook factors (computed here, not taken from gpukit).
fn rgb_of(y: u8, u: u8, v: u8, kr: f64, kb: f64) -> [u32; 3] {
    let kg = 1.0 - kr - kb;
    let (ky, kc) = (255.0 / 219.0, 255.0 / 224.0);
    let q = |f: f64| (f * 65536.0).round() as i64;
    let (y, u, v) = (
        q(ky) * (i64::from(y) - 16),
        i64::from(u) - 128,
        i64::from(v) - 128,
    );
    let f = |s: i64| ((s + 32768) >> 16).clamp(0, 255) as u32;
    [
        f(y + q(kc * 2.0 * (1.0 - kr)) * v),
        f(y - q(kc * 2.0 * kb * (1.0 - kb) / kg) * u - q(kc * 2.0 * kr * (1.0 - kr) / kg) * v),
        f(y + q(kc * 2.0 * (1.0 - kb)) * u),
    ]
}

// 4:2:0 Y4M at an odd size: RGB counts from ffmpeg's yuv420p decode converted here, each
// pixel with the chroma sample it falls in; BT.601 by default, BT.709 when the header says,
// and what `--matrix` says over either.
#[test]
fn per_frame_histograms_of_420_y4m_follow_the_headers_matrix() {
    let dir = tempdir();
    let d = dir.path();
    let (w, h) = (21usize, 13usize);
    let input = clip(d, "in.y4m", "21:13", 2, &["-pix_fmt", "yuv420p"]);
    let raw = decoded(d, &input, "yuv420p");
    let bytes = std::fs::read(&input).unwrap();
    let header_end = bytes.iter().position(|&b| b == b'\n').unwrap();
    let tagged = [
        &bytes[..header_end],
        b" XCOLORMATRIX=BT709",
        &bytes[header_end..],
    ]
    .concat();
    // `--matrix` overrides the header either way (ffmpeg writes no matrix tag).
    let (bt601, bt709) = ((0.299, 0.114), (0.2126, 0.0722));
    for (stream, matrix, (kr, kb)) in [
        (&bytes, None, bt601),
        (&tagged, None, bt709),
        (&bytes, Some("bt709"), bt709),
        (&tagged, Some("bt601"), bt601),
    ] {
        let mut args = vec!["--backend", "cpu", "histogram", "-", "--per-frame"];
        args.extend(matrix.iter().flat_map(|&m| ["--matrix", m]));
        let (code, out, err) = gpukit_piped(&args, stream);
        assert_eq!(code, 0, "{err}");
        let got = lines(&out);
        assert_eq!(got.len(), 2);
        let (cw, cs) = (w.div_ceil(2), w.div_ceil(2) * h.div_ceil(2));
        for (line, f) in got.iter().zip(raw.chunks(w * h + 2 * cs)) {
            let rgb: Vec<[u32; 3]> = (0..w * h)
                .map(|i| {
                    let c = (i / w / 2) * cw + (i % w) / 2;
                    rgb_of(f[i], f[w * h + c], f[w * h + cs + c], kr, kb)
                })
                .collect();
            for (c, name) in ["red", "green", "blue"].iter().enumerate() {
                assert_eq!(
                    channel(line, name),
                    counts(rgb.iter().map(|p| p[c])),
                    "{name}"
                );
            }
        }
    }
}

// `--plot-frames -`: one plot a frame as a Y4M stream ffmpeg reads; the JSON lines go to
// --json meanwhile.
#[test]
fn plot_frames_are_a_y4m_stream_ffmpeg_decodes() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "32:16", 3, &["-pix_fmt", "yuv420p"]);
    let json = d.join("lines.json").display().to_string();
    let plots = d.join("plots.y4m").display().to_string();
    let r = gpukit()
        .args([
            "--backend",
            "cpu",
            "histogram",
            &input,
            "--per-frame",
            "--json",
            &json,
        ])
        .args(["--plot-frames", &plots, "--plot-size", "64x32"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(lines(&std::fs::read(&json).unwrap()).len(), 3);
    let frames = decoded(d, &plots, "yuv444p");
    assert_eq!(frames.len(), 3 * 3 * 64 * 32);
}

// A stream cut inside frame 2, a malformed header and an empty stream: one line each, exit 1,
// and no output file left behind.
#[test]
fn cut_malformed_and_empty_streams_give_one_line_and_leave_nothing() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "16:8", 3, &["-pix_fmt", "yuv420p"]);
    let bytes = std::fs::read(&input).unwrap();
    let cut = &bytes[..bytes.len() - 50];
    let out = d.join("out.y4m").display().to_string();
    let cases: [(&[u8], &str); 4] = [
        (
            cut,
            "stdin: frame 2 is cut short: the stream ended 142 bytes into its 192",
        ),
        (b"YUV4MPEG2 W16 H8 C420jpeg Zoo\n", "unknown tag"),
        (
            b"YUV4MPEG2 W16 H8 C420jpeg\n",
            "stdin: the stream holds no frames",
        ),
        (b"", "stdin: the stream is empty"),
    ];
    for (stream, needle) in cases {
        for args in [
            &["--backend", "cpu", "blur", "-", "-o", &out][..],
            &["--backend", "cpu", "histogram", "-", "--per-frame"],
        ] {
            let (code, _, err) = gpukit_piped(args, stream);
            assert_eq!(code, 1, "{args:?}: {err}");
            let err_lines: Vec<&str> = err.lines().collect();
            assert_eq!(err_lines.len(), 1, "{err}");
            assert!(err_lines[0].contains(needle), "{needle:?} not in {err}");
            assert!(!Path::new(&out).exists(), "a half-written output was left");
        }
    }
}

// A stream's output has the stream's own format: a name that says otherwise is a usage error
// before anything is written (a Y4M stream into out.png wrote Y4M bytes there, exit 0); and a
// Y4M file among several inputs says it is blurred alone (it failed as an image with "no
// encoder for .y4m").
#[test]
fn a_stream_output_named_as_another_format_is_a_usage_error() {
    let dir = tempdir();
    let d = dir.path();
    clip(d, "a.y4m", "16:8", 2, &["-pix_fmt", "yuv420p"]);
    clip(d, "b.y4m", "16:8", 2, &["-pix_fmt", "yuv420p"]);
    clip(
        d,
        "a.rgb",
        "16:8",
        2,
        &["-f", "rawvideo", "-pix_fmt", "rgb24"],
    );
    let raw = ["--raw", "16x8", "--pix-fmt", "rgb24"];
    let cases: [(&[&str], &str); 5] = [
        (
            &["a.y4m", "-o", "out.png"],
            "out.png: a Y4M stream is blurred into Y4M: name the output .y4m, or give -o - (stdout)",
        ),
        (
            &["a.y4m", "-o", "out.yuv"],
            "out.yuv: a Y4M stream is blurred into Y4M",
        ),
        (
            &["a.rgb", "-o", "out.png"],
            "out.png: raw frames are blurred into raw frames, not an image: name the output \
             .yuv, .rgb or .raw",
        ),
        (
            &["a.rgb", "-o", "out.y4m"],
            "out.y4m: raw frames are blurred into raw frames: name the output",
        ),
        (
            &["a.y4m", "b.y4m", "--out-dir", "o"],
            "a.y4m: a frame stream is blurred on its own: give it as the only input, with -o \
             FILE.y4m or -o - (stdout)",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["--backend", "cpu", "blur"];
        all.extend(args);
        if args[0] == "a.rgb" {
            all.extend(raw);
        }
        crate::util::run_in(Some(d), &all)
            .code(2)
            .one_error_line(needle);
        for out in ["out.png", "out.yuv", "out.y4m", "o"] {
            assert!(!d.join(out).exists(), "{args:?} wrote {out}");
        }
    }
    // Its own format, no extension, or stdout: blurred.
    for (input, out) in [("a.y4m", "out.y4m"), ("a.y4m", "out"), ("a.rgb", "out.rgb")] {
        let mut all = vec!["--backend", "cpu", "blur", input, "-o", out];
        if input == "a.rgb" {
            all.extend(raw);
        }
        crate::util::run_in(Some(d), &all).code(0);
        let (want, got) = (std::fs::read(d.join(input)), std::fs::read(d.join(out)));
        assert_eq!(want.unwrap().len(), got.unwrap().len(), "{input} -o {out}");
    }
}

// A downstream that stops reading early (ffmpeg exiting, `head -c`) ends gpukit quietly with
// exit 0, however many frames were still coming.
#[test]
fn a_downstream_that_closes_early_ends_the_stream_quietly() {
    let dir = tempdir();
    let d = dir.path();
    // Small frames, and frames whose luma plane goes into the pipe by reference
    // (src/io/pipe.rs: writes of 256 KiB and more), read a little or a few frames' worth.
    // GPUKIT_VMSPLICE=1 writes by reference on any machine (by default only on 8 cores or more).
    for (size, read) in [("64:48", 100), ("640:480", 100), ("640:480", 1 << 20)] {
        let input = clip(d, "in.y4m", size, 40, &["-pix_fmt", "yuv420p"]);
        let mut child = gpukit()
            .env("GPUKIT_VMSPLICE", "1")
            .args(["--backend", "cpu", "blur", &input, "-r", "2", "-o", "-"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = vec![0u8; read];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut head)
            .unwrap();
        let want = format!("YUV4MPEG2 W{}", size.replace(':', " H"));
        assert!(head.starts_with(want.as_bytes()), "{size}");
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{size}, {read} bytes read");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }
}

// A stdout pipe that the parent left non-blocking (O_NONBLOCK on the write end it handed
// down): writes used to fail with EAGAIN whenever the reader fell behind ("Resource
// temporarily unavailable", exit 1). The stream now arrives whole for a slow reader.
#[cfg(target_os = "linux")]
#[test]
fn a_non_blocking_stdout_pipe_gets_the_whole_stream() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "640:480", 20, &["-pix_fmt", "yuv420p"]);
    let out = d.join("out.y4m").display().to_string();
    let r = gpukit()
        .args(["--backend", "cpu", "blur", &input, "-r", "2", "-o", &out])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let want = std::fs::read(&out).unwrap();
    for vmsplice in ["0", "1"] {
        let mut fds = [0; 2];
        // SAFETY: room for the two descriptors pipe(2) returns; both are owned from here on.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: plain flags on an open descriptor.
        unsafe {
            let flags = libc::fcntl(fds[1], libc::F_GETFL);
            assert_eq!(
                libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK),
                0
            );
        }
        // The write end goes to gpukit alone (the Command is dropped with the statement), so
        // the reader sees the end of the stream when gpukit exits, however it exits.
        let mut child = gpukit()
            .env("GPUKIT_VMSPLICE", vmsplice)
            .args(["--backend", "cpu", "blur", &input, "-r", "2", "-o", "-"])
            .stdout(Stdio::from(write_end))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A reader slower than the writer: 16 KiB a millisecond at most, so the pipe fills.
        let mut reader = std::fs::File::from(read_end);
        let mut got = Vec::with_capacity(want.len());
        let mut buf = vec![0u8; 16 << 10];
        while got.len() < want.len() {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let status = crate::util::wait_or_hang(&mut child, "gpukit into a non-blocking pipe");
        let err = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        assert!(
            status.success(),
            "GPUKIT_VMSPLICE={vmsplice}: {status:?}: {err}"
        );
        assert_eq!(err, "");
        assert!(
            got == want,
            "GPUKIT_VMSPLICE={vmsplice}: the stream differs"
        );
    }
}

// Frames large enough to go into a pipe by reference arrive in order and whole: stdout
// through a pipe holds the bytes a regular output file gets, on both engines, written by
// reference (GPUKIT_VMSPLICE=1, with 4:2:0's small chroma planes queued behind the luma ones)
// or not.
#[test]
fn large_frames_through_a_pipe_are_the_files_bytes() {
    let dir = tempdir();
    let d = dir.path();
    let input = clip(d, "in.y4m", "640:480", 12, &["-pix_fmt", "yuv420p"]);
    let bytes = std::fs::read(&input).unwrap();
    let engines = [&["--backend", "cpu"][..], &["--device", "0"]];
    for (engine, vmsplice) in engines.iter().flat_map(|e| [(e, "1"), (e, "0")]) {
        let out = d.join("out.y4m").display().to_string();
        let mut args = engine.to_vec();
        args.extend(["blur", &input, "-r", "3", "-o", &out]);
        let r = gpukit().args(&args).output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let file = std::fs::read(&out).unwrap();
        let mut args = engine.to_vec();
        args.extend(["blur", "-", "-r", "3", "-o", "-"]);
        let (code, piped, err) = gpukit_piped_env(&args, &bytes, &[("GPUKIT_VMSPLICE", vmsplice)]);
        assert_eq!(code, 0, "{engine:?}: {err}");
        assert_eq!(piped.len(), file.len(), "{engine:?} {vmsplice}");
        assert!(
            piped == file,
            "{engine:?}, GPUKIT_VMSPLICE={vmsplice}: the piped stream differs from the file"
        );
    }
}

// PNG images one after another (`ffmpeg -f image2pipe`): one line per image, its counts those
// of ffmpeg's rgb24 frames of the same clip (PNG is lossless), no time.
#[test]
fn per_frame_histograms_of_an_image2pipe_stream() {
    let dir = tempdir();
    let d = dir.path();
    let pngs = clip(
        d,
        "in.pngs",
        "24:10",
        3,
        &["-f", "image2pipe", "-vcodec", "png"],
    );
    let rgb = clip(
        d,
        "in.rgb",
        "24:10",
        3,
        &["-f", "rawvideo", "-pix_fmt", "rgb24"],
    );
    let (rgb, stream) = (std::fs::read(rgb).unwrap(), std::fs::read(pngs).unwrap());
    let args = ["--backend", "cpu", "histogram", "-", "--per-frame"];
    let (code, out, err) = gpukit_piped(&args, &stream);
    assert_eq!(code, 0, "{err}");
    let got = lines(&out);
    assert_eq!(got.len(), 3);
    for (i, (line, frame)) in got.iter().zip(rgb.chunks(24 * 10 * 3)).enumerate() {
        assert_eq!(
            (line["frame"].as_u64(), line["width"].as_u64()),
            (Some(i as u64), Some(24))
        );
        assert!(line["time"].is_null());
        let want = counts(frame.chunks(3).map(|p| u32::from(p[1])));
        assert_eq!(channel(line, "green"), want);
    }
    // Cut inside the third image: the first two are written, then one line naming it.
    let (code, out, err) = gpukit_piped(&args, &stream[..stream.len() - 30]);
    assert_eq!((code, lines(&out).len()), (1, 2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stdin: image 3: "), "{err}");
}

// A stream's outputs (-o, --json, --plot-frames) never land on the stream being read: one
// line, exit 2, the input's bytes intact.
#[test]
fn no_output_lands_on_the_stream_being_read() {
    let dir = tempdir();
    // A 2x2 4:2:0 stream of two frames, written by hand.
    let mut y4m = b"YUV4MPEG2 W2 H2 F30:1 C420jpeg\n".to_vec();
    for v in [10u8, 200] {
        y4m.extend(b"FRAME\n");
        y4m.extend([v, v, v, v, 128, 128]);
    }
    let path = dir.path().join("s.y4m");
    std::fs::write(&path, &y4m).unwrap();
    let cases: [&[&str]; 3] = [
        &["blur", "s.y4m", "-r", "1", "-o", "s.y4m"],
        &[
            "histogram",
            "s.y4m",
            "--per-frame",
            "--plot-frames",
            "s.y4m",
        ],
        &["histogram", "s.y4m", "--per-frame", "--json", "s.json"],
    ];
    for (k, args) in cases.iter().enumerate() {
        let r = crate::util::run_in(Some(dir.path()), args);
        if k < 2 {
            r.code(2);
            assert!(
                r.stderr.contains("s.y4m: names an input file"),
                "{args:?}: {}",
                r.stderr
            );
        } else {
            r.code(0);
        }
        assert_eq!(std::fs::read(&path).unwrap(), y4m, "{args:?}");
    }
}

#[cfg(unix)]
#[test]
fn a_y4m_stream_from_a_fifo_is_read_as_from_a_file() {
    // Sniffing the stream opened the path a second time, which for a FIFO waits for another
    // writer: both commands hung for ever.
    let dir = tempdir();
    let d = dir.path();
    let file = clip(d, "s.y4m", "64x48", 5, &["-pix_fmt", "yuv420p"]);
    let want = d.join("want.y4m");
    crate::util::run(&["blur", &file, "-r", "2", "-o", want.to_str().unwrap()]).code(0);
    let fifo = d.join("ff");
    let got = d.join("got.y4m");
    let runs: [(&[&str], &str); 2] = [
        (
            &["blur", "FIFO", "-r", "2", "-o", got.to_str().unwrap()],
            "blur",
        ),
        (&["histogram", "FIFO", "--per-frame"], "histogram"),
    ];
    for (args, what) in runs {
        crate::util::mkfifo(&fifo);
        let bytes = std::fs::read(&file).unwrap();
        let fifo_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            std::fs::write(&fifo_path, bytes).unwrap();
        });
        let args: Vec<&str> = args
            .iter()
            .map(|a| {
                if *a == "FIFO" {
                    fifo.to_str().unwrap()
                } else {
                    a
                }
            })
            .collect();
        let mut child = gpukit()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read on a thread of its own, so that a hang fails the test instead of blocking it.
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).unwrap();
            s
        });
        let status = crate::util::wait_or_hang(&mut child, &format!("{what} from a FIFO"));
        writer.join().unwrap();
        let stdout = reader.join().unwrap();
        assert!(status.success(), "{what}: {status:?}");
        match what {
            "blur" => assert!(std::fs::read(&got).unwrap() == std::fs::read(&want).unwrap()),
            _ => assert_eq!(stdout.lines().count(), 5, "one line a frame: {stdout}"),
        }
        std::fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn a_stream_cut_in_its_last_frame_has_given_every_whole_frame() {
    // Frames sat in a 64 KiB buffer until it filled, and were dropped on the error: a 5-frame
    // 64x48 stream cut in its last frame gave nothing on stdout.
    let dir = tempdir();
    let d = dir.path();
    let file = clip(d, "s.y4m", "64x48", 5, &["-pix_fmt", "yuv420p"]);
    let bytes = std::fs::read(&file).unwrap();
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let frame = 6 + 64 * 48 * 3 / 2;
    assert_eq!(bytes.len(), header + 5 * frame);
    let four = d.join("four.y4m");
    std::fs::write(&four, &bytes[..header + 4 * frame]).unwrap();
    let want = d.join("want.y4m");
    crate::util::run(&[
        "blur",
        four.to_str().unwrap(),
        "-r",
        "2",
        "-o",
        want.to_str().unwrap(),
    ])
    .code(0);
    let cut = d.join("cut.y4m");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let out = gpukit()
        .args(["blur", "-", "-r", "2", "-o", "-"])
        .stdin(std::fs::File::open(&cut).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("frame 4 is cut short"), "{err}");
    assert!(
        out.stdout == std::fs::read(&want).unwrap(),
        "the four whole frames, blurred"
    );
}
