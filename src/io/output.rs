//! Output paths, written so that nothing the user points at is destroyed or half-written:
//! a regular file (or a symlink's final target) is replaced atomically; a device or FIFO is
//! written through; `-` is stdout. The guarantees per platform are in docs/cli.md.
//!
//! On Linux a regular file's data goes into an unnamed `O_TMPFILE` file in the target's
//! folder and gets a name only at the end (linked straight to the target when it is new, or
//! linked beside it and renamed over it; copied there where it cannot be linked), so a
//! crash of gpukit or `kill -9` leaves nothing. Elsewhere, and on filesystems without
//! `O_TMPFILE`, the encoded bytes are kept in memory and a named temporary file exists only
//! while they are written and renamed. SIGINT, SIGTERM and SIGHUP remove such a named file
//! before gpukit dies of the signal. Flushing the data to disk before the name is given, for a
//! crash of the system, is asked for (`set_fsync`, `PendingFile::durable`), not done always.
//!
//! Every input a command reads is noted here ([`note_input`]), and every output goes through
//! [`PendingFile`], which refuses a path that is one of them (by device and inode, however it
//! is spelled or linked), when it is created and again when it is committed: the one check
//! between what gpukit writes (images, arrays, JSON, reports, caches) and what the user gave.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// An output that does not exist under its name until `commit`. Created up front, so a path
/// that cannot be written fails before any work starts. Dropped uncommitted, it leaves
/// nothing behind.
pub struct PendingFile {
    /// The path as the user gave it: what every message names.
    path: PathBuf,
    kind: Kind,
}

enum Kind {
    /// A regular file (new or existing) at `target`, the user's path with symlinks followed.
    Replace {
        target: PathBuf,
        /// The existing file's permissions and owner, kept by the new one.
        keep: Option<Keep>,
        staging: Staging,
        /// The user allowed replacing an input (`--overwrite`); else an input found at
        /// `target` when committing is refused.
        over_input: bool,
        /// Flushed to disk before it is named, whatever [`set_fsync`] says
        /// ([`PendingFile::durable`]).
        durable: bool,
    },
    /// A character or block device or a FIFO: opened for writing at commit, written through.
    Through {
        truncate: bool,
    },
    Stdout,
    Stderr,
}

/// What a replaced file keeps of the one it replaces.
struct Keep {
    permissions: std::fs::Permissions,
    /// uid and gid.
    #[cfg(unix)]
    owner: (u32, u32),
}

impl Keep {
    fn of(m: &std::fs::Metadata) -> Keep {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Keep {
            permissions: m.permissions(),
            #[cfg(unix)]
            owner: (m.uid(), m.gid()),
        }
    }
}

enum Staging {
    /// An unnamed file in the target's folder (Linux `O_TMPFILE`); written as it is encoded.
    #[cfg(target_os = "linux")]
    Unnamed(File),
    /// The encoded bytes are collected in memory, then written to a named temporary file.
    Memory,
}

impl PendingFile {
    /// Checks `path` and prepares its output: `-` is stdout; a device or FIFO is written
    /// through; anything else is a regular file to create or replace atomically. A usage
    /// error if the file is one of the inputs noted so far ([`note_input`]).
    pub fn create(path: &Path) -> Result<Self> {
        refuse_input(path)?;
        Self::create_unchecked(path)
    }

    /// [`PendingFile::create`] for an output that may replace an input because the user
    /// asked for it (`--overwrite`).
    pub fn create_over_input(path: &Path) -> Result<Self> {
        let mut p = Self::create_unchecked(path)?;
        if let Kind::Replace { over_input, .. } = &mut p.kind {
            *over_input = true;
        }
        Ok(p)
    }

    /// This output flushed to disk (with its folder) before it is named, as every output is
    /// under [`set_fsync`]: for outputs whose mere presence later counts as done (`--skip-existing`
    /// resuming a batch), which a crash of the system must not leave named but empty.
    pub fn durable(mut self) -> Self {
        if let Kind::Replace { durable, .. } = &mut self.kind {
            *durable = true;
        }
        self
    }

