//! Input paths as every image subcommand takes them: files, and folders standing for the
//! image files directly in them.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// Extensions of the image files a folder contributes.
const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif", "pnm", "pbm", "pgm", "ppm", "pam",
    "tga", "qoi", "ico",
];

/// The inputs with folders replaced by the image files directly in them, sorted by name.
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let name = p.display();
        let mut files: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("{name}: cannot list the folder"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.is_file()
                    && f.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_lowercase().as_str()))
            })
            .collect();
        if files.is_empty() {
            anyhow::bail!("{name}: no image files in this folder");
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn folders_expand_to_their_images_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.png", "a.JPG", "notes.txt"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let got = expand(&[dir.path().to_path_buf(), Path::new("c.png").into()]).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.JPG", "b.png", "c.png"]);
        let empty = tempfile::tempdir().unwrap();
        let err = expand(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(err.to_string().contains("no image files"), "{err}");
    }
}
