//! Batch inputs: files, folders (their images, or their whole tree with `--recursive`),
//! quoted globs that gpukit expands itself (`'photos/**/*.jpg'`), lists of files
//! (`--files-from FILE|-`, NUL- or newline-separated), and `-`, stdin. Each input keeps its path relative to
//! the root it came from, which names its output under `--out-dir`.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Extensions of the image files a folder or a glob contributes.
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif", "pnm", "pbm", "pgm", "ppm", "pam",
    "tga", "qoi", "ico",
];

/// One input file of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// Where to read it.
    pub path: PathBuf,
    /// Its path below the root it was found under (a folder, a glob's fixed prefix, or the
    /// current folder for a listed file); a file named directly keeps its file name only.
    pub rel: PathBuf,
}

/// How the inputs of a batch are found.
#[derive(Clone, Debug, Default)]
pub struct InputOptions {
    /// Folders contribute the images in their whole tree, not only those directly in them.
    pub recursive: bool,
    /// A file listing inputs, one a line or NUL-separated; `-` reads the list from stdin.
    pub files_from: Option<PathBuf>,
    /// A folder that folders and globs pass over: `--out-dir`, so that a batch whose outputs
    /// lie within its input tree does not take them as inputs when run again (`--skip-existing`
    /// after an interruption). Files named or listed are taken wherever they are.
    pub exclude: Option<PathBuf>,
}

/// Whether a path names an image by its extension (case-insensitive).
pub fn has_image_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The name `-` (stdin) takes below `--out-dir`: `stdin.png`, or `stdin.EXT` with
/// `--out-format EXT`.
pub const STDIN_REL: &str = "stdin.png";

/// A batch's inputs, expanded.
#[derive(Debug)]
pub struct Expanded {
    pub items: Vec<Item>,
    /// What was left out, one line each, for the caller to warn of: links to a folder above
    /// them, which `--recursive` would follow for ever.
    pub left_out: Vec<String>,
}

/// Expands the command line's inputs and the `--files-from` list into the batch's items,
/// in the order given (a folder's or a glob's files sorted by path). `-` is stdin, which can
/// be read once: given twice, or beside `--files-from -`, it is a usage error. Errors name
/// the input.
pub fn expand(args: &[PathBuf], options: &InputOptions) -> Result<Expanded> {
    let stdin = Path::new("-");
    let uses = args.iter().filter(|a| a.as_path() == stdin).count()
        + usize::from(options.files_from.as_deref() == Some(stdin));
    if uses > 1 {
        bail!(crate::UsageError(
            "stdin (`-`) can be read once: give `-` once, as an input or as --files-from".into()
        ));
    }
    let exclude = Excluded::new(options.exclude.as_deref());
    let mut items = Vec::new();
    let mut left_out = Vec::new();
    for arg in args {
        if arg.as_path() == stdin {
            items.push(Item {
                path: arg.clone(),
                rel: STDIN_REL.into(),
            });
        } else if arg.is_dir() {
            items.extend(folder(arg, options.recursive, &exclude, &mut left_out)?);
        } else if !arg.exists() && is_glob(arg) {
            items.extend(glob_items(arg, &exclude)?);
        } else {
            let name = arg.file_name().map(PathBuf::from);
            let rel = name.unwrap_or_else(|| arg.clone());
            items.push(Item {
                path: arg.clone(),
                rel,
            });
        }
    }
    if let Some(list) = &options.files_from {
        items.extend(listed(list)?);
    }
    // No output of this command may replace one of them (io::output).
    crate::io::output::note_inputs(items.iter().map(|i| i.path.as_path()));
    Ok(Expanded { items, left_out })
}

/// The folder inputs pass over ([`InputOptions::exclude`]), known by its identity rather
/// than its spelling, so that `./out`, `out/` or a link to it are the same folder.
struct Excluded(Option<FolderId>);

#[cfg(unix)]
type FolderId = (u64, u64);
#[cfg(not(unix))]
type FolderId = PathBuf;