    fn create_unchecked(path: &Path) -> Result<Self> {
        let name = path.display();
        let alias = fd_alias(path);
        let kind = match alias {
            Some(1) => Kind::Stdout,
            Some(2) => Kind::Stderr,
            // `/dev/fd/N` is the caller's open file, whatever it is: written through.
            _ => match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => bail!("{name}: is a directory"),
                // `out.json/` names a folder: no file can be put there, so say it now, not
                // when the work is done.
                _ if names_folder(path) => bail!("{name}: names a folder (ends in a slash)"),
                Ok(m) if m.is_file() && alias.is_none() => replace(path, Some(m))?,
                Ok(m) => {
                    check_through(path, &m)?;
                    Kind::Through {
                        truncate: m.is_file(),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => replace(path, None)?,
                Err(e) => bail!("{name}: cannot write here: {e}"),
            },
        };
        Ok(PendingFile {
            path: path.to_path_buf(),
            kind,
        })
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this output is stdout (`-` or `/dev/stdout`).
    pub fn is_stdout(&self) -> bool {
        matches!(self.kind, Kind::Stdout)
    }

    /// How the output will be written, for `-vv`.
    pub fn describe(&self) -> String {
        let name = self.path.display();
        match &self.kind {
            Kind::Replace {
                target, staging, ..
            } => {
                let how = match staging {
                    #[cfg(target_os = "linux")]
                    Staging::Unnamed(_) => "an unnamed temporary file linked in at the end",
                    Staging::Memory => "a temporary file written and renamed at the end",
                };
                if target.as_path() == self.path {
                    format!("{name}: written atomically through {how}")
                } else {
                    format!(
                        "{name}: a link; its target {} written atomically through {how}",
                        target.display()
                    )
                }
            }
            Kind::Through { .. } => format!("{name}: not a regular file; written through"),
            Kind::Stdout => format!("{name}: stdout"),
            Kind::Stderr => format!("{name}: stderr"),
        }
    }

    /// A usage error when the output is a terminal and `what` (a binary format) would be
    /// printed on it.
    pub fn refuse_terminal(&self, what: &str) -> Result<()> {
        use std::io::IsTerminal;
        let stream = match self.kind {
            Kind::Stdout if io::stdout().is_terminal() => "stdout",
            Kind::Stderr if io::stderr().is_terminal() => "stderr",
            _ => return Ok(()),
        };
        bail!(crate::UsageError(format!(
            "{}: {stream} is a terminal; not writing {what} to it (redirect it to a file or a pipe)",
            self.path.display()
        )))
    }

    /// Writes `bytes` and commits.
    pub fn commit_bytes(self, bytes: &[u8]) -> Result<()> {
        self.commit_with(|w| Ok(w.write_all(bytes)?))
    }

    /// Writes through a buffered writer and commits. A failed write is reported as
    /// `PATH: cannot write: REASON`, whatever the writer `f` made of it.
    pub fn commit_with(self, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
        let PendingFile { path, kind } = self;
        let name = match kind {
            Kind::Stdout if path == Path::new("-") => "stdout".to_string(),
            _ => path.display().to_string(),
        };
        match kind {
            Kind::Stdout => write_to(&name, io::stdout().lock(), f),
            Kind::Stderr => write_to(&name, io::stderr().lock(), f),
            Kind::Through { truncate } => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(truncate)
                    .open(&path)
                    .with_context(|| format!("{name}: cannot open for writing"))?;
                write_to(&name, file, f)
            }
            Kind::Replace {
                target,
                keep,
                staging,
                over_input,
                durable,
            } => match staging {
                // An input noted after the output was created (read later in the run).
                _ if !over_input && input_at(&target).is_some() => refuse_input(&path),
                #[cfg(target_os = "linux")]
                Staging::Unnamed(mut file) => {
                    let sync = durable || fsync_all();
                    write_to(&name, &mut file, f)?;
                    finish(&file, keep.as_ref(), sync).map_err(|e| write_error(&name, e))?;
                    linux::link_into_place(&file, &target, sync).map_err(|e| {
                        anyhow::Error::new(e)
                            .context(format!("{name}: cannot put the finished file in place"))
                    })?;
                    flush_folder(&target, sync);
                    Ok(())
                }
                Staging::Memory => {
                    let mut bytes = Vec::new();
                    f(&mut bytes)?;
                    write_named(
                        &name,
                        &target,
                        keep.as_ref(),
                        &bytes,
                        durable || fsync_all(),
                    )
                }
            },
        }
    }
}

/// Writes `bytes` to `path` atomically (or through, for a device or FIFO).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    PendingFile::create(path)?.commit_bytes(bytes)
}

