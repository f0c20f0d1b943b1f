//! Batches of files through the pipeline: every output equals the CPU reference whatever the
//! number of jobs, a bad file fails alone, re-runs skip what is done, and the inputs come from
//! folders, globs and lists the way batch scripts have them.

use std::path::{Path, PathBuf};

use gpukit::io::image;
use gpukit::ops::blur::{reference as blur_cpu, Kind, Options as BlurParams};

use crate::util::{gpukit, gpukit_as_nobody, run_in, tempdir};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A batch of mixed sizes, depths and layouts: gray, gray+alpha, RGB, RGBA, palette, 8 and
/// 16 bits, and the 512x512 hopper.
const MIXED: &[&str] = &[
    "pngsuite/basn0g08.png",
    "pngsuite/basn0g16.png",
    "pngsuite/basn2c08.png",
    "pngsuite/basn2c16.png",
    "pngsuite/basn3p04.png",
    "pngsuite/basn4a08.png",
    "pngsuite/basn6a16.png",
    "pngsuite/s35i3p04.png",
    "hopper.png",
];

/// Copies the MIXED files into `dir/in`, some in a subfolder.
fn mixed_tree(dir: &Path) -> Vec<PathBuf> {
    let mut rels = Vec::new();
    for (i, f) in MIXED.iter().enumerate() {
        let name = Path::new(f).file_name().unwrap();
        let rel = if i % 3 == 0 {
            Path::new("sub").join(name)
        } else {
            PathBuf::from(name)
        };
        let to = dir.join("in").join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fixture(f), &to).unwrap();
        rels.push(rel);
    }
    rels
}

/// The JSON document at `path`.
fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[track_caller]
fn assert_blurred(input: &Path, output: &Path, radius: u32) {
    let want = blur_cpu(
        &image::load(input).unwrap(),
        &BlurParams::new(Kind::Box, radius, 1),
    )
    .unwrap();
    let got = image::load(output).unwrap();
    assert!(
        got == want,
        "{} differs from the reference",
        output.display()
    );
}

#[test]
fn a_recursive_batch_equals_the_reference_for_any_number_of_jobs() {
    let dir = tempdir();
    let d = dir.path();
    let rels = mixed_tree(d);
    // The default engine (the native CPU engine where there is no GPU) and the GPU path on
    // lavapipe, where 8 jobs give two engine threads, each keeping its plan between images.
    for (backend, jobs) in [("default", "1"), ("default", "2"), ("default", "8")]
        .into_iter()
        .chain([("vulkan", "1"), ("vulkan", "8")])
    {
        let out = format!("out-{backend}{jobs}");
        let mut args = vec![
            "blur",
            "in",
            "--recursive",
            "-r",
            "2",
            "--out-dir",
            &out,
            "-j",
            jobs,
        ];
        if backend != "default" {
            args.extend(["--backend", backend]);
        }
        let r = run_in(Some(d), &args);
        r.code(0);
        for rel in &rels {
            assert_blurred(&d.join("in").join(rel), &d.join(&out).join(rel), 2);
        }
        // The tree is kept: sub/ holds the files that came from sub/.
        assert!(d.join(&out).join("sub").is_dir());
    }
}

#[test]
fn a_batch_that_writes_nothing_leaves_no_out_dir_behind() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("bad.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    // A folder that was there before is kept, empty; one the run made (with its parent) goes.
    std::fs::create_dir(d.join("kept")).unwrap();
    for out in ["new/out", "kept"] {
        let r = run_in(Some(d), &["blur", "bad.png", "--out-dir", out, "-r", "1"]);
        r.code(1);
        assert!(r.stderr.starts_with("gpukit: bad.png: "), "{}", r.stderr);
    }
    assert!(!d.join("new").exists());
    assert_eq!(std::fs::read_dir(d.join("kept")).unwrap().count(), 0);
    // One good input among bad ones: the folder stays with what was written.
    std::fs::copy(fixture("pngsuite/basn2c08.png"), d.join("good.png")).unwrap();
    let r = run_in(
        Some(d),
        &[
            "blur",
            "bad.png",
            "good.png",
            "--out-dir",
            "new/out",
            "-r",
            "1",
        ],
    );
    r.code(1);
    assert_blurred(&d.join("good.png"), &d.join("new/out/good.png"), 1);
}

