//! The tune cache: one JSON file per adapter and gpukit version holding the choices
//! `gpukit tune` measured, per op and size class; where it lives, how it is read (never
//! trusted blindly) and written (atomically). Format: docs/tune.md and docs/formats.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

pub use crate::gpu::cache_files::{cache_dir, AdapterKey};
use crate::gpu::Gpu;
use crate::io::output::write_atomic;

/// The most bytes a tune cache may hold (a real one holds a few KiB): a larger file is not
/// one, and is not read whole.
const MAX_BYTES: u64 = 16 << 20;

/// The version of the file's layout; a file of another version is ignored.
pub const FORMAT: u32 = 1;

/// One op's timing on one case, default against tuned, as measured by `gpukit tune`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageTime {
    /// What the stage chose (e.g. `box`, `tiles`).
    pub stage: String,
    /// The benchmark case it was timed on.
    pub case: String,
    pub default_ms: f64,
    pub tuned_ms: f64,
}

/// The choice for one op and size class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// round(log2) of the size the op is tuned at: pixels (blur, histogram), elements (scan),
    /// or the cube root of m n k (matmul).
    pub size_class: u32,
    /// The size measured, for people ("2048x1024", "2^20", "1024^3").
    pub size: String,
    /// The op's `Tunables`, field by field.
    pub choice: serde_json::Value,
    pub times: Vec<StageTime>,
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cache {
    pub format: u32,
    pub gpukit_version: String,
    pub adapter: AdapterKey,
    /// Whether `--quick` measured it (tiny sizes, few candidates).
    pub quick: bool,
    /// Op name to its entries, one per size class.
    pub ops: BTreeMap<String, Vec<Entry>>,
}

impl Cache {
    pub fn new(gpu: &Gpu, quick: bool) -> Cache {
        Cache {
            format: FORMAT,
            gpukit_version: env!("CARGO_PKG_VERSION").to_string(),
            adapter: AdapterKey::of(gpu),
            quick,
            ops: BTreeMap::new(),
        }
    }

    /// Why this cache does not apply to `gpu` under this gpukit, if it does not.
    pub fn stale_for(&self, gpu: &Gpu) -> Option<String> {
        let version = env!("CARGO_PKG_VERSION");
        if self.format != FORMAT {
            Some(format!(
                "format {} (this gpukit reads {FORMAT})",
                self.format
            ))
        } else if self.gpukit_version != version {
            Some(format!(
                "made by gpukit {} (this is {version})",
                self.gpukit_version
            ))
        } else if self.adapter != AdapterKey::of(gpu) {
            let a = &self.adapter;
            Some(format!(
                "made for {} ({}, driver {} {}), not this adapter",
                a.name, a.backend, a.driver, a.driver_info
            ))
        } else {
            None
        }
    }

    /// The entry of `op` nearest to a problem of `size` (pixels, elements, or matmul's cube
    /// root of m n k) in log2; on a tie, the larger class.
    pub fn entry(&self, op: &str, size: f64) -> Option<&Entry> {
        let class = size.max(1.0).log2();
        self.ops.get(op)?.iter().min_by(|a, b| {
            let da = (a.size_class as f64 - class).abs();
            let db = (b.size_class as f64 - class).abs();
            da.total_cmp(&db).then(b.size_class.cmp(&a.size_class))
        })
    }

    /// The choice of that entry as the op's type.
    pub fn choice<T: DeserializeOwned>(entry: &Entry) -> Result<T> {
        serde_json::from_value(entry.choice.clone()).context("its choice does not parse")
    }

