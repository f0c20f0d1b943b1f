//! `compare` for CI jobs: the JUnit report (read back with an XML parser and held against
//! the counts known for the fixture pair), `--update` and its interruption, `--allow-missing`
//! and `--allow-extra`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpukit::io::image;

use crate::util::{gpukit, random_image, run, tempdir};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/compare")
        .join(name)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Two folders: `same.png` equal, `sub/changed.png` the fixture pair (18 differing pixels of
/// 384), `gone.png` only in golden, `new.png` only in out.
fn folders(root: &Path) -> (PathBuf, PathBuf) {
    let (golden, out) = (root.join("golden"), root.join("out"));
    for p in [golden.join("sub"), out.join("sub")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let (e, a) = (fixture("expected.png"), fixture("actual.png"));
    for (to, from) in [
        (golden.join("same.png"), &e),
        (out.join("same.png"), &e),
        (golden.join("sub/changed.png"), &e),
        (out.join("sub/changed.png"), &a),
        (golden.join("gone.png"), &e),
        (out.join("new.png"), &a),
    ] {
        std::fs::copy(from, to).unwrap();
    }
    (golden, out)
}

/// One `testcase` of a JUnit report: its name, and its child elements with their attributes
/// (`failure`, `error`, `skipped`, `system-out`).
type Case = (String, BTreeMap<String, BTreeMap<String, String>>);

/// The `testsuite` element's attributes and its test cases, read with xml-rs.
fn read_junit(path: &Path) -> (BTreeMap<String, String>, Vec<Case>) {
    use xml::reader::{EventReader, XmlEvent};
    let file = std::fs::File::open(path).unwrap();
    let mut suite = BTreeMap::new();
    let mut cases: Vec<Case> = Vec::new();
    for e in EventReader::new(std::io::BufReader::new(file)) {
        if let XmlEvent::StartElement {
            name, attributes, ..
        } = e.expect("well-formed XML")
        {
            let attrs: BTreeMap<String, String> = attributes
                .into_iter()
                .map(|a| (a.name.local_name, a.value))
                .collect();
            match name.local_name.as_str() {
                "testsuite" => suite = attrs,
                "testcase" => cases.push((attrs["name"].clone(), BTreeMap::new())),
                "testsuites" => {}
                other => {
                    let case = cases.last_mut().expect("inside a testcase");
                    case.1.insert(other.to_string(), attrs);
                }
            }
        }
    }
    (suite, cases)
}

#[test]
fn junit_report_has_a_case_per_file_with_counts_and_the_diff() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    let (xml, diffs) = (dir.path().join("r.xml"), dir.path().join("diffs"));
    run(&[
        "compare",
        &s(&golden),
        &s(&out),
        "--junit",
        &s(&xml),
        "--diff",
        &s(&diffs),
    ])
    .code(1);
    let (suite, cases) = read_junit(&xml);
    assert_eq!(suite["tests"], "4");
    assert_eq!(suite["failures"], "3");
    assert_eq!(suite["errors"], "0");
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        ["same.png", "sub/changed.png", "gone.png", "new.png"]
    );
    assert!(!cases[0].1.contains_key("failure"));
    let failure = &cases[1].1["failure"];
    assert_eq!(failure["type"], "mismatch");
    let diff = s(&diffs.join("sub/changed.png"));
    assert!(
        failure["message"].contains("18 of 384 pixels differ")
            && failure["message"].contains(&diff),
        "{failure:?}"
    );
    assert_eq!(cases[2].1["failure"]["type"], "missing");
    assert_eq!(cases[3].1["failure"]["type"], "extra");
    // Allowed, the unpaired files are skipped, not failed; one pair still fails.
    run(&[
        "compare",
        &s(&golden),
        &s(&out),
        "--junit",
        &s(&xml),
        "--allow-missing",
        "--allow-extra",
    ])
    .code(1);
    let (suite, cases) = read_junit(&xml);
    assert_eq!(
        (suite["failures"].as_str(), suite["skipped"].as_str()),
        ("1", "2")
    );
    assert!(cases[2].1.contains_key("skipped") && cases[3].1.contains_key("skipped"));
    // An unreadable file is an error case, and a single pair is one case named after ACTUAL.
    std::fs::write(out.join("same.png"), b"broken").unwrap();
    run(&["compare", &s(&golden), &s(&out), "--junit", &s(&xml)]).code(2);
    let (suite, cases) = read_junit(&xml);
    assert_eq!(suite["errors"], "1");
    assert!(cases[0].1["error"]["message"].contains("same.png"));
    let (e, a) = (fixture("expected.png"), fixture("actual.png"));
    run(&["compare", &s(&e), &s(&a), "--junit", &s(&xml)]).code(1);
    let (suite, cases) = read_junit(&xml);
    assert_eq!(
        (suite["tests"].as_str(), cases[0].0.as_str()),
        ("1", &*s(&a))
    );
}