#[test]
fn a_corrupt_file_in_the_middle_fails_alone_and_the_report_says_so() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    for f in ["a.png", "c.png"] {
        std::fs::copy(fixture("pngsuite/basn2c08.png"), d.join("in").join(f)).unwrap();
    }
    std::fs::write(d.join("in/b.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let r = run_in(
        Some(d),
        &[
            "blur",
            "in",
            "--out-dir",
            "out",
            "--report",
            "report.json",
            "-r",
            "1",
        ],
    );
    r.code(1);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(lines[0].starts_with("gpukit: in/b.png: "), "{}", r.stderr);
    assert_eq!(
        lines.last().unwrap().split(" in ").next().unwrap(),
        "gpukit: 2 done, 0 skipped, 1 failed",
        "{}",
        r.stderr
    );
    assert_blurred(&d.join("in/a.png"), &d.join("out/a.png"), 1);
    assert_blurred(&d.join("in/c.png"), &d.join("out/c.png"), 1);
    assert!(!d.join("out/b.png").exists());

    let report = json(&d.join("report.json"));
    assert_eq!(report["command"], "blur");
    let files = report["files"].as_array().unwrap();
    let status: Vec<&str> = files
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["ok", "failed", "ok"]);
    assert_eq!(files[1]["input"], "in/b.png");
    assert!(files[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("in/b.png: "));
    assert!(files[0]["error"].is_null());
    for stage in [
        "decode_ms",
        "wait_ms",
        "engine_ms",
        "encode_wait_ms",
        "encode_ms",
    ] {
        assert!(files[0]["times"][stage].as_f64().unwrap() >= 0.0, "{stage}");
    }
    let summary = &report["summary"];
    assert_eq!(
        (
            summary["files"].as_u64(),
            summary["done"].as_u64(),
            summary["failed"].as_u64()
        ),
        (Some(3), Some(2), Some(1))
    );
}

/// As if an earlier run into `out` had finished the first two of `rels` and been
/// interrupted: their outputs hold other bytes, so any rewrite would show.
fn done_before(out: &Path, rels: &[PathBuf]) {
    std::fs::create_dir_all(out.join("sub")).unwrap();
    for rel in &rels[..2] {
        std::fs::write(out.join(rel), b"done before").unwrap();
    }
}

/// After a resumed run: the two outputs [`done_before`] made are untouched, and the rest are
/// blurred (r = 3).
#[track_caller]
fn assert_resumed(input: &Path, out: &Path, rels: &[PathBuf]) {
    for rel in &rels[..2] {
        assert_eq!(std::fs::read(out.join(rel)).unwrap(), b"done before");
    }
    for rel in &rels[2..] {
        assert_blurred(&input.join(rel), &out.join(rel), 3);
    }
}

#[test]
fn skip_existing_finishes_an_interrupted_batch_and_touches_nothing_done() {
    let dir = tempdir();
    let d = dir.path();
    let rels = mixed_tree(d);
    done_before(&d.join("out"), &rels);
    let resume = [
        "blur",
        "in",
        "--recursive",
        "--out-dir",
        "out",
        "--skip-existing",
    ];
    let r = run_in(Some(d), &[&resume[..], &["--report", "-"]].concat());
    r.code(0);
    let note = format!("2 of {} outputs exist already: left alone", rels.len());
    assert!(r.stderr.contains(&note), "{}", r.stderr);
    assert_resumed(&d.join("in"), &d.join("out"), &rels);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["summary"]["skipped"], 2);
    assert_eq!(report["summary"]["done"], rels.len() - 2);
    // A folder standing where an output should be is not a finished output: that file fails.
    let rel = &rels[2];
    std::fs::remove_file(d.join("out").join(rel)).unwrap();
    std::fs::create_dir(d.join("out").join(rel)).unwrap();
    let r = run_in(Some(d), &resume);
    r.code(1);
    assert!(
        r.stderr.contains(&rel.display().to_string()),
        "{}",
        r.stderr
    );
}

