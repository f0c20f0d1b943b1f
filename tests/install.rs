//! What an installed gpukit brings besides the binary: shell completions and man pages,
//! generated from the clap definition.

use std::process::Command;

use crate::util::{run, tempdir};

/// What bash completes for the words typed so far (the last one being completed), with the
/// script `gpukit completions bash` prints sourced into a real bash.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let r = run(&["completions", "bash"]);
    r.code(0);
    let dir = tempdir();
    let script = dir.path().join("gpukit.bash");
    std::fs::write(&script, &r.stdout).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let cur = words[cword];
    let prev = if cword > 0 { words[cword - 1] } else { "" };
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\n_gpukit gpukit '{cur}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_kind_values() {
    let subcommands = bash_completes(&["gpukit", ""]);
    for want in [
        "blur",
        "histogram",
        "scan",
        "matmul",
        "compare",
        "completions",
        "man",
    ] {
        assert!(
            subcommands.iter().any(|s| s == want),
            "{want}: {subcommands:?}"
        );
    }
    let bl = bash_completes(&["gpukit", "bl"]);
    assert_eq!(bl, ["blur"]);
    let kinds = bash_completes(&["gpukit", "blur", "--kind", ""]);
    assert_eq!(kinds, ["box", "gaussian"]);
    // `--rad`, not `--ra`: blur's `--raw` (frame streams) shares the shorter prefix.
    let flags = bash_completes(&["gpukit", "blur", "--rad"]);
    assert_eq!(flags, ["--radius"]);
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let r = run(&["completions", shell]);
        r.code(0);
        assert!(r.stdout.contains("histogram"), "{shell}");
        assert!(r.stdout.contains("gaussian"), "{shell}");
    }
    run(&["completions", "tcsh"]).code(2);
}

#[test]
fn man_pages_for_gpukit_and_each_subcommand() {
    let top = run(&["man"]);
    top.code(0);
    assert!(top.stdout.starts_with(".ie"), "{}", &top.stdout[..80]);
    assert!(top.stdout.contains(".TH gpukit 1"), "{}", top.stdout);
    let blur = run(&["man", "blur"]);
    blur.code(0);
    assert!(blur.stdout.contains(".TH gpukit-blur 1"));
    // Its own flags, its value names and the global options.
    for want in [r"\-\-kind", "gaussian", r"\-\-backend"] {
        assert!(blur.stdout.contains(want), "{want} not in gpukit-blur(1)");
    }
    run(&["man", "nope"])
        .code(2)
        .one_error_line("no subcommand \"nope\"");

    let dir = tempdir();
    let out = dir.path().join("man1");
    run(&["man", "--out-dir", out.to_str().unwrap()]).code(0);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for want in ["gpukit.1", "gpukit-blur.1", "gpukit-scan.1", "gpukit-man.1"] {
        assert!(names.iter().any(|n| n == want), "{want}: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "gpukit-help.1"), "{names:?}");
    let written = std::fs::read_to_string(out.join("gpukit-blur.1")).unwrap();
    assert_eq!(written, blur.stdout);
}
