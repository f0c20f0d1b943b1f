//! `gpukit compare --update`: accepting new baselines. The actual file's bytes are written
//! over the expected one (or as a new expected file) through `PendingFile`, so an interrupted
//! run leaves each expected file with its old bytes or its new ones, never a mix, and no
//! temporary file.

use std::path::Path;

use anyhow::{Context, Result};

use crate::io::output::PendingFile;

/// Which expected images `--update` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Update {
    /// Missing ones (extra files in ACTUAL, or EXPECTED absent) and those that differ.
    All,
    /// Missing ones only: new baselines are added, existing ones never replaced.
    Missing,
}

/// Checks up front that `--update` can copy ACTUAL's bytes to EXPECTED: two named files
/// (not stdin) of one format, by extension. A usage error otherwise.
pub fn check_pair(expected: &Path, actual: &Path) -> Result<()> {
    if crate::io::image::is_stdin(actual) || crate::io::image::is_stdin(expected) {
        anyhow::bail!(crate::UsageError(
            "--update copies ACTUAL's file to EXPECTED: neither may be `-`".into()
        ));
    }
    let ext = |p: &Path| {
        p.extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
    };
    if ext(expected) != ext(actual) {
        anyhow::bail!(crate::UsageError(format!(
            "{}: --update copies ACTUAL's bytes to EXPECTED, so both need one extension \
             ({} has another)",
            expected.display(),
            actual.display()
        )));
    }
    Ok(())
}

/// Writes `actual`'s bytes to `expected` atomically, creating its folder if needed. `actual`
/// must be an image gpukit reads (a baseline that is not one fails every later run), and
/// `expected` may not be a symbolic link: writing through it could replace a file anywhere,
/// ACTUAL's own among them.
pub fn accept(expected: &Path, actual: &Path) -> Result<()> {
    if std::fs::symlink_metadata(expected).is_ok_and(|m| m.file_type().is_symlink()) {
        anyhow::bail!(
            "{}: a symbolic link; --update does not write through it (update what it points \
             to, or replace the link with a file)",
            expected.display()
        );
    }
    crate::io::image::load(actual)
        .with_context(|| format!("not taken as a baseline for {}", expected.display()))?;
    let bytes =
        std::fs::read(actual).with_context(|| format!("{}: cannot read", actual.display()))?;
    if let Some(parent) = expected.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("{}: cannot create", parent.display()))?;
    }
    // EXPECTED was noted as an input: replacing it is what --update asks for.
    PendingFile::create_over_input(expected)?.commit_bytes(&bytes)
}