#[test]
fn skip_existing_holds_for_one_named_output_and_never_for_stdout() {
    let dir = tempdir();
    let d = dir.path();
    let hopper = fixture("pngsuite/basn2c08.png");
    let hopper = hopper.to_str().unwrap();
    // `-o FILE`: an output there is left alone (its help said "With --out-dir", and it was
    // taken with -o all the same); a missing one is written.
    std::fs::write(d.join("done.png"), b"done").unwrap();
    for out in ["done.png", "new.png"] {
        let args = [
            "blur",
            hopper,
            "-o",
            out,
            "--skip-existing",
            "--report",
            "-",
        ];
        let r = run_in(Some(d), &args);
        r.code(0);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let skipped = usize::from(out == "done.png");
        assert_eq!(report["summary"]["skipped"], skipped, "{out}");
        // A skip is said on stderr (it was silent).
        let said = r.stderr.contains("done.png: exists already: left alone");
        assert_eq!(said, skipped == 1, "{out}: {}", r.stderr);
    }
    assert_eq!(std::fs::read(d.join("done.png")).unwrap(), b"done");
    assert_blurred(Path::new(hopper), &d.join("new.png"), 3);
    // `-o -`: stdout is written, whatever a file named `-` here holds.
    std::fs::write(d.join("-"), b"done").unwrap();
    let r = gpukit()
        .current_dir(d)
        .args(["blur", hopper, "-o", "-", "--skip-existing"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(r.stdout.starts_with(b"\x89PNG"), "{} bytes", r.stdout.len());
}

#[test]
fn an_output_folder_within_the_input_tree_is_not_taken_as_input_again() {
    let dir = tempdir();
    let d = dir.path();
    let rels = mixed_tree(d);
    done_before(&d.join("in/soft"), &rels);
    for input in ["in", "in/**/*.png"] {
        let r = run_in(
            Some(d),
            &[
                "blur",
                input,
                "--recursive",
                "--out-dir",
                "./in/soft/",
                "--skip-existing",
                "--report",
                "-",
            ],
        );
        r.code(0);
        let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(
            report["files"].as_array().unwrap().len(),
            rels.len(),
            "{input}"
        );
        assert_resumed(&d.join("in"), &d.join("in/soft"), &rels);
        assert!(!d.join("in/soft/soft").exists(), "{input}");
    }
}

#[test]
fn a_report_that_cannot_be_written_fails_before_anything_is_made() {
    let dir = tempdir();
    let d = dir.path();
    let hopper = fixture("hopper.png");
    let hopper = hopper.to_str().unwrap();
    // The image and the report on one stream would mix their bytes.
    for (out, report) in [("-", "-"), ("same.json", "same.json")] {
        run_in(Some(d), &["blur", hopper, "-o", out, "--report", report])
            .code(2)
            .one_error_line(&format!("-o and --report both name {report}"));
    }
    // The option named is the one given, and no output folder is left behind.
    run_in(
        Some(d),
        &["blur", hopper, "--out-dir", "out", "--report", "report.txt"],
    )
    .code(2)
    .one_error_line("--report report.txt: a JSON file's name must end in .json");
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
}

#[test]
fn files_from_takes_nul_separated_odd_names_on_stdin() {
    use std::io::Write;
    let dir = tempdir();
    let d = dir.path();
    let names = ["with space.png", "ünïcødé.png", "new\nline.png"];
    std::fs::create_dir(d.join("in")).unwrap();
    let mut list = Vec::new();
    for n in names {
        std::fs::copy(fixture("pngsuite/basn0g08.png"), d.join("in").join(n)).unwrap();
        list.extend_from_slice(format!("in/{n}").as_bytes());
        list.push(0);
    }
    let mut child = gpukit()
        .args(["blur", "--files-from", "-", "--out-dir", "out", "-r", "1"])
        .current_dir(d)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&list).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in names {
        // A listed relative path keeps its folders under --out-dir.
        assert_blurred(&d.join("in").join(n), &d.join("out/in").join(n), 1);
    }
}

#[test]
fn a_quoted_glob_is_expanded_and_out_format_converts() {
    let dir = tempdir();
    let d = dir.path();
    let rels = mixed_tree(d);
    let r = run_in(
        Some(d),
        &[
            "blur",
            "in/**/basn[02]*.png",
            "--out-dir",
            "out",
            "--out-format",
            "tif",
            "-r",
            "1",
        ],
    );
    r.code(0);
    let mut n = 0;
    let chosen = |r: &&PathBuf| {
        let name = r.file_name().unwrap().to_str().unwrap();
        name.starts_with("basn0") || name.starts_with("basn2")
    };
    for rel in rels.iter().filter(chosen) {
        // The glob's fixed prefix is `in`: the tree below it is kept.
        let got = d.join("out").join(rel).with_extension("tif");
        assert_blurred(&d.join("in").join(rel), &got, 1);
        n += 1;
    }
    assert_eq!(n, 4);
}

/// The glob crate passes over names that are not UTF-8; gpukit's glob takes them.
#[cfg(unix)]
#[test]
fn a_glob_takes_names_that_are_not_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempdir();
    let d = dir.path();
    let odd = |bytes: &[u8]| PathBuf::from(OsStr::from_bytes(bytes));
    let rels = [
        odd(b"a.png"),
        odd(b"b\xff.png"),
        odd(b"sub\xfe/c.png"),
        odd(b"sub\xfe/d\xff.png"),
    ];
    for rel in &rels {
        let path = d.join("in").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::copy(fixture("pngsuite/basn2c08.png"), path).unwrap();
    }
    for (pattern, taken) in [
        ("in/*.png", &[0, 1][..]),
        ("in/**/*.png", &[0, 1, 2, 3][..]),
        // `?` matches one character: a byte that is not UTF-8 is one.
        ("in/b?.png", &[1][..]),
        ("in/s*/d?.png", &[3][..]),
    ] {
        let out = d.join("out");
        let _ = std::fs::remove_dir_all(&out);
        let r = run_in(Some(d), &["blur", pattern, "--out-dir", "out", "-r", "1"]);
        r.code(0);
        let done = format!("gpukit: {} done, 0 skipped, 0 failed", taken.len());
        // One file: no summary line.
        let quiet = r.stderr.is_empty() && taken.len() == 1;
        assert!(
            quiet || r.stderr.starts_with(&done),
            "{pattern}: {}",
            r.stderr
        );
        for (i, rel) in rels.iter().enumerate() {
            let got = out.join(rel);
            assert_eq!(got.exists(), taken.contains(&i), "{pattern}: {rel:?}");
            if got.exists() {
                assert_blurred(&d.join("in").join(rel), &got, 1);
            }
        }
    }
}