#[test]
fn allow_missing_and_allow_extra_let_a_matching_run_pass() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    std::fs::copy(fixture("expected.png"), out.join("sub/changed.png")).unwrap();
    let (g, o) = (s(&golden), s(&out));
    run(&["compare", &g, &o]).code(1);
    run(&["compare", &g, &o, "--allow-missing"]).code(1);
    run(&["compare", &g, &o, "--allow-extra"]).code(1);
    let r = run(&["compare", &g, &o, "--allow-missing", "--allow-extra"]);
    r.code(0);
    assert!(r.stdout.contains("gone.png: MISSING") && r.stdout.contains("new.png: EXTRA"));
    // They name folder runs only.
    let e = s(&fixture("expected.png"));
    run(&["compare", &e, &e, "--allow-missing"]).code(2);
}

#[test]
fn update_writes_new_and_differing_baselines() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    let (g, o) = (s(&golden), s(&out));
    let bytes = |p: PathBuf| std::fs::read(p).unwrap();
    let old = bytes(golden.join("sub/changed.png"));
    // `missing` adds new.png only; the run still fails on the changed pair and gone.png.
    let r = run(&["compare", &g, &o, "--update=missing", "--json", "-"]);
    r.code(1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["updated"], serde_json::json!(["new.png"]));
    assert_eq!(bytes(golden.join("new.png")), bytes(out.join("new.png")));
    assert_eq!(bytes(golden.join("sub/changed.png")), old);
    // `--update` replaces the changed pair; with gone.png allowed, the run passes.
    let r = run(&[
        "compare",
        &g,
        &o,
        "--update",
        "--allow-missing",
        "--json",
        "-",
    ]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["updated"], serde_json::json!(["sub/changed.png"]));
    assert_eq!(doc["files"][2]["status"], "mismatch");
    assert_eq!(doc["files"][2]["updated"], true);
    assert_eq!(
        bytes(golden.join("sub/changed.png")),
        bytes(out.join("sub/changed.png"))
    );
    assert!(golden.join("gone.png").exists());
    run(&["compare", &g, &o, "--allow-missing"]).code(0);
    // One pair: a missing EXPECTED is added, a differing one replaced.
    let (e, a) = (dir.path().join("e.png"), fixture("actual.png"));
    run(&["compare", &s(&e), &s(&a), "--update=missing"]).code(0);
    assert_eq!(bytes(e.clone()), bytes(a.clone()));
    std::fs::copy(fixture("expected.png"), &e).unwrap();
    run(&["compare", &s(&e), &s(&a), "--update=missing"]).code(1);
    run(&["compare", &s(&e), &s(&a), "--update"]).code(0);
    assert_eq!(bytes(e.clone()), bytes(a.clone()));
    // No EXPECTED folder yet: --update creates it with every actual image.
    let fresh = dir.path().join("fresh");
    run(&["compare", &s(&fresh), &o, "--update=missing"]).code(0);
    assert_eq!(bytes(fresh.join("new.png")), bytes(out.join("new.png")));
    assert_eq!(
        bytes(fresh.join("sub/changed.png")),
        bytes(out.join("sub/changed.png"))
    );
    // Bytes are copied, so the two files need one format.
    let bmp = dir.path().join("a.bmp");
    image::save(&bmp, image::load(&a).unwrap()).unwrap();
    run(&["compare", &s(&e), &s(&bmp), "--update"]).code(2);
}

#[cfg(unix)]
#[test]
fn update_never_writes_through_a_link_nor_takes_a_file_that_is_not_an_image() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    let bytes = |p: &Path| std::fs::read(p).unwrap();
    // golden/sub/changed.png a link to out's own same.png: --update wrote the changed image
    // over out/same.png, which the same run compared.
    let changed = golden.join("sub/changed.png");
    std::fs::remove_file(&changed).unwrap();
    std::os::unix::fs::symlink(out.join("same.png"), &changed).unwrap();
    let before = bytes(&out.join("same.png"));
    run(&["compare", &s(&golden), &s(&out), "--update"])
        .code(2)
        .one_error_line("sub/changed.png: a symbolic link; --update does not write through it");
    assert_eq!(bytes(&out.join("same.png")), before);
    // A file that is not an image was taken as a new baseline (exit 0); the next run failed
    // on the baseline itself.
    let junk = dir.path().join("junk.png");
    std::fs::write(&junk, b"garbage").unwrap();
    let e = dir.path().join("new.png");
    run(&["compare", &s(&e), &s(&junk), "--update"])
        .code(2)
        .one_error_line("not taken as a baseline for");
    assert!(!e.exists());
}

