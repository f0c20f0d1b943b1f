//! Where gpukit's cache files live and what they are keyed by, shared by the pipeline cache
//! (gpu/pipeline_cache.rs) and the tune cache above gpu (crate::tune): the user's cache
//! folder, an adapter's key and file names, and where a cache is read from (`Source`) with
//! who hears about it (`Settings`).

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::Gpu;

/// What a cache is valid for: one adapter, driver and backend. Any difference makes a cache
/// stale (a driver update can move the best choice, or break one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterKey {
    pub name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver: String,
    pub driver_info: String,
    pub backend: String,
}

impl AdapterKey {
    pub fn of(gpu: &Gpu) -> AdapterKey {
        AdapterKey::from_info(&gpu.info)
    }

    /// The key of an adapter, before a device is open on it.
    pub fn from_info(info: &wgpu::AdapterInfo) -> AdapterKey {
        AdapterKey {
            name: info.name.clone(),
            vendor_id: info.vendor,
            device_id: info.device,
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            backend: format!("{:?}", info.backend).to_lowercase(),
        }
    }

    /// The tune cache's file name in the cache folder:
    /// `tune-<name>-<vendor>-<device>-<backend>.json`, the name lower-cased with runs of
    /// other characters as one `-`.
    pub fn file_name(&self) -> String {
        format!("tune-{}.json", self.stem())
    }

    /// The pipeline cache's file name beside it: `pipelines-<name>-<vendor>-<device>-<backend>.bin`
    /// (`crate::gpu`'s pipeline cache).
    pub fn pipeline_file_name(&self) -> String {
        format!("pipelines-{}.bin", self.stem())
    }

    fn stem(&self) -> String {
        let mut slug = String::new();
        for c in self.name.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.ends_with('-') {
                slug.push('-');
            }
        }
        format!(
            "{}-{:04x}-{:04x}-{}",
            slug.trim_matches('-'),
            self.vendor_id,
            self.device_id,
            self.backend
        )
    }
}

/// The user's cache folder for gpukit: `$XDG_CACHE_HOME/gpukit` (an absolute path) or
/// `~/.cache/gpukit` on Linux and other Unix systems, `~/Library/Caches/gpukit` on macOS,
/// `%LOCALAPPDATA%\gpukit` on Windows. The rules of the `dirs` crate, written out here.
pub fn cache_dir() -> Result<PathBuf> {
    let env_dir = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = if cfg!(windows) {
        env_dir("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        env_dir("HOME").map(|h| h.join("Library/Caches"))
    } else {
        env_dir("XDG_CACHE_HOME").or_else(|| env_dir("HOME").map(|h| h.join(".cache")))
    };
    match base {
        Some(b) => Ok(b.join("gpukit")),
        None => {
            bail!("no cache folder: HOME (or XDG_CACHE_HOME) is not set")
        }
    }
}

/// Where a cache is read from: where the ops look for tuned shapes, and where the device
/// keeps compiled pipelines.
#[derive(Clone, Debug, Default)]
pub enum Source {
    /// The adapter's file in the user's cache folder (docs/tune.md), when there is one.
    #[default]
    UserCache,
    /// This file (`--tune-cache`, GPUKIT_TUNE_CACHE); a missing one is reported.
    File(PathBuf),
    /// No cache: every op takes its defaults (`--no-tune-cache`).
    Off,
}

/// How the ops read the tune cache of a device, and who hears about it.
#[derive(Clone, Debug)]
pub struct Settings {
    pub source: Source,
    /// Hears which shape each op takes and why (`-v`); `None` says nothing.
    pub note: Option<fn(&str)>,
    /// Hears why a cache, or a choice in it, is ignored (stale, corrupt, unfit here).
    pub warn: fn(&str),
}

impl Default for Settings {
    /// The user's cache, silently.
    fn default() -> Self {
        Settings {
            source: Source::default(),
            note: None,
            warn: |_| {},
        }
    }
}