#[test]
fn a_batch_over_its_own_inputs_needs_overwrite() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    let input = d.join("in/a.png");
    std::fs::copy(fixture("pngsuite/basn2c08.png"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    run_in(Some(d), &["blur", "in/a.png", "--out-dir", "in"])
        .code(2)
        .one_error_line("add --overwrite");
    assert_eq!(std::fs::read(&input).unwrap(), before);
    run_in(
        Some(d),
        &[
            "blur",
            "in/a.png",
            "--out-dir",
            "./in/",
            "--overwrite",
            "-r",
            "1",
        ],
    )
    .code(0);
    let want = blur_cpu(
        &image::decode(&before).unwrap(),
        &BlurParams::new(Kind::Box, 1, 1),
    )
    .unwrap();
    assert!(image::load(&input).unwrap() == want);
}

#[test]
fn histogram_of_a_folder_writes_what_it_counted_and_lists_the_failure() {
    use gpukit::ops::histogram::{reference as histogram_cpu, Channels};
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir_all(d.join("in/deep")).unwrap();
    std::fs::copy(fixture("pngsuite/basn2c08.png"), d.join("in/a.png")).unwrap();
    std::fs::copy(fixture("hopper.png"), d.join("in/deep/c.png")).unwrap();
    std::fs::write(d.join("in/b.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let r = run_in(
        Some(d),
        &[
            "histogram",
            "in",
            "--recursive",
            "--sum",
            "--json",
            "h.json",
            "-j",
            "2",
        ],
    );
    r.code(1)
        .batch_errors(&["in/b.png"], "2 done, 0 skipped, 1 failed");
    let doc = json(&d.join("h.json"));
    let inputs = doc["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2);
    for (input, path) in inputs.iter().zip(["in/a.png", "in/deep/c.png"]) {
        assert_eq!(input["path"], path);
        let img = image::load(&d.join(path)).unwrap();
        let want = histogram_cpu(&img, Channels::of(img.channels, false), 256);
        for (c, channel) in input["channels"].as_array().unwrap().iter().enumerate() {
            let counts: Vec<u64> = channel["counts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(counts, want.channel(c), "{path} channel {c}");
        }
    }
    assert_eq!(doc["failed"][0]["path"], "in/b.png");
    // A sum over some of the inputs would be wrong: there is none.
    assert!(doc["sum"].is_null());
}

#[test]
fn histogram_errors_come_in_input_order_whichever_stage_finds_them() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    // b's header reads but its data ends early (found when decoding); c is empty and d is
    // no image (found when the header is read, before any decoding).
    let hopper = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("in/a.png"), &hopper).unwrap();
    std::fs::write(d.join("in/b.png"), &hopper[..3000]).unwrap();
    std::fs::write(d.join("in/c.png"), b"").unwrap();
    std::fs::write(d.join("in/d.png"), b"hello").unwrap();
    std::fs::write(d.join("in/e.png"), &hopper).unwrap();
    for jobs in ["1", "4"] {
        let r = run_in(
            Some(d),
            &["histogram", "in", "--json", "h.json", "-j", jobs],
        );
        r.code(1).batch_errors(
            &["in/b.png: ", "in/c.png: ", "in/d.png: "],
            "2 done, 0 skipped, 3 failed",
        );
        let doc = json(&d.join("h.json"));
        let failed: Vec<&str> = doc["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["in/b.png", "in/c.png", "in/d.png"]);
        assert_eq!(doc["inputs"].as_array().unwrap().len(), 2);
    }
}

/// The files of `dir/in` a `--shard` run wrote under `out`.
fn written(out: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(out)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn shards_split_a_folder_into_disjoint_parts_from_flags_or_the_scheduler() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    let mut all = Vec::new();
    for i in 0..12 {
        let name = format!("f{i:02}.png");
        std::fs::copy(fixture("pngsuite/basn0g08.png"), d.join("in").join(&name)).unwrap();
        all.push(name);
    }
    let mut union = Vec::new();
    for i in 1..=3 {
        let out = format!("out{i}");
        let shard = format!("{i}/3");
        run_in(
            Some(d),
            &[
                "blur",
                "in",
                "--out-dir",
                &out,
                "--shard",
                &shard,
                "-r",
                "1",
            ],
        )
        .code(0);
        union.extend(written(&d.join(&out)));
    }
    union.sort();
    assert_eq!(union, all, "every file in exactly one shard");

    // Slurm's array index (here 11..13; task 13 is part 13 mod 3 = 1, the second) and Kubernetes' index
    // (0-based, with the count from GPUKIT_SHARD_COUNT) pick the same parts as the flag.
    let by_flag = written(&d.join("out2"));
    let slurm = gpukit()
        .args(["blur", "in", "--out-dir", "slurm", "-r", "1"])
        .current_dir(d)
        .envs([
            ("SLURM_ARRAY_TASK_ID", "13"),
            ("SLURM_ARRAY_TASK_MIN", "11"),
            ("SLURM_ARRAY_TASK_MAX", "13"),
        ])
        .output()
        .unwrap();
    assert!(
        slurm.status.success(),
        "{}",
        String::from_utf8_lossy(&slurm.stderr)
    );
    assert_eq!(written(&d.join("slurm")), by_flag);
    let k8s = gpukit()
        .args(["blur", "in", "--out-dir", "k8s", "-r", "1"])
        .current_dir(d)
        .envs([("JOB_COMPLETION_INDEX", "1"), ("GPUKIT_SHARD_COUNT", "3")])
        .output()
        .unwrap();
    assert!(
        k8s.status.success(),
        "{}",
        String::from_utf8_lossy(&k8s.stderr)
    );
    assert_eq!(written(&d.join("k8s")), by_flag);
    // The flag wins over the environment.
    let flag = gpukit()
        .args([
            "blur",
            "in",
            "--out-dir",
            "flag",
            "-r",
            "1",
            "--shard",
            "2/3",
        ])
        .current_dir(d)
        .envs([("JOB_COMPLETION_INDEX", "0"), ("GPUKIT_SHARD_COUNT", "3")])
        .output()
        .unwrap();
    assert!(flag.status.success());
    assert_eq!(written(&d.join("flag")), by_flag);
    // An index without a count is a usage error.
    let bad = gpukit()
        .args(["blur", "in", "--out-dir", "bad"])
        .current_dir(d)
        .env("JOB_COMPLETION_INDEX", "0")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--shard-count"));
    // Both flags, with other counts: a usage error before any file is read (it took the
    // first); the same count is fine.
    run_in(
        Some(d),
        &[
            "blur",
            "in",
            "--out-dir",
            "both",
            "--shard",
            "1/2",
            "--shard-count",
            "3",
        ],
    )
    .code(2)
    .one_error_line("--shard 1/2 and --shard-count 3 disagree on the number of shards");
    assert!(!d.join("both").exists());
    let args = [
        "blur",
        "in",
        "--out-dir",
        "both",
        "-r",
        "1",
        "--shard",
        "2/3",
    ];
    run_in(Some(d), &[&args[..], &["--shard-count", "3"]].concat()).code(0);
    assert_eq!(written(&d.join("both")), by_flag);
}

#[test]
fn merged_histograms_of_shards_equal_the_unsharded_run() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    for f in [
        "basn2c08", "f00n2c08", "f01n2c08", "f02n2c08", "f03n2c08", "f04n2c08", "g03n2c08",
        "g04n2c08", "g05n2c08", "g07n2c08", "g10n2c08", "g25n2c08",
    ] {
        let from = fixture(&format!("pngsuite/{f}.png"));
        std::fs::copy(from, d.join("in").join(format!("{f}.png"))).unwrap();
    }
    let read = |name: &str| json(&d.join(name));
    run_in(Some(d), &["histogram", "in", "--sum", "--json", "all.json"]).code(0);
    let mut shards = Vec::new();
    for i in 1..=3 {
        let json = format!("s{i}.json");
        let shard = format!("{i}/3");
        run_in(
            Some(d),
            &[
                "histogram",
                "in",
                "--sum",
                "--shard",
                &shard,
                "--json",
                &json,
            ],
        )
        .code(0);
        assert!(!read(&json)["inputs"].as_array().unwrap().is_empty());
        shards.push(json);
    }
    let mut args = vec!["histogram", "--merge", "--json", "merged.json"];
    args.extend(shards.iter().map(String::as_str));
    run_in(Some(d), &args).code(0);
    assert_eq!(read("merged.json"), read("all.json"));
    // Documents of different runs are refused.
    run_in(
        Some(d),
        &["histogram", "in", "--bins", "16", "--json", "b16.json"],
    )
    .code(0);
    run_in(Some(d), &["histogram", "--merge", "s1.json", "b16.json"])
        .code(1)
        .one_error_line("bins");
}

/// The peak resident memory of a gpukit run, read from /proc while it runs (VmHWM only grows,
/// so the last reading is the peak but for the last few milliseconds).
#[cfg(target_os = "linux")]
fn peak_rss_kib(args: &[&str], dir: &Path) -> u64 {
    let mut child = gpukit()
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = PathBuf::from(format!("/proc/{}/status", child.id()));
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
        peak = peak.max(hwm.unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(child.wait().unwrap().success());
    peak
}

// A batch must not decode ahead of what it can process: memory is bounded by the queue
// depth, not by the number of files.
#[cfg(target_os = "linux")]
#[test]
fn memory_stays_bounded_however_many_files_a_batch_has() {
    let dir = tempdir();
    let d = dir.path();
    // A 640x640 RGB photo-sized image: 1.2 MB decoded, so holding 18 more of them at once
    // would add over 20 MB.
    let (w, h) = (640u32, 640u32);
    let mut next = crate::util::xorshift(7);
    let data: Vec<u8> = (0..w * h * 3).map(|_| next() as u8).collect();
    let img = gpukit::io::image::Image::new_u8(w, h, 3, data);
    image::save(&d.join("one.png"), img).unwrap();
    for (folder, n) in [("few", 2), ("many", 20)] {
        std::fs::create_dir(d.join(folder)).unwrap();
        for i in 0..n {
            std::fs::copy(d.join("one.png"), d.join(folder).join(format!("{i}.png"))).unwrap();
        }
    }
    let run = |folder: &str| {
        let out = format!("out-{folder}");
        let args = [
            "--backend",
            "cpu",
            "blur",
            folder,
            "-r",
            "1",
            "-j",
            "1",
            "--out-dir",
            &out,
        ];
        peak_rss_kib(&args, d)
    };
    let (few, many) = (run("few"), run("many"));
    assert!(
        many < few + 10 * 1024,
        "peak RSS {many} KiB for 20 files against {few} KiB for 2"
    );
    assert_eq!(std::fs::read_dir(d.join("out-many")).unwrap().count(), 20);
}

// Several devices share one batch (`--device 0,0`: two devices on the one adapter CI has);
// the outputs are those of one device, and the report says which device did each file.
#[test]
fn a_batch_over_two_devices_equals_the_reference_and_says_who_did_what() {
    let dir = tempdir();
    let d = dir.path();
    let rels = mixed_tree(d);
    for device in ["0,0", "all"] {
        let out = format!("out-{}", device.replace(',', "-"));
        let args = [
            "--device",
            device,
            "blur",
            "in",
            "--recursive",
            "-r",
            "2",
            "--out-dir",
            &out,
            "-j",
            "2",
            "--report",
            "-",
        ];
        let r = run_in(Some(d), &args);
        r.code(0);
        for rel in &rels {
            assert_blurred(&d.join("in").join(rel), &d.join(&out).join(rel), 2);
        }
        let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let devices = report["devices"].as_array().unwrap().len();
        assert_eq!(devices, if device == "0,0" { 2 } else { 1 }, "{device}");
        for f in report["files"].as_array().unwrap() {
            assert!(f["device"].as_u64().unwrap() < devices as u64, "{f}");
        }
    }
}

#[test]
fn merged_reports_of_shards_list_every_file_as_the_unsharded_report_does() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    for i in 0..8 {
        let name = format!("f{i}.png");
        std::fs::copy(fixture("pngsuite/basn0g08.png"), d.join("in").join(name)).unwrap();
    }
    std::fs::write(d.join("in/bad.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let read = |name: &str| json(&d.join(name));
    let blur = |extra: &[&str], report: &str| {
        let mut args = vec![
            "blur",
            "in",
            "--out-dir",
            "out",
            "-r",
            "1",
            "--report",
            report,
        ];
        args.extend_from_slice(extra);
        run_in(Some(d), &args)
    };
    blur(&[], "all.json").code(1);
    std::fs::remove_dir_all(d.join("out")).unwrap();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        blur(&["--shard", &shard], &format!("s{i}.json"));
    }
    let r = run_in(
        Some(d),
        &["merge", "s1.json", "s2.json", "s3.json", "--json", "m.json"],
    );
    r.code(0);
    let (all, merged) = (read("all.json"), read("m.json"));
    let what = |doc: &serde_json::Value| -> Vec<(String, String, String)> {
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                (s("input"), s("output"), s("status"))
            })
            .collect()
    };
    assert_eq!(what(&merged), what(&all));
    assert_eq!(merged["devices"], all["devices"]);
    for key in ["files", "done", "skipped", "failed"] {
        assert_eq!(merged["summary"][key], all["summary"][key], "{key}");
    }
}

/// The pipelines a batch builds: "(N built" of `--timings`' pipelines line.
fn pipelines_built(stderr: &str) -> u32 {
    let line = stderr.lines().find(|l| l.contains("timing: pipelines"));
    let line = line.unwrap_or_else(|| panic!("no pipelines line in {stderr}"));
    let n = line.split('(').nth(1).and_then(|s| s.split(' ').next());
    n.and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"))
}

/// Engine threads that ask for the same pipeline at once get one build of it: a batch on
/// four engine threads builds as many pipelines as on one.
#[test]
fn engine_threads_share_each_pipeline_build() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir_all(d.join("in")).unwrap();
    for i in 0..8 {
        std::fs::copy(fixture("hopper.png"), d.join(format!("in/h{i}.png"))).unwrap();
    }
    let mut counts = Vec::new();
    for jobs in ["1", "16"] {
        let out = format!("out{jobs}");
        let args = [
            "--backend",
            "vulkan",
            "--no-pipeline-cache",
            "--timings",
            "blur",
            "in",
            "-r",
            "2",
            "--out-dir",
            &out,
            "-j",
            jobs,
        ];
        let r = run_in(Some(d), &args);
        r.code(0);
        counts.push(pipelines_built(&r.stderr));
        assert_blurred(&d.join("in/h0.png"), &d.join(&out).join("h0.png"), 2);
        assert_blurred(&d.join("in/h7.png"), &d.join(&out).join("h7.png"), 2);
    }
    assert!(counts[0] > 0, "{counts:?}");
    assert_eq!(
        counts[0], counts[1],
        "pipelines built on 1 and 4 engine threads"
    );
}