/// Creates the folder `dir` (an `--out-dir`) and checks now that files can be created in it,
/// so that a read-only folder fails before any input is decoded. Leaves nothing behind: the
/// folders it made are removed again when the returned guard drops while they are still
/// empty (a batch whose every input failed).
pub fn prepare_folder(dir: &Path) -> Result<MadeFolders> {
    let made = MadeFolders {
        made: dir
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
            .map(Path::to_path_buf)
            .collect(),
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    probe_dir(dir).with_context(|| format!("{}: cannot write here", dir.display()))?;
    Ok(made)
}

/// The folders [`prepare_folder`] made, deepest first; each is removed on drop while empty.
#[must_use = "dropping it removes the folders it made while they are empty"]
#[derive(Debug)]
pub struct MadeFolders {
    made: Vec<PathBuf>,
}

impl MadeFolders {
    /// Keeps the folders whatever they hold.
    pub fn keep(mut self) {
        self.made.clear();
    }
}

impl Drop for MadeFolders {
    fn drop(&mut self) {
        // `remove_dir` removes only an empty folder: the first that holds anything stops it.
        for dir in &self.made {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

/// Checks now that `path` can be written later (creating its folder when missing), so that
/// a long run does not find out at its end. Leaves nothing behind.
pub fn check_writable(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    }
    PendingFile::create(path).map(drop)
}

/// Whether writing `output` would replace the regular file `input` (the same file after
/// following links, compared by device and inode where there are any).
pub fn same_file(output: &Path, input: &Path) -> bool {
    let (Ok(o), Ok(i)) = (std::fs::metadata(output), std::fs::metadata(input)) else {
        return false;
    };
    if !o.is_file() || !i.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        o.dev() == i.dev() && o.ino() == i.ino()
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(output), std::fs::canonicalize(input)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// A usage error when two outputs of one command, given with the options `a.0` and `b.0`,
/// name the same file or the same standard stream (`-` and `/dev/stdout`): their bytes
/// would mix.
pub fn refuse_shared_output(a: (&str, &Path), b: (&str, &Path)) -> Result<()> {
    let stream = fd_alias(a.1);
    if a.1 == b.1 || (stream.is_some() && stream == fd_alias(b.1)) || same_file(a.1, b.1) {
        bail!(crate::UsageError(format!(
            "{} and {} both name {}; give them different outputs",
            a.0,
            b.0,
            b.1.display()
        )));
    }
    Ok(())
}

/// A file's identity: device and inode (its canonical path off Unix).
#[cfg(unix)]
pub type FileId = (u64, u64);
/// A file's identity: device and inode (its canonical path off Unix).
#[cfg(not(unix))]
pub type FileId = PathBuf;

/// The identity of the file at `path` after following links; `None` if there is none.
pub fn file_id(path: &Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        std::fs::canonicalize(path).ok()
    }
}

/// The inputs of this process, by identity, with the path each was given as.
fn inputs() -> std::sync::MutexGuard<'static, std::collections::HashMap<FileId, PathBuf>> {
    static INPUTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<FileId, PathBuf>>,
    > = std::sync::OnceLock::new();
    INPUTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Notes the regular file at `path` as an input: no output may replace it from now on
/// (streams, devices and missing files are not noted).
pub fn note_input(path: &Path) {
    note_inputs(std::iter::once(path));
}

/// [`note_input`] for many paths, under one lock.
pub fn note_inputs<'p>(paths: impl IntoIterator<Item = &'p Path>) {
    let mut known = inputs();
    for path in paths {
        if fd_alias(path).is_some() {
            continue;
        }
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if let Some(id) = file_id(path) {
            // A path noted before under this identity that is no longer this file (removed,
            // its inode given to this one) gives way to this one.
            let stale = known
                .get(&id)
                .is_some_and(|old| file_id(old).as_ref() != Some(&id));
            if stale || !known.contains_key(&id) {
                known.insert(id, path.to_path_buf());
            }
        }
    }
}

/// The input (as it was given) that writing `output` would replace, if any.
pub fn input_at(output: &Path) -> Option<PathBuf> {
    if fd_alias(output).is_some() {
        return None;
    }
    let id = file_id(output)?;
    let input = inputs().get(&id).cloned()?;
    // Still that file: an input removed since, its inode given to another file, is no input.
    (file_id(&input).as_ref() == Some(&id)).then_some(input)
}

/// A usage error when writing `output` would replace an input noted so far.
fn refuse_input(output: &Path) -> Result<()> {
    if let Some(input) = input_at(output) {
        let same = if output == input {
            String::new()
        } else {
            format!(" (the same file as {})", input.display())
        };
        bail!(crate::UsageError(format!(
            "{}: names an input file{same}; refusing to overwrite it",
            output.display()
        )));
    }
    Ok(())
}

/// Refuses (a usage error) an output file named by `option` whose extension is not one of
/// `exts`, so that a slip (`--junit photo.png`) cannot replace someone's file with a report:
/// `-`, a stream alias and an existing special file (a FIFO, a device) pass.
pub fn check_extension(option: &str, path: &Path, exts: &[&str], what: &str) -> Result<()> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if names_stream(path) || special || ext.is_some_and(|e| exts.contains(&e.as_str())) {
        return Ok(());
    }
    anyhow::bail!(crate::UsageError(format!(
        "{option} {}: {what}'s name must end in .{} (or give - for stdout)",
        path.display(),
        exts.join(" or .")
    )))
}

/// Whether `path` ends in a separator, as only a folder's name may.
fn names_folder(path: &Path) -> bool {
    let s = path.as_os_str().as_encoded_bytes();
    s.last()
        .is_some_and(|&b| std::path::is_separator(char::from(b)))
}

/// Whether `path` names an open stream (`-`, `/dev/stdout`, `/dev/fd/N`...) rather than a
/// file to replace.
pub fn names_stream(path: &Path) -> bool {
    fd_alias(path).is_some()
}

/// The standard stream `path` names: 1 for `-` and `/dev/stdout`, 2 for `/dev/stderr`, N for
/// `/dev/fd/N` and `/proc/self/fd/N`. Those are the caller's open files, not paths to replace.
fn fd_alias(path: &Path) -> Option<u32> {
    let s = path.to_str()?;
    match s {
        "-" | "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    if !cfg!(unix) {
        return None;
    }
    let n = s
        .strip_prefix("/dev/fd/")
        .or_else(|| s.strip_prefix("/proc/self/fd/"))?;
    n.parse().ok()
}

/// A device or FIFO must be writable by us; a socket cannot be opened at all.
fn check_through(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let name = path.display();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_socket() {
            bail!("{name}: is a socket, which cannot be opened as a file");
        }
        rustix::fs::access(path, rustix::fs::Access::WRITE_OK)
            .map_err(io::Error::from)
            .with_context(|| format!("{name}: cannot write here"))?;
    }
    #[cfg(not(unix))]
    if meta.permissions().readonly() {
        bail!("{name}: cannot write here: read-only");
    }
    Ok(())
}