    /// Reads and parses a cache file (staleness is the caller's question).
    pub fn read(path: &Path) -> Result<Cache> {
        use std::io::Read;
        let name = path.display();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_BYTES + 1).read_to_string(&mut text))
            .with_context(|| format!("{name}: cannot read"))?;
        if text.len() as u64 > MAX_BYTES {
            bail!(
                "{name}: larger than {} MiB, not a gpukit tune cache",
                MAX_BYTES >> 20
            );
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not a gpukit tune cache", path.display()))
    }

    /// Whether `gpukit tune` may replace the file at `path`: there is none, it is empty, or
    /// it is a tune cache of any gpukit (stale or not: a JSON object with a `gpukit_version`
    /// and `ops`). Anything else is someone's file named by mistake (`--tune-cache
    /// photo.png`), which an unreadable cache would otherwise have replaced.
    pub fn check_replaceable(path: &Path) -> Result<()> {
        use std::io::Read;
        let mut head = Vec::new();
        match std::fs::File::open(path) {
            Ok(f) => f
                .take(MAX_BYTES + 1)
                .read_to_end(&mut head)
                .with_context(|| format!("{}: cannot read", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
        };
        let ours = head.is_empty()
            || serde_json::from_slice::<serde_json::Value>(&head)
                .is_ok_and(|v| v.get("gpukit_version").is_some() && v.get("ops").is_some());
        if !ours {
            bail!(
                "{}: not a gpukit tune cache, so it is not replaced (remove it, or name \
                 another file with --tune-cache)",
                path.display()
            );
        }
        Ok(())
    }

    /// Replaces the cache at `path` with `f` of what it holds now (`None`: no file yet), under
    /// an exclusive lock on its folder, so that two processes updating one cache (two
    /// `gpukit tune` runs) each add to what the other wrote instead of losing it. The lock
    /// is the folder's own (nothing is left beside the cache); where a folder cannot be
    /// locked (not Unix), the update is read-merge-replace without it.
    pub fn update(path: &Path, f: impl FnOnce(Option<Result<Cache>>) -> Cache) -> Result<()> {
        let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d,
            None => Path::new("."),
        };
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
        #[cfg(unix)]
        let _lock = {
            let folder = std::fs::File::open(dir)
                .with_context(|| format!("{}: cannot open the folder", dir.display()))?;
            // Held until `folder` is closed, when this function returns.
            rustix::fs::flock(&folder, rustix::fs::FlockOperation::LockExclusive)
                .map_err(std::io::Error::from)
                .with_context(|| format!("{}: cannot lock the folder", dir.display()))?;
            folder
        };
        // Checked again under the lock: `gpukit tune` checks before it measures, minutes ago.
        Cache::check_replaceable(path)?;
        let current = path.exists().then(|| Cache::read(path));
        f(current).write(path)
    }

    /// Writes the cache to `path` atomically, creating its folder.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
        }
        let mut text = serde_json::to_string_pretty(self).context("serialising the cache")?;
        text.push('\n');
        write_atomic(path, text.as_bytes())
    }
}

/// Where the cache of `gpu` is: `explicit` (--tune-cache, GPUKIT_TUNE_CACHE) or the cache
/// folder's file for this adapter.
pub fn path_for(gpu: &Gpu, explicit: Option<&Path>) -> Result<PathBuf> {
    match explicit {
        Some(p) => Ok(p.to_path_buf()),
        None => Ok(cache_dir()
            .map_err(|e| anyhow!("{e:#}; give --tune-cache FILE"))?
            .join(AdapterKey::of(gpu).file_name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size_class: u32) -> Entry {
        Entry {
            size_class,
            size: String::new(),
            choice: serde_json::json!({ "class": size_class }),
            times: Vec::new(),
        }
    }

    #[test]
    fn file_names_are_tame() {
        let key = AdapterKey {
            name: "NVIDIA H200 (NVL) / 141GB".into(),
            vendor_id: 0x10de,
            device_id: 0x2335,
            driver: "NVIDIA".into(),
            driver_info: "570.1".into(),
            backend: "vulkan".into(),
        };
        assert_eq!(
            key.file_name(),
            "tune-nvidia-h200-nvl-141gb-10de-2335-vulkan.json"
        );
        assert_eq!(
            key.pipeline_file_name(),
            "pipelines-nvidia-h200-nvl-141gb-10de-2335-vulkan.bin"
        );
    }

    #[test]
    fn the_nearest_size_class_answers() {
        let cache = Cache {
            format: FORMAT,
            gpukit_version: String::new(),
            adapter: AdapterKey {
                name: String::new(),
                vendor_id: 0,
                device_id: 0,
                driver: String::new(),
                driver_info: String::new(),
                backend: String::new(),
            },
            quick: false,
            ops: [("scan".to_string(), vec![entry(16), entry(20), entry(24)])].into(),
        };
        let class = |size: f64| cache.entry("scan", size).map(|e| e.size_class);
        assert_eq!(class(1.0), Some(16));
        assert_eq!(class((1u64 << 19) as f64), Some(20));
        // 2^22 is as near 20 as 24: the larger wins.
        assert_eq!(class((1u64 << 22) as f64), Some(24));
        assert_eq!(class(1e12), Some(24));
        assert_eq!(cache.entry("blur", 100.0), None);
    }
}