/// Whether `a` and `b` are one folder, however each is spelled (`./out`, `out/`, a link).
pub fn same_folder(a: &Path, b: &Path) -> bool {
    folder_id(a).is_some_and(|id| folder_id(b) == Some(id))
}

/// A folder's device and inode (its canonical path off Unix); `None` if it is no folder.
fn folder_id(path: &Path) -> Option<FolderId> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_dir())?;
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

impl Excluded {
    /// `dir`, if it exists yet (a batch's first run has no outputs to pass over).
    fn new(dir: Option<&Path>) -> Excluded {
        Excluded(dir.and_then(folder_id))
    }

    /// Whether `dir` is the excluded folder.
    fn is(&self, dir: &Path) -> bool {
        self.0.is_some() && folder_id(dir) == self.0
    }
}

fn folder(
    dir: &Path,
    recursive: bool,
    exclude: &Excluded,
    left_out: &mut Vec<String>,
) -> Result<Vec<Item>> {
    let name = dir.display();
    let depth = if recursive { usize::MAX } else { 1 };
    let mut items = Vec::new();
    // The folder named is walked even if it is the excluded one (writing over inputs is
    // refused later, unless --overwrite); only folders below it are passed over.
    let walk = walkdir::WalkDir::new(dir)
        .max_depth(depth)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_type().is_dir() || !exclude.is(e.path()));
    for entry in walk {
        let entry = match entry {
            Ok(entry) => entry,
            // A link to a folder above it: its files are listed already.
            Err(e) if e.loop_ancestor().is_some() => {
                let (link, to) = (e.path().unwrap_or(dir), e.loop_ancestor().unwrap_or(dir));
                left_out.push(format!(
                    "{}: left out, a link to {} that holds it (it would loop)",
                    link.display(),
                    to.display()
                ));
                continue;
            }
            // A folder below that cannot be listed fails as one input of the batch (its
            // reading says why), not the whole batch.
            Err(e) if e.depth() > 0 && e.path().is_some_and(Path::is_dir) => {
                let path = e.path().unwrap_or(dir).to_path_buf();
                let rel = path
                    .strip_prefix(dir)
                    .expect("walkdir yields paths below its root")
                    .to_path_buf();
                items.push(Item { path, rel });
                continue;
            }
            Err(e) => {
                let at = e.path().unwrap_or(dir).display().to_string();
                let why = match e.io_error() {
                    Some(io) => io.to_string(),
                    None => e.to_string(),
                };
                bail!("{at}: cannot list the folder: {why}")
            }
        };
        if entry.file_type().is_dir() || !has_image_extension(entry.path()) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(dir)
            .expect("walkdir yields paths below its root")
            .to_path_buf();
        items.push(Item {
            path: entry.into_path(),
            rel,
        });
    }
    if items.is_empty() {
        bail!("{name}: no image files in this folder");
    }
    Ok(items)
}

/// A path with a glob character in it (`*`, `?`, `[`).
fn is_glob(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.contains(['*', '?', '[']))
}

/// The folder a glob's matches are placed relative to: its components before the first one
/// with a glob character.
fn glob_root(pattern: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for c in pattern.components() {
        if c.as_os_str()
            .to_str()
            .is_some_and(|s| s.contains(['*', '?', '[']))
        {
            break;
        }
        root.push(c);
    }
    root
}

