//! Lists the WGSL snippets of wgsl/shared/ for src/gpu/shader.rs: every file there is a snippet
//! that `// import: NAME` may name, found from the folder rather than listed by hand.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new("wgsl/shared");
    // The folder's own entry changes when a file is added or removed; each file when edited.
    println!("cargo:rerun-if-changed=wgsl/shared");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("wgsl/shared is listed")
        .map(|e| e.expect("wgsl/shared is listed").file_name())
        .filter_map(|n| n.to_str()?.strip_suffix(".wgsl").map(str::to_string))
        .collect();
    names.sort();
    let mut out = String::from("&[\n");
    for name in &names {
        println!("cargo:rerun-if-changed=wgsl/shared/{name}.wgsl");
        writeln!(out, "    ({name:?}, crate::shader!(\"shared/{name}\")),").expect("a String");
    }
    out.push(']');
    let path =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("snippets.rs");
    std::fs::write(path, out).expect("OUT_DIR is writable");
}