#[test]
fn a_folder_inside_the_other_is_not_compared_as_its_files() {
    // `compare golden .` listed golden's files among the actual ones (all extra), and
    // --update copied them into golden, one level deeper every run.
    let dir = tempdir();
    let root = dir.path();
    let golden = root.join("golden");
    std::fs::create_dir(&golden).unwrap();
    for name in ["same.png", "changed.png"] {
        std::fs::copy(fixture("expected.png"), golden.join(name)).unwrap();
    }
    std::fs::copy(fixture("expected.png"), root.join("same.png")).unwrap();
    std::fs::copy(fixture("actual.png"), root.join("changed.png")).unwrap();
    let (g, a) = (s(&golden), s(root));
    let doc = report(&[&g, &a], 1);
    let actual: Vec<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["actual"].as_str().unwrap())
        .collect();
    let want = [root.join("changed.png"), root.join("same.png")];
    assert_eq!(actual, want.map(|p| s(&p)), "{doc}");
    assert_eq!(doc["extra"], serde_json::json!([]), "{doc}");
    for _ in 0..2 {
        run(&["compare", &g, &a, "--update"]).code(0);
    }
    assert!(!golden.join("golden").exists());
    // The other way round: ACTUAL inside EXPECTED is not among the expected files either.
    run(&["compare", &a, &g]).code(0);
}

#[test]
fn a_run_that_compared_nothing_does_not_pass_and_a_refused_update_leaves_nothing() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    // An empty ACTUAL with --allow-missing passed (exit 0) having compared nothing.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    run(&["compare", &s(&golden), &s(&empty), "--allow-missing"])
        .code(2)
        .one_error_line("no image is in both folders, so nothing was compared");
    // Without it, each missing file is listed and the run fails as a mismatch.
    run(&["compare", &s(&golden), &s(&empty)]).code(1);
    // --update into a new EXPECTED folder with a bad flag: the usage error left the folder.
    let fresh = dir.path().join("fresh");
    run(&[
        "compare",
        &s(&fresh),
        &s(&out),
        "--update",
        "--mask",
        "nosuch",
    ])
    .code(2);
    assert!(!fresh.exists());
}

