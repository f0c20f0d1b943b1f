//! Pairing a batch's inputs with their outputs before any work starts: one named output, or
//! each input's path under `--out-dir` (its folders kept, its extension changed by
//! `--out-format`). Two inputs may not share an output, and an output may not be one of the
//! inputs unless `--overwrite` says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::inputs::Item;

fn usage(msg: String) -> anyhow::Error {
    crate::UsageError(msg).into()
}

/// Where each item is written under `dir`: its relative path, with the extension `format`
/// (an extension such as "png") when given. Creates nothing.
pub fn under_dir(
    items: &[Item],
    dir: &Path,
    format: Option<&str>,
    overwrite: bool,
) -> Result<Vec<PathBuf>> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{}: --out-dir names a file, not a folder",
            dir.display()
        )));
    }
    // The inputs by identity, gathered once: each output is one lookup (a scan of the inputs
    // per output took 49 s for 4,000 files).
    let ids: HashMap<crate::io::output::FileId, &Path> = items
        .iter()
        .filter_map(|i| Some((crate::io::output::file_id(&i.path)?, i.path.as_path())))
        .collect();
    let mut seen = HashMap::new();
    let mut outs = Vec::with_capacity(items.len());
    for item in items {
        let mut out = dir.join(&item.rel);
        if let Some(ext) = format {
            out.set_extension(ext);
        } else if item.path.is_dir() {
            // A folder --recursive could not list: it fails when read, and is never written;
            // its name only needs a format.
            out.set_extension("png");
        }
        if let Some(first) = seen.insert(out.clone(), &item.path) {
            return Err(usage(format!(
                "{} and {} would both be written to {}",
                first.display(),
                item.path.display(),
                out.display()
            )));
        }
        let over_input = || {
            crate::io::output::file_id(&out).is_some_and(|id| ids.contains_key(&id))
                && std::fs::metadata(&out).is_ok_and(|m| m.is_file())
        };
        if !overwrite && over_input() {
            return Err(usage(format!(
                "{}: --out-dir {} would write over this input; add --overwrite to replace inputs",
                out.display(),
                dir.display()
            )));
        }
        outs.push(out);
    }
    Ok(outs)
}

/// Creates the folder an output goes into (an `--out-dir` keeps its inputs' folders).
pub fn create_parent(out: &Path) -> Result<()> {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::fs::create_dir_all(p)
            .with_context(|| format!("{}: cannot create the folder", p.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &Path, rel: &str) -> Item {
        Item {
            path: path.to_path_buf(),
            rel: rel.into(),
        }
    }

    #[test]
    fn outputs_keep_the_tree_and_take_the_new_extension() {
        let items = [
            item(Path::new("a/x.jpg"), "x.jpg"),
            item(Path::new("a/s/y.png"), "s/y.png"),
        ];
        let outs = under_dir(&items, Path::new("out"), Some("webp"), false).unwrap();
        assert_eq!(
            outs,
            [PathBuf::from("out/x.webp"), PathBuf::from("out/s/y.webp")]
        );
    }

    #[test]
    fn two_inputs_on_one_output_and_outputs_over_inputs_are_refused() {
        let items = [
            item(Path::new("a/x.png"), "x.png"),
            item(Path::new("b/x.png"), "x.png"),
        ];
        let err = under_dir(&items, Path::new("out"), None, false).unwrap_err();
        assert!(
            err.to_string().contains("would both be written to"),
            "{err}"
        );
        let items = [
            item(Path::new("a/x.jpg"), "x.jpg"),
            item(Path::new("b/x.png"), "x.png"),
        ];
        let err = under_dir(&items, Path::new("out"), Some("png"), true).unwrap_err();
        assert!(
            err.to_string().contains("would both be written to"),
            "{err}"
        );

        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("x.png");
        std::fs::write(&input, b"x").unwrap();
        let items = [item(&input, "x.png")];
        // The same folder, spelled another way.
        let spelled = dir.path().join(".");
        let err = under_dir(&items, &spelled, None, false).unwrap_err();
        assert!(err.to_string().contains("add --overwrite"), "{err}");
        let outs = under_dir(&items, &spelled, None, true).unwrap();
        assert_eq!(outs, [spelled.join("x.png")]);
    }
}