fn glob_items(pattern: &Path, exclude: &Excluded) -> Result<Vec<Item>> {
    let text = pattern.to_str().expect("is_glob checked it is UTF-8");
    let root = glob_root(pattern);
    let paths = glob::glob(text)
        .map_err(|e| crate::UsageError(format!("{text}: not a valid pattern: {}", e.msg)))?;
    let mut items = Vec::new();
    // Whether each folder a match lies in is within the excluded one, asked once a folder.
    let mut within = std::collections::HashMap::<PathBuf, bool>::new();
    let mut excluded = |dir: &Path| -> bool {
        if let Some(&known) = within.get(dir) {
            return known;
        }
        // Only folders below the pattern's fixed part: a pattern that names the excluded
        // folder itself is taken at its word.
        let known = dir
            .ancestors()
            .take_while(|a| *a != root.as_path() && !a.as_os_str().is_empty())
            .any(|a| exclude.is(a));
        within.insert(dir.to_path_buf(), known);
        known
    };
    let mut paths = paths
        .map(|p| p.with_context(|| format!("{text}: cannot list a folder it names")))
        .collect::<Result<Vec<_>>>()?;
    let others = not_utf8_matches(text, &root);
    if !others.is_empty() {
        // Those it reached through a folder's name it did not match (`**`) are there already.
        paths.extend(others);
        paths.sort();
        paths.dedup();
    }
    for path in paths {
        if path.is_dir() || !has_image_extension(&path) {
            continue;
        }
        if exclude.0.is_some() && path.parent().is_some_and(&mut excluded) {
            continue;
        }
        let rel = path.strip_prefix(&root).unwrap_or(&path);
        let rel = contained(rel).with_context(|| format!("{}", path.display()))?;
        items.push(Item { path, rel });
    }
    if items.is_empty() {
        bail!("{text}: no image file matches");
    }
    Ok(items)
}

/// The paths that are not UTF-8 and match `pattern`, which the glob crate passes over (its
/// matching takes text): matched here with each byte that is not UTF-8 as U+FFFD (so `*`
/// and `?` match it), in a walk of the pattern's fixed part `root` as deep as the pattern
/// goes.
fn not_utf8_matches(pattern: &str, root: &Path) -> Vec<PathBuf> {
    let Ok(compiled) = glob::Pattern::new(pattern) else {
        return Vec::new();
    };
    // As glob::glob matches each component: `*` stays within one.
    let options = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    let below = Path::new(pattern).components().count() - root.components().count();
    let depth = if pattern.contains("**") {
        usize::MAX
    } else {
        below
    };
    let start = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let walk = walkdir::WalkDir::new(start)
        .max_depth(depth)
        .follow_links(true);
    walk.sort_by_file_name()
        .into_iter()
        .flatten()
        .map(|e| match root.as_os_str().is_empty() {
            true => e.path().strip_prefix(".").unwrap_or(e.path()).to_path_buf(),
            false => e.into_path(),
        })
        .filter(|p| p.to_str().is_none() && compiled.matches_with(&p.to_string_lossy(), options))
        .collect()
}

/// The files listed in `list` (`-` for stdin): NUL-separated if the list holds a NUL, else
/// one a line; empty entries are skipped. A listed relative path keeps its folders under
/// `--out-dir`; an absolute one keeps its folders below the root.
fn listed(list: &Path) -> Result<Vec<Item>> {
    let name = list.display();
    let mut bytes = Vec::new();
    if list == Path::new("-") {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("--files-from -: cannot read stdin")?;
    } else {
        bytes = std::fs::read(list).with_context(|| format!("{name}: cannot read"))?;
    }
    let sep = if bytes.contains(&0) { b'\0' } else { b'\n' };
    let mut items = Vec::new();
    for entry in bytes.split(|&b| b == sep) {
        let entry = if sep == b'\n' {
            entry.strip_suffix(b"\r").unwrap_or(entry)
        } else {
            entry
        };
        if entry.is_empty() {
            continue;
        }
        let mut path = path_from_bytes(entry)
            .with_context(|| format!("{name}: an entry is not a valid path"))?;
        // A listed `-` is a file of that name, not stdin.
        if path == Path::new("-") {
            path = Path::new(".").join("-");
        }
        let rel = relative_part(&path).with_context(|| format!("{}", path.display()))?;
        items.push(Item { path, rel });
    }
    Ok(items)
}

