//! Output files written through a temporary file in the target folder, then renamed, so a
//! failure never leaves a half-written or clobbered file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// An output file that does not exist under its name until `commit`. Created up front, so a
/// path that cannot be written fails before any work starts. Dropped uncommitted, it leaves
/// nothing behind.
pub struct PendingFile {
    path: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl PendingFile {
    pub fn create(path: &Path) -> Result<Self> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if path.is_dir() {
            anyhow::bail!("{}: is a directory", path.display());
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| format!("{}: cannot write here", path.display()))?;
        Ok(PendingFile {
            path: path.to_path_buf(),
            temp,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Writes `bytes` and commits.
    pub fn commit_bytes(mut self, bytes: &[u8]) -> Result<()> {
        self.file()
            .write_all(bytes)
            .with_context(|| format!("{}: write failed", self.path.display()))?;
        self.commit()
    }

    /// Writes through a buffered writer and commits.
    pub fn commit_with(mut self, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
        let mut w = BufWriter::new(self.temp.as_file_mut());
        f(&mut w)?;
        w.flush()
            .with_context(|| format!("{}: write failed", self.path.display()))?;
        drop(w);
        self.commit()
    }

    /// Flushes the data to disk and renames the file into place. An existing file keeps its
    /// permissions; a new one gets the usual 0644.
    pub fn commit(self) -> Result<()> {
        let PendingFile { path, temp } = self;
        temp.as_file()
            .sync_all()
            .with_context(|| format!("{}: write failed", path.display()))?;
        let perms = match std::fs::metadata(&path) {
            Ok(m) => m.permissions(),
            Err(_) => default_permissions(),
        };
        // Best effort: a filesystem without Unix permissions still gets the file.
        let _ = temp.as_file().set_permissions(perms);
        temp.persist(&path).map_err(|e| e.error).with_context(|| {
            format!(
                "{}: cannot rename the finished file into place",
                path.display()
            )
        })?;
        Ok(())
    }
}

#[cfg(unix)]
fn default_permissions() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o644)
}

#[cfg(not(unix))]
fn default_permissions() -> std::fs::Permissions {
    std::fs::metadata(".")
        .map(|m| m.permissions())
        .unwrap_or_else(|_| unreachable!())
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    PendingFile::create(path)?.commit_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_exists_until_commit_and_drop_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let pending = PendingFile::create(&path).unwrap();
        assert!(!path.exists());
        drop(pending);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        std::fs::write(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_place_fails_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let err = PendingFile::create(&dir.path().join("missing/out.txt"))
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("cannot write here"), "{err:#}");
        let err = PendingFile::create(dir.path()).err().unwrap();
        assert!(format!("{err:#}").contains("is a directory"), "{err:#}");
    }
}