/// A run of `--update` killed (SIGKILL, SIGTERM) at some point leaves each expected file
/// with its old bytes or its new ones, and no temporary file (but the one a SIGKILL between
/// link and rename may leave, as docs/cli.md says).
#[test]
fn update_interrupted_leaves_old_or_new_bytes() {
    let dir = tempdir();
    let (golden, out) = (dir.path().join("golden"), dir.path().join("out"));
    std::fs::create_dir_all(&golden).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let n = 120;
    for i in 0..n {
        let name = format!("{i:03}.png");
        image::save(&golden.join(&name), random_image(96, 64, 3, 8, i)).unwrap();
        image::save(&out.join(&name), random_image(96, 64, 3, 8, 1000 + i)).unwrap();
    }
    let read_all = |d: &Path| -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    };
    let (old, new) = (read_all(&golden), read_all(&out));
    // Each round is killed once the first file has been updated (the files are written in
    // the order of their names), after `delay` more, so the kill lands among the updates.
    let first = golden.join("000.png");
    for (i, (signal, delay_ms)) in [("KILL", 0), ("TERM", 0), ("KILL", 5), ("TERM", 20)]
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            // Start each round from the old baselines.
            for (name, bytes) in &old {
                std::fs::write(golden.join(name), bytes).unwrap();
            }
        }
        let mut child = gpukit()
            .args(["--backend", "cpu", "compare", &s(&golden), &s(&out)])
            .args(["--update", "-j", "1", "--quiet"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while std::fs::read(&first).unwrap() != new["000.png"] {
            assert!(
                started.elapsed().as_secs() < 60,
                "the first update never came"
            );
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let pid = child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        child.wait().unwrap();
        let mut now = read_all(&golden);
        // What docs/cli.md allows a SIGKILL: an existing file's new data is linked to a hidden
        // temporary name beside it and renamed over it, and a kill in the microseconds
        // between the two leaves that name, holding the new bytes (seen once in a loaded
        // full test run). Nothing else, and nothing after a SIGTERM.
        let temps: Vec<String> = now
            .keys()
            .filter(|k| k.starts_with('.') && k.ends_with(".tmp"))
            .cloned()
            .collect();
        assert!(
            temps.is_empty() || (signal == "KILL" && temps.len() == 1),
            "temporary files {temps:?} left (SIG{signal} after {delay_ms} ms)"
        );
        for t in temps {
            let bytes = now.remove(&t).unwrap();
            let name = t[1..].split(".png.").next().unwrap().to_string() + ".png";
            assert_eq!(bytes, new[&name], "{t}: not the new bytes of {name}");
            std::fs::remove_file(golden.join(&t)).unwrap();
        }
        assert_eq!(
            now.keys().collect::<Vec<_>>(),
            old.keys().collect::<Vec<_>>(),
            "no file added or left behind (SIG{signal} after {delay_ms} ms)"
        );
        for (name, bytes) in &now {
            assert!(
                bytes == &old[name] || bytes == &new[name],
                "{name}: neither the old bytes nor the new (SIG{signal} after {delay_ms} ms)"
            );
        }
    }
}

/// The JSON report of `compare ARGS --json -`, after checking the exit code.
#[track_caller]
fn report(args: &[&str], code: i32) -> serde_json::Value {
    let mut all = if args.first() == Some(&"--backend") {
        vec![]
    } else {
        vec!["compare"]
    };
    all.extend(args);
    all.extend(["--json", "-"]);
    let r = run(&all);
    r.code(code);
    serde_json::from_str(&r.stdout).unwrap()
}

/// A mask image the size of the fixture pair (24x16), white inside `rect`, black elsewhere.
fn rect_mask(path: &Path, (x1, y1, x2, y2): (u32, u32, u32, u32)) {
    let mut v = vec![0u8; 24 * 16];
    for y in y1..=y2 {
        for x in x1..=x2 {
            v[(y * 24 + x) as usize] = 255;
        }
    }
    image::save(path, image::Image::new_u8(24, 16, 1, v)).unwrap();
}

#[test]
fn a_mask_counts_as_the_same_ignored_rectangle() {
    let dir = tempdir();
    let (e, a) = (s(&fixture("expected.png")), s(&fixture("actual.png")));
    for rect in [(0, 0, 23, 15), (3, 2, 12, 9), (20, 0, 23, 3)] {
        let (x1, y1, x2, y2) = rect;
        let mask = dir.path().join("mask.png");
        rect_mask(&mask, rect);
        let spec = format!("{x1}:{y1}-{x2}:{y2}");
        for engine in ["cpu", "vulkan"] {
            let run_json = |extra: &[&str]| {
                let mut args = vec!["--backend", engine, "compare", &e, &a, "--json", "-"];
                args.extend(extra);
                let r = run(&args);
                let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
                // Exit 1 exactly when a pixel differs.
                let differs = doc["metrics"]["differing"].as_u64().unwrap() > 0;
                r.code(i32::from(differs));
                doc
            };
            let by_rect = run_json(&["--ignore", &spec]);
            let by_mask = run_json(&["--mask", &s(&mask)]);
            for k in ["pixels", "compared", "ignored", "differing", "max_abs_diff"] {
                assert_eq!(by_mask["metrics"][k], by_rect["metrics"][k], "{k} {rect:?}");
            }
            let area = u64::from((x2 - x1 + 1) * (y2 - y1 + 1));
            assert_eq!(by_mask["metrics"]["ignored"], area);
        }
    }
    // A mask of another size fails the pair, naming the mask.
    let small = dir.path().join("small.png");
    image::save(&small, image::Image::new_u8(4, 4, 1, vec![255; 16])).unwrap();
    run(&["compare", &e, &a, "--mask", &s(&small)])
        .code(2)
        .one_error_line("small.png: the mask is 4x4, the expected image 24x16");
}

#[test]
fn folder_masks_and_regions_apply_per_file() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    std::fs::remove_file(golden.join("gone.png")).unwrap();
    std::fs::remove_file(out.join("new.png")).unwrap();
    let (g, o) = (s(&golden), s(&out));
    // The mask folder mirrors the tree; its mask may be a PNG beside a file of any type.
    let masks = dir.path().join("masks");
    std::fs::create_dir_all(masks.join("sub")).unwrap();
    rect_mask(&masks.join("sub/changed.png"), (0, 0, 23, 15));
    let doc = report(&[&g, &o, "--mask", &s(&masks)], 0);
    assert_eq!(doc["files"][1]["metrics"]["ignored"], 384);
    assert_eq!(doc["files"][0]["metrics"]["ignored"], 0);
    // Regions per path, as strings or objects; a key naming no pair is warned of.
    let regions = dir.path().join("regions.json");
    std::fs::write(
        &regions,
        r#"{"sub/changed.png": ["0:0-11:15", {"x1": 12, "y1": 0, "x2": 23, "y2": 15}],
            "sub/chnaged.png": ["0:0-1:1"]}"#,
    )
    .unwrap();
    let r = run(&["compare", &g, &o, "--ignore-regions", &s(&regions)]);
    r.code(0);
    assert!(
        r.stderr.contains("\"sub/chnaged.png\" names no file"),
        "{}",
        r.stderr
    );
    std::fs::write(&regions, r#"{"sub/changed.png": ["0:0-11:15"]}"#).unwrap();
    let doc = report(&[&g, &o, "--ignore-regions", &s(&regions)], 1);
    assert_eq!(doc["files"][1]["metrics"]["ignored"], 192);
    std::fs::write(&regions, r#"{"sub/changed.png": ["0:0-11"]}"#).unwrap();
    run(&["compare", &g, &o, "--ignore-regions", &s(&regions)]).code(2);
    // Two images take a mask file; a folder run a folder.
    run(&[
        "compare",
        &g,
        &o,
        "--mask",
        &s(&masks.join("sub/changed.png")),
    ])
    .code(2);
}

#[test]
fn regions_are_the_boxes_of_separate_differences() {
    let dir = tempdir();
    let (w, h) = (64u32, 48u32);
    let base: Vec<u8> = (0..w * h).map(|i| (i % 251) as u8).collect();
    let mut changed = base.clone();
    // A 4x2 block at (2, 3) and a 2x2 block at (50, 40): two regions, hand-computed boxes.
    for (x, y) in (2..6).flat_map(|x| (3..5).map(move |y| (x, y))).chain([
        (50, 40),
        (51, 40),
        (50, 41),
        (51, 41),
    ]) {
        changed[(y * w + x) as usize] ^= 0x80;
    }
    let (e, a) = (dir.path().join("e.png"), dir.path().join("a.png"));
    image::save(&e, image::Image::new_u8(w, h, 1, base)).unwrap();
    image::save(&a, image::Image::new_u8(w, h, 1, changed)).unwrap();
    let want = serde_json::json!([
        { "x1": 2, "y1": 3, "x2": 5, "y2": 4, "pixels": 8 },
        { "x1": 50, "y1": 40, "x2": 51, "y2": 41, "pixels": 4 }
    ]);
    for engine in ["cpu", "vulkan"] {
        let (e, a) = (s(&e), s(&a));
        let doc = report(&["--backend", engine, "compare", &e, &a], 1);
        assert_eq!(doc["regions"], want, "{engine}");
        assert_eq!(doc["regions_total"], 2);
    }
    // Identical pixels: no region.
    let doc = report(&[&s(&e), &s(&e)], 0);
    assert_eq!(doc["regions"], serde_json::json!([]));
}

#[test]
fn html_report_shows_each_failing_pair_with_its_images() {
    let dir = tempdir();
    let (golden, out) = folders(dir.path());
    let html = dir.path().join("report");
    run(&["compare", &s(&golden), &s(&out), "--html", &s(&html)]).code(1);
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    // One section, for the one failing pair (index 1 of the sorted pairs), and the unpaired.
    assert_eq!(page.matches("<section class=\"pair\"").count(), 1);
    assert!(page.contains("data-name=\"sub/changed.png\""));
    assert!(page.contains("<li>gone.png</li>") && page.contains("<li>new.png</li>"));
    assert!(page.contains("18 of 384 (4.6875%)"), "the metrics");
    // Its images are the pair as compared and the diff image's golden.
    let load = |name: &str| image::load(&html.join("images").join(name)).unwrap();
    assert_eq!(
        load("0001-expected.png"),
        image::load(&fixture("expected.png")).unwrap()
    );
    assert_eq!(
        load("0001-actual.png"),
        image::load(&fixture("actual.png")).unwrap()
    );
    assert_eq!(
        load("0001-diff.png"),
        image::load(&fixture("diff.png")).unwrap()
    );
    for src in ["0001-expected.png", "0001-actual.png", "0001-diff.png"] {
        assert!(page.contains(&format!("src=\"images/{src}\"")), "{src}");
    }
    // Nothing from elsewhere: no URL with a scheme.
    assert!(!page.contains("http:") && !page.contains("https:") && !page.contains("//"));
    // The folder may not lie in a compared one.
    run(&[
        "compare",
        &s(&golden),
        &s(&out),
        "--html",
        &s(&out.join("r")),
    ])
    .code(2);
}