// Issue 24: `blur --device 5` (or a name, or GPUKIT_DEVICE, matching no adapter) panicked
// with "every file ends" where histogram and compare failed cleanly; a thread that could
// not be started (a process limit) panicked too, and could then deadlock.
#[test]
fn no_device_and_no_thread_are_errors_not_panics() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempdir();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::copy(fixture("hopper.png"), d.join("a.png")).unwrap();
    std::fs::copy(fixture("hopper.png"), d.join("b.png")).unwrap();
    for (args, env) in [
        (
            &["blur", "a.png", "-r", "1", "-o", "o.png", "--device", "5"][..],
            None,
        ),
        (
            &[
                "blur",
                "a.png",
                "b.png",
                "-r",
                "1",
                "--out-dir",
                "o",
                "--device",
                "no such gpu",
            ],
            None,
        ),
        (&["blur", "a.png", "-r", "1", "-o", "o.png"], Some("7")),
    ] {
        let mut cmd = gpukit();
        cmd.current_dir(d).args(args);
        if let Some(v) = env {
            cmd.env("GPUKIT_DEVICE", v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("no adapter"), "{err}");
    }
    let empty = |p: &Path| std::fs::read_dir(p).map_or(true, |mut r| r.next().is_none());
    assert!(!d.join("o.png").exists() && empty(&d.join("o")));
    // One process allowed to the user: no thread can start.
    for args in [
        &[
            "--backend",
            "cpu",
            "blur",
            "a.png",
            "b.png",
            "-r",
            "1",
            "--out-dir",
            "o",
        ][..],
        &["--backend", "cpu", "histogram", "a.png", "b.png"],
    ] {
        let mut cmd = gpukit_as_nobody();
        cmd.current_dir(d).args(args);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let one = libc::rlimit {
                    rlim_cur: 1,
                    rlim_max: 1,
                };
                if libc::setrlimit(libc::RLIMIT_NPROC, &one) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("cannot start"), "{err}");
    }
    assert!(empty(&d.join("o")));
}

// Issue 24: one folder --recursive cannot list failed the whole batch, with a message that
// named the folder twice; it fails as one input now, and the others are done.
#[test]
fn an_unreadable_subfolder_fails_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let d = dir.path();
    for sub in ["in/ok", "in/locked"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::copy(fixture("hopper.png"), d.join("in/a.png")).unwrap();
    std::fs::copy(fixture("hopper.png"), d.join("in/ok/c.png")).unwrap();
    std::fs::copy(fixture("hopper.png"), d.join("in/locked/b.png")).unwrap();
    for p in [d, &d.join("in"), &d.join("in/ok")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    for f in ["in/a.png", "in/ok/c.png"] {
        std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(d.join("in/locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = gpukit_as_nobody()
        .current_dir(d)
        .args([
            "--backend",
            "cpu",
            "histogram",
            "in",
            "--recursive",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    std::fs::set_permissions(d.join("in/locked"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let done: Vec<&str> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(done, ["in/a.png", "in/ok/c.png"]);
    let failed = doc["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    let line = err
        .lines()
        .find(|l| l.contains("in/locked"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("in/locked: cannot list the folder: Permission denied"),
        "{line}"
    );
    assert_eq!(line.matches("in/locked").count(), 1, "{line}");
}