/// Prepares the atomic replacement of the regular file at `path` (or its creation): follows
/// symlinks to the final target, and opens the staging file in the target's folder.
fn replace(path: &Path, meta: Option<std::fs::Metadata>) -> Result<Kind> {
    let name = path.display();
    let target = final_target(path).with_context(|| format!("{name}: cannot follow the link"))?;
    let dir = folder_of(&target);
    let keep = meta.filter(|m| m.is_file()).as_ref().map(Keep::of);
    let staging =
        open_staging(dir, keep.is_some()).with_context(|| format!("{name}: cannot write here"))?;
    Ok(Kind::Replace {
        target,
        keep,
        staging,
        over_input: false,
        durable: false,
    })
}

/// `path` with every symlink in its last component followed (at most 40 hops, as the
/// kernel allows); a link to a missing file gives the missing file, as `cp` writes it.
fn final_target(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

#[cfg(target_os = "linux")]
fn open_staging(dir: &Path, _existing: bool) -> io::Result<Staging> {
    install_signal_cleanup();
    match linux::unnamed_in(dir) {
        Ok(file) => Ok(Staging::Unnamed(file)),
        // Filesystems without O_TMPFILE say so in one of these ways.
        Err(e) if linux::tmpfile_unsupported(&e) => probe_dir(dir).map(|()| Staging::Memory),
        Err(e) => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_staging(dir: &Path, _existing: bool) -> io::Result<Staging> {
    #[cfg(unix)]
    install_signal_cleanup();
    probe_dir(dir).map(|()| Staging::Memory)
}

/// Checks that a file can be created in `dir` by creating one and removing it at once.
fn probe_dir(dir: &Path) -> io::Result<()> {
    let (path, file) = named_temp(dir, "probe")?;
    drop(file);
    std::fs::remove_file(&path)
}

/// Creates `dir/.NAME.XXXXXXXX.tmp`, a new file.
fn named_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..100 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let path = dir.join(format!(".{name}.{:08x}.tmp", h.finish() as u32));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free temporary file name"))
}

/// Writes `bytes` into a named temporary file beside `target` and renames it over `target`.
/// The registry stays locked meanwhile, so a signal waits for the rename (or the removal).
/// The file is closed, and the close checked, before the rename: on the filesystems that
/// take this path (NFS, FUSE: no `O_TMPFILE`), a write error (quota, a full disk) may only
/// show at the close. With `sync`, the file and then its folder are flushed to disk.
fn write_named(
    name: &str,
    target: &Path,
    keep: Option<&Keep>,
    bytes: &[u8],
    sync: bool,
) -> Result<()> {
    let dir = folder_of(target);
    let mut names = registry();
    let base = target.file_name().unwrap_or_default().to_string_lossy();
    let (temp, mut file) =
        named_temp(dir, &base).with_context(|| format!("{name}: cannot write here"))?;
    names.push(temp.clone());
    let result = file
        .write_all(bytes)
        .and_then(|()| finish(&file, keep, sync))
        .and_then(|()| close_checked(file))
        .map_err(|e| write_error(name, e))
        .and_then(|()| {
            std::fs::rename(&temp, target)
                .with_context(|| format!("{name}: cannot put the finished file in place"))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    } else {
        flush_folder(target, sync);
    }
    names.retain(|p| p != &temp);
    result
}

/// Closes `file`, giving the error a close reports (which dropping a `File` ignores). Where
/// there is no such close, the data is flushed instead, so that a late write error shows.
fn close_checked(file: File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::IntoRawFd;
        let fd = file.into_raw_fd();
        // SAFETY: `fd` was `file`'s, which gave up its ownership; it is closed exactly once.
        // Linux closes the descriptor even when close reports EINTR.
        if unsafe { libc::close(fd) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    file.sync_all()
}

/// With `sync`, flushes the folder holding `target` too, so that the new name is on disk
/// with the data. Best effort: the file is in place whatever this says.
fn flush_folder(target: &Path, sync: bool) {
    #[cfg(unix)]
    if sync {
        if let Ok(d) = File::open(folder_of(target)) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = (target, sync);
}

/// The folder holding `path` (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether every finished file is flushed to disk (`fsync`) before it is named: off unless
/// [`set_fsync`] turned it on (`gpukit --fsync`).
static FSYNC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Flush every file written from now on to disk, and its folder, when naming it, so that a
/// crash of the system or a power loss leaves the old file or the whole new one, never a
/// named file whose data is not on disk yet. Off by default, as in `cp`, ImageMagick, vips
/// and OpenCV: a stopped or killed gpukit leaves no half-written file either way (docs/cli.md,
/// "Output paths"), and the flushes cost a batch of photos a tenth of its time or more
/// (docs/BENCHMARKS.md). [`PendingFile::durable`] asks it of one output.
pub fn set_fsync(on: bool) {
    FSYNC.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn fsync_all() -> bool {
    FSYNC.load(std::sync::atomic::Ordering::Relaxed)
}

/// Gives the finished file the kept permissions (and, best effort, owner) and, with `sync`,
/// flushes it to disk, so the rename never exposes a file whose data is not there yet.
fn finish(file: &File, keep: Option<&Keep>, sync: bool) -> io::Result<()> {
    // A new file has 0666 less the umask, as `open` gives it.
    if let Some(k) = keep {
        file.set_permissions(k.permissions.clone())?;
        // Only root may give a file away; anyone else keeps their own.
        #[cfg(unix)]
        let _ = rustix::fs::fchown(
            file,
            Some(rustix::fs::Uid::from_raw(k.owner.0)),
            Some(rustix::fs::Gid::from_raw(k.owner.1)),
        );
    }
    flush_if(file, sync)
}

/// `fsync` of `file` where `sync` asks for it.
fn flush_if(file: &File, sync: bool) -> io::Result<()> {
    match sync {
        true => {
            #[cfg(test)]
            tests::SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            file.sync_all()
        }
        false => Ok(()),
    }
}

/// Runs `f` on a buffered `sink`; a failed write becomes `NAME: cannot write: REASON`, and
/// any other error of `f` (a cut input, say) is returned as it is.
pub(crate) fn write_to<W: Write>(
    name: &str,
    sink: W,
    f: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let mut w = BufWriter::with_capacity(
        1 << 16,
        Tracked {
            inner: sink,
            error: None,
        },
    );
    let result = f(&mut w).and_then(|()| Ok(w.flush()?));
    // On an error the buffered rest is dropped, not written after it.
    let (mut tracked, _) = w.into_parts();
    match tracked.error.take() {
        Some(e) => Err(write_error(name, e)),
        None => result,
    }
}

pub(crate) fn write_error(name: &str, e: io::Error) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("{name}: cannot write"))
}

/// `e` once more (an `io::Error` is not `Clone`): its OS error code, or its kind and words.
pub(crate) fn again(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// A writer that remembers its first I/O error, so that the message names the output and
/// the reason, not what an encoder wrapped around it.
struct Tracked<W> {
    inner: W,
    error: Option<io::Error>,
}

impl<W: Write> Tracked<W> {
    fn note<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if self.error.is_none() {
                self.error = Some(again(e));
            }
        }
        r
    }
}

impl<W: Write> Write for Tracked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}

/// Named temporary files that exist right now; a signal removes them.
fn registry() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    static NAMES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

/// On SIGINT, SIGTERM and SIGHUP: remove the named temporary files, then die of the signal
/// (the shell reports 128 + its number, and a shell loop stops as it would without gpukit's
/// handler). Installed once, on a thread of its own, where taking the registry's lock is safe.
#[cfg(unix)]
fn install_signal_cleanup() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A signal the caller ignores (`nohup`, `cmd &` in a script) stays ignored.
        let wanted = [SIGINT, SIGTERM, SIGHUP]
            .into_iter()
            .filter(|&s| !ignored(s));
        let Ok(mut signals) = signal_hook::iterator::Signals::new(wanted) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("gpukit-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    // Held to the end: no new named file can appear.
                    let names = registry();
                    for p in names.iter() {
                        let _ = std::fs::remove_file(p);
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                    std::process::exit(128 + sig);
                }
            });
    });
}