/// A glob match's path below the pattern's fixed part, with `x/..` pairs taken out; a match
/// whose `..` climbs above that part (`'in/*/../../b.png'`) would be written outside
/// `--out-dir`, so it is refused.
fn contained(rel: &Path) -> Result<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                if parts.pop().is_none() {
                    bail!(crate::UsageError(
                        "the pattern's `..` climbs above its fixed part, so the output would \
                         lie outside --out-dir; start the pattern from a folder above"
                            .into()
                    ));
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if parts.is_empty() {
        bail!("not a file");
    }
    Ok(parts.iter().collect())
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(OsString::from_vec(bytes.to_vec())))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> Result<PathBuf> {
    let s = std::str::from_utf8(bytes).context("not UTF-8")?;
    Ok(PathBuf::from(OsString::from(s)))
}

/// The part of a listed path that names its output below `--out-dir`: its normal
/// components. `..` would leave the output folder, so it is refused.
fn relative_part(path: &Path) -> Result<PathBuf> {
    let mut rel = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => rel.push(part),
            Component::ParentDir => bail!(
                "a listed path with `..` cannot be placed under --out-dir; list it from a folder above"
            ),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if rel.as_os_str().is_empty() {
        bail!("not a file");
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, rel: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    fn rels(items: &[Item]) -> Vec<String> {
        items.iter().map(|i| i.rel.display().to_string()).collect()
    }

    #[test]
    fn folders_give_their_images_sorted_and_recursive_keeps_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.png", "a.JPG", "notes.txt", "sub/c.png", "sub/deep/d.tif"] {
            touch(dir.path(), f);
        }
        let flat = expand(&[dir.path().into()], &InputOptions::default())
            .unwrap()
            .items;
        assert_eq!(rels(&flat), ["a.JPG", "b.png"]);
        let options = InputOptions {
            recursive: true,
            ..Default::default()
        };
        let deep = expand(&[dir.path().into()], &options).unwrap().items;
        assert_eq!(
            rels(&deep),
            ["a.JPG", "b.png", "sub/c.png", "sub/deep/d.tif"]
        );
        assert_eq!(deep[3].path, dir.path().join("sub/deep/d.tif"));
    }

    #[test]
    fn folders_and_globs_pass_over_the_output_folder_however_it_is_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "in/a.png",
            "in/sub/b.png",
            "in/soft/a.png",
            "in/soft/sub/b.png",
        ] {
            touch(d, f);
        }
        let recursive = |exclude: &Path| InputOptions {
            recursive: true,
            exclude: Some(exclude.to_path_buf()),
            ..Default::default()
        };
        for spelled in [
            d.join("in/soft"),
            d.join("in/./soft/"),
            d.join("in/sub/../soft"),
        ] {
            let items = expand(&[d.join("in")], &recursive(&spelled)).unwrap().items;
            assert_eq!(
                rels(&items),
                ["a.png", "sub/b.png"],
                "{}",
                spelled.display()
            );
            let glob = d.join("in/**/*.png");
            let items = expand(&[glob], &recursive(&spelled)).unwrap().items;
            assert_eq!(
                rels(&items),
                ["a.png", "sub/b.png"],
                "{}",
                spelled.display()
            );
        }
        // A link to it is the same folder.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.join("in/soft"), d.join("link")).unwrap();
            let items = expand(&[d.join("in")], &recursive(&d.join("link")))
                .unwrap()
                .items;
            assert_eq!(rels(&items), ["a.png", "sub/b.png"]);
        }
        // Named directly, by a pattern into it, or as the folder walked, it is taken.
        let opts = recursive(&d.join("in/soft"));
        let named = expand(&[d.join("in/soft/a.png")], &opts).unwrap().items;
        assert_eq!(rels(&named), ["a.png"]);
        let into = expand(&[d.join("in/soft/*.png")], &opts).unwrap().items;
        assert_eq!(rels(&into), ["a.png"]);
        let walked = expand(&[d.join("in/soft")], &opts).unwrap().items;
        assert_eq!(rels(&walked), ["a.png", "sub/b.png"]);
        // Not there yet (a first run): nothing is passed over.
        let items = expand(&[d.join("in")], &recursive(&d.join("in/new")))
            .unwrap()
            .items;
        assert_eq!(items.len(), 4);
    }

    #[test]
    fn an_empty_folder_and_an_unmatched_glob_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = expand(&[dir.path().into()], &InputOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no image files"), "{err}");
        let pattern = dir.path().join("*.png");
        let err = expand(&[pattern], &InputOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no image file matches"), "{err}");
    }

    #[test]
    fn globs_are_expanded_relative_to_their_fixed_prefix() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["x/1.png", "x/y/2.png", "x/y/z/3.jpg", "x/skip.txt"] {
            touch(dir.path(), f);
        }
        let pattern = dir.path().join("x/**/*.png");
        let items = expand(&[pattern], &InputOptions::default()).unwrap().items;
        assert_eq!(rels(&items), ["1.png", "y/2.png"]);
    }

    #[test]
    fn stdin_is_one_input_read_once() {
        let items = expand(&["a.png".into(), "-".into()], &InputOptions::default())
            .unwrap()
            .items;
        assert_eq!(items[1].path, PathBuf::from("-"));
        assert_eq!(items[1].rel, PathBuf::from("stdin.png"));
        let twice = expand(&["-".into(), "-".into()], &InputOptions::default()).unwrap_err();
        assert!(
            twice.downcast_ref::<crate::UsageError>().is_some(),
            "{twice}"
        );
        let options = InputOptions {
            files_from: Some("-".into()),
            ..Default::default()
        };
        let both = expand(&["-".into()], &options).unwrap_err();
        assert!(both.to_string().contains("read once"), "{both}");
    }

    #[test]
    fn a_named_file_keeps_its_name_only() {
        let items = expand(&["some/where/f.png".into()], &InputOptions::default())
            .unwrap()
            .items;
        assert_eq!(items[0].rel, PathBuf::from("f.png"));
        assert_eq!(items[0].path, PathBuf::from("some/where/f.png"));
    }

    #[test]
    fn lists_split_on_nul_or_newlines_and_keep_odd_names() {
        let dir = tempfile::tempdir().unwrap();
        let nul = dir.path().join("list0");
        std::fs::write(&nul, b"a b.png\0sub/\xc3\xa9t\xc3\xa9.png\0new\nline.png\0").unwrap();
        let options = InputOptions {
            files_from: Some(nul),
            ..Default::default()
        };
        let items = expand(&[], &options).unwrap().items;
        assert_eq!(rels(&items), ["a b.png", "sub/été.png", "new\nline.png"]);

        let lines = dir.path().join("list");
        std::fs::write(&lines, b"/abs/p.png\r\n\n./rel/q.png\n").unwrap();
        let options = InputOptions {
            files_from: Some(lines),
            ..Default::default()
        };
        let items = expand(&[], &options).unwrap().items;
        assert_eq!(rels(&items), ["abs/p.png", "rel/q.png"]);
        assert_eq!(items[0].path, PathBuf::from("/abs/p.png"));
    }

    #[test]
    fn a_listed_path_that_climbs_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("list");
        std::fs::write(&list, b"../up.png\n").unwrap();
        let options = InputOptions {
            files_from: Some(list),
            ..Default::default()
        };
        let err = expand(&[], &options).unwrap_err();
        assert!(format!("{err:#}").contains("`..`"), "{err:#}");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_back_up_the_tree_is_left_out_with_a_line_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["in/a.png", "in/sub/b.png"] {
            touch(d, f);
        }
        std::os::unix::fs::symlink(d.join("in"), d.join("in/sub/up")).unwrap();
        let options = InputOptions {
            recursive: true,
            ..Default::default()
        };
        let expanded = expand(&[d.join("in")], &options).unwrap();
        assert_eq!(rels(&expanded.items), ["a.png", "sub/b.png"]);
        assert_eq!(expanded.left_out.len(), 1, "{:?}", expanded.left_out);
        assert!(
            expanded.left_out[0].contains("sub/up: left out"),
            "{:?}",
            expanded.left_out
        );
    }
}
