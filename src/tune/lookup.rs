//! The tune cache as the ops read it: loaded once per device (on the first op that asks),
//! so a Rust program calling `ops::blur::run` gets the same tuned shapes as `gpukit blur`.
//! Which file, and who hears about it, is [`Settings`], given when the device is opened.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Result;
use serde::de::DeserializeOwned;

use super::cache::{self, Cache};
pub use crate::gpu::cache_files::{Settings, Source};
use crate::gpu::Gpu;

impl Settings {
    /// No tune cache: the ops' defaults (what the tests use, so that no user's cache changes
    /// what they see).
    pub fn off() -> Self {
        Settings {
            source: Source::Off,
            ..Settings::default()
        }
    }
}

/// The tune cache of one device, read once; each op asks it for its choice.
pub struct Tuned {
    cache: Option<(PathBuf, Cache)>,
    /// Why there is no cache, for the note.
    why_none: String,
    /// The last note, so that a batch of files says it once.
    said: Mutex<String>,
}

impl Tuned {
    /// Reads the cache `settings` names for `gpu`'s adapter. A stale, corrupt or unreadable
    /// one is ignored with a warning.
    pub fn load(gpu: &Gpu, settings: &Settings) -> Tuned {
        let mut t = Tuned {
            cache: None,
            why_none: String::new(),
            said: Mutex::new(String::new()),
        };
        let explicit = match &settings.source {
            Source::Off => {
                t.why_none = "--no-tune-cache".into();
                return t;
            }
            Source::File(p) => Some(p.as_path()),
            Source::UserCache => None,
        };
        let path = match cache::path_for(gpu, explicit) {
            Ok(p) => p,
            Err(e) => {
                t.why_none = format!("{e:#}");
                return t;
            }
        };
        if explicit.is_none() && !path.exists() {
            t.why_none = format!("no tune cache at {}", path.display());
            return t;
        }
        match Cache::read(&path) {
            Err(e) => {
                (settings.warn)(&format!("ignoring the tune cache: {e:#}"));
                t.why_none = "the tune cache is unreadable".into();
            }
            Ok(c) => match c.stale_for(gpu) {
                Some(why) => {
                    (settings.warn)(&format!(
                        "{}: ignoring a stale tune cache ({why}); run `gpukit tune`",
                        path.display()
                    ));
                    t.why_none = "the tune cache is stale".into();
                }
                None => t.cache = Some((path, c)),
            },
        }
        t
    }

    /// The tuned choice of `op` for a problem of `size` (pixels, elements, or matmul's cube
    /// root of m n k), if the cache has one that `check` accepts on this adapter; `None`
    /// means the op's defaults. The note says which.
    pub fn choice<T: DeserializeOwned + Display>(
        &self,
        gpu: &Gpu,
        op: &str,
        size: f64,
        check: impl Fn(&T, &wgpu::Limits) -> Result<()>,
    ) -> Option<T> {
        let settings = &gpu.tune;
        let found = self.cache.as_ref().and_then(|(path, c)| {
            let entry = c.entry(op, size)?;
            match Cache::choice::<T>(entry).and_then(|t| check(&t, &gpu.limits).map(|_| t)) {
                Ok(t) => Some((t, path, entry)),
                Err(e) => {
                    (settings.warn)(&format!(
                        "{}: ignoring its {op} choice for {}: {e:#}",
                        path.display(),
                        entry.size
                    ));
                    None
                }
            }
        });
        if let Some(note) = settings.note {
            let line = match &found {
                Some((t, path, entry)) => format!(
                    "{op}: tuned {t} (cache {}, size class {})",
                    path.display(),
                    entry.size
                ),
                None if self.cache.is_some() => {
                    format!("{op}: defaults (no {op} entry in the tune cache)")
                }
                None => format!("{op}: defaults ({})", self.why_none),
            };
            let mut said = self.said.lock().expect("tune note lock poisoned");
            if *said != line {
                note(&line);
                *said = line;
            }
        }
        found.map(|(t, _, _)| t)
    }
}

/// `op`'s tuned choice on `gpu` for a problem of `size`, from the device's tune cache (read
/// on the first call); `None` means the op's defaults. See [`Tuned::choice`].
pub fn choice<T: DeserializeOwned + Display>(
    gpu: &Gpu,
    op: &str,
    size: f64,
    check: impl Fn(&T, &wgpu::Limits) -> Result<()>,
) -> Option<T> {
    gpu.attached(|| Tuned::load(gpu, &gpu.tune))
        .choice(gpu, op, size, check)
}