/// Whether `sig` is ignored (SIG_IGN), as `nohup` leaves SIGHUP.
#[cfg(unix)]
fn ignored(sig: i32) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction only writes the current one into `old`.
    let rc = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction succeeded, so it filled `old` (which was zeroed besides).
    rc == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

#[cfg(target_os = "linux")]
mod linux {
    //! `O_TMPFILE` files and `linkat`.

    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};

    use rustix::fs::{AtFlags, Mode, OFlags, CWD};

    /// An unnamed file in `dir`, with 0666 less the umask, as a new file would get. Readable
    /// too, so that it can be copied where it cannot be linked.
    pub fn unnamed_in(dir: &Path) -> io::Result<File> {
        let fd = rustix::fs::open(
            dir,
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )?;
        Ok(File::from(fd))
    }

    /// What a filesystem (or an old kernel) without `O_TMPFILE` answers.
    pub fn tmpfile_unsupported(e: &io::Error) -> bool {
        matches!(
            rustix::io::Errno::from_io_error(e),
            Some(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL
            )
        )
    }

    /// Gives `file` the name `to`: linked straight there when `to` does not exist, else
    /// linked to a temporary name beside it and renamed over it. The registry of named
    /// temporary files is held throughout, so a signal waits for the rename. `sync`: a copy
    /// made where linking fails is flushed to disk too.
    pub fn link_into_place(file: &File, to: &Path, sync: bool) -> io::Result<()> {
        place(file, to, sync, link)
    }

    /// [`link_into_place`] with the linking step given. Where linking fails (no /proc, a
    /// security module), the data is copied into the temporary file instead.
    pub(super) fn place(
        file: &File,
        to: &Path,
        sync: bool,
        link: impl Fn(&File, &Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut names = super::registry();
        // A new file needs no temporary name. When `to` exists, or linking fails, the file
        // gets a temporary name beside it (copied there if it cannot be linked).
        if link(file, to).is_ok() {
            return Ok(());
        }
        let dir = super::folder_of(to);
        let base = to.file_name().unwrap_or_default().to_string_lossy();
        let temp = match beside(dir, &base, |t| link(file, t)) {
            Ok(t) => t,
            Err(_) => beside(dir, &base, |t| copy(file, t, sync))?,
        };
        names.push(temp.clone());
        let r = std::fs::rename(&temp, to);
        if r.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        names.retain(|p| p != &temp);
        r
    }

    /// Makes `dir/.BASE.XXXXXXXX.tmp` with `make`, trying other names while one exists.
    fn beside(
        dir: &Path,
        base: &str,
        make: impl Fn(&Path) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        for attempt in 0..100u32 {
            let temp = dir.join(format!(
                ".{base}.{:08x}.tmp",
                std::process::id() ^ attempt.wrapping_mul(0x9e37_79b9)
            ));
            match make(&temp) {
                Ok(()) => return Ok(temp),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no free temporary file name"))
    }

    /// Copies the unnamed file's data, mode and (best effort) owner into the new file `to`
    /// (flushed to disk with `sync`), and closes it, checking the close.
    fn copy(mut file: &File, to: &Path, sync: bool) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::MetadataExt;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(to)?;
        let r = (|| {
            let meta = file.metadata()?;
            file.seek(SeekFrom::Start(0))?;
            io::copy(&mut file, &mut out)?;
            out.set_permissions(meta.permissions())?;
            let _ = rustix::fs::fchown(
                &out,
                Some(rustix::fs::Uid::from_raw(meta.uid())),
                Some(rustix::fs::Gid::from_raw(meta.gid())),
            );
            super::flush_if(&out, sync)
        })()
        .and_then(|()| super::close_checked(out));
        if r.is_err() {
            let _ = std::fs::remove_file(to);
        }
        r
    }

    /// `linkat` of an open unnamed file: by `AT_EMPTY_PATH` (needs CAP_DAC_READ_SEARCH), else
    /// through `/proc/self/fd`.
    fn link(file: &File, to: &Path) -> io::Result<()> {
        match rustix::fs::linkat(file, "", CWD, to, AtFlags::EMPTY_PATH) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::PERM | rustix::io::Errno::INVAL) => {
                use std::os::fd::AsRawFd;
                let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
                rustix::fs::linkat(CWD, proc.as_str(), CWD, to, AtFlags::SYMLINK_FOLLOW)
                    .map_err(io::Error::from)
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn nothing_exists_until_commit_and_drop_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let pending = PendingFile::create(&path).unwrap();
        assert!(!path.exists());
        drop(pending);
        assert!(!path.exists());
        assert!(entries(dir.path()).is_empty());

        PendingFile::create(&path)
            .unwrap()
            .commit_bytes(b"first")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(entries(dir.path()), ["out.txt"]);
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

    #[cfg(unix)]
    #[test]
    fn replacing_keeps_the_mode_and_follows_links() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        std::fs::write(&real, b"old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(entries(dir.path()), ["link.txt", "real.txt"]);
    }

    /// Files flushed to disk by `flush_if`, for the test below (no other test asks for it).
    pub(super) static SYNCS: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    // Only a durable output is flushed to disk (no test turns `set_fsync` on): on Linux's
    // unnamed-file path and on the named-temporary path, each with its bytes in place.
    #[test]
    fn only_durable_outputs_are_flushed() {
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let (plain, durable) = (dir.path().join("plain.bin"), dir.path().join("durable.bin"));
        let before = SYNCS.load(Relaxed);
        PendingFile::create(&plain)
            .unwrap()
            .commit_bytes(b"a")
            .unwrap();
        assert_eq!(SYNCS.load(Relaxed), before);
        PendingFile::create(&durable)
            .unwrap()
            .durable()
            .commit_bytes(b"b")
            .unwrap();
        assert_eq!(SYNCS.load(Relaxed), before + 1);
        write_named("plain.bin", &plain, None, b"c", false).unwrap();
        assert_eq!(SYNCS.load(Relaxed), before + 1);
        write_named("durable.bin", &durable, None, b"d", true).unwrap();
        assert_eq!(SYNCS.load(Relaxed), before + 2);
        assert_eq!(std::fs::read(&plain).unwrap(), b"c");
        assert_eq!(std::fs::read(&durable).unwrap(), b"d");
        assert_eq!(entries(dir.path()), ["durable.bin", "plain.bin"]);
    }

    // The path of systems and filesystems without O_TMPFILE: a named file only at the end.
    #[test]
    fn the_named_temp_path_replaces_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        write_named("out.bin", &target, None, b"one", false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        let keep = Keep::of(&std::fs::metadata(&target).unwrap());
        write_named("out.bin", &target, Some(&keep), b"two", false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(entries(dir.path()), ["out.bin"]);
        assert!(registry().is_empty());
        let err = write_named("gone/x", &dir.path().join("gone/x"), None, b"", false)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "gone/x: cannot write here");
        probe_dir(dir.path()).unwrap();
        assert_eq!(entries(dir.path()), ["out.bin"]);
    }

    #[cfg(unix)]
    #[test]
    fn link_chains_resolve_to_the_last_target() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::os::unix::fs::symlink("sub/b", d.join("a")).unwrap();
        std::os::unix::fs::symlink("c", d.join("sub/b")).unwrap();
        assert_eq!(final_target(&d.join("a")).unwrap(), d.join("sub/c"));
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        assert!(final_target(&d.join("loop")).is_err());
    }

    #[test]
    fn a_failed_write_names_the_path_and_the_reason() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from_raw_os_error(28))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let err = write_to("out.png", Full, |w| {
            w.write_all(&[0; 1 << 17])
                .context("the encoder's own words")
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.starts_with("out.png: cannot write: No space left on device"),
            "{msg}"
        );
    }

    // A stream cannot be taken back, so an encoder's failure must not flush what it began.
    #[test]
    fn a_failed_encoder_writes_nothing_through() {
        let mut sink = Vec::new();
        let err = write_to("-", &mut sink, |w| {
            w.write_all(b"half an image")?;
            bail!("the encoder gave up")
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "the encoder gave up");
        assert!(sink.is_empty());
    }

    // Where an unnamed file cannot be linked, its data is copied under a temporary name and
    // renamed: same result, nothing left.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_unlinkable_file_is_copied_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("out.txt");
        let no_link = |_: &File, _: &Path| Err(io::Error::from_raw_os_error(2));
        for content in [&b"new file"[..], b"replacing it"] {
            let mut file = linux::unnamed_in(dir.path()).unwrap();
            file.write_all(content).unwrap();
            linux::place(&file, &to, false, no_link).unwrap();
            assert_eq!(std::fs::read(&to).unwrap(), content);
            assert_eq!(entries(dir.path()), ["out.txt"]);
        }
    }

    // Issue 24: the caches (pipeline, tune) are written through write_atomic too; an input
    // noted before or after the output was created is never replaced.
    #[test]
    fn a_noted_input_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.png");
        std::fs::write(&input, b"image").unwrap();
        let alias = dir.path().join("cache.bin");
        #[cfg(unix)]
        std::os::unix::fs::symlink("in.png", &alias).unwrap();
        #[cfg(not(unix))]
        let alias = input.clone();
        let late = PendingFile::create(&alias).unwrap();
        note_input(&input);
        let err = late.commit_bytes(b"cache").unwrap_err();
        assert!(
            format!("{err:#}").contains("names an input file"),
            "{err:#}"
        );
        let err = write_atomic(&alias, b"cache").unwrap_err();
        assert!(err.downcast_ref::<crate::UsageError>().is_some(), "{err:#}");
        assert_eq!(std::fs::read(&input).unwrap(), b"image");
        PendingFile::create_over_input(&input)
            .unwrap()
            .commit_bytes(b"asked for")
            .unwrap();
        assert_eq!(std::fs::read(&input).unwrap(), b"asked for");
    }

    #[test]
    fn standard_stream_names() {
        assert_eq!(fd_alias(Path::new("-")), Some(1));
        assert_eq!(fd_alias(Path::new("/dev/stdout")), Some(1));
        assert_eq!(fd_alias(Path::new("/dev/stderr")), Some(2));
        assert_eq!(fd_alias(Path::new("out.png")), None);
        if cfg!(unix) {
            assert_eq!(fd_alias(Path::new("/dev/fd/7")), Some(7));
            assert_eq!(fd_alias(Path::new("/proc/self/fd/3")), Some(3));
        }
    }
}
