//! The pipeline cache on disk: the driver's compiled pipelines (`wgpu::PipelineCache`, on
//! Vulkan), kept between runs beside the tune cache and keyed and invalidated as it is
//! (adapter, driver, gpukit version), so that a second run skips most shader compilation.
//! Read when the device opens, written (atomically) when it closes if it changed. A cache
//! that is unreadable, cut short or corrupt is ignored with one warning; docs/tune.md.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::cache_files::{cache_dir, AdapterKey};
use crate::io::output::write_atomic;

/// Where the pipeline cache is and who hears about it: the tune cache's settings (`Off`,
/// [`Settings::off`], is the library's default here and `--no-pipeline-cache`; `UserCache`
/// the adapter's file beside its tune cache; `File` is `--pipeline-cache` or
/// GPUKIT_PIPELINE_CACHE).
pub use super::cache_files::{Settings, Source};

/// Says `msg` about the pipeline cache to whoever hears notes (`-v`).
fn note(settings: &Settings, msg: &str) {
    if let Some(note) = settings.note {
        note(&format!("pipeline cache: {msg}"));
    }
}

/// The first line of the file; the second is the [`Header`] as JSON; wgpu's data follows.
const MAGIC: &[u8] = b"gpukit pipeline cache\n";
/// The version of the file's layout.
const FORMAT: u32 = 1;

/// What the data is valid for, and a check of the data itself.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    format: u32,
    gpukit_version: String,
    adapter: AdapterKey,
    /// The length of wgpu's data after the header line.
    bytes: u64,
    /// FNV-1a (64-bit) of that data, in hex.
    fnv1a64: String,
}

/// FNV-1a, 64-bit: enough to tell a damaged file from a whole one (not an adversary).
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The file's bytes for `data` made on `adapter`.
fn encode(adapter: &AdapterKey, data: &[u8]) -> Result<Vec<u8>> {
    let header = Header {
        format: FORMAT,
        gpukit_version: env!("CARGO_PKG_VERSION").into(),
        adapter: adapter.clone(),
        bytes: data.len() as u64,
        fnv1a64: format!("{:016x}", fnv1a64(data)),
    };
    let mut out = MAGIC.to_vec();
    serde_json::to_writer(&mut out, &header).context("serialising the header")?;
    out.push(b'\n');
    out.extend_from_slice(data);
    Ok(out)
}

/// Why a file is not a pipeline cache at all (foreign: left alone), a damaged one (replaced
/// with a warning), or not one for `adapter` under this gpukit (stale: replaced silently, as
/// any run rebuilds it).
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    /// Not a pipeline cache at all: someone's file named by mistake, never replaced.
    Foreign,
    Damaged(String),
    Stale(String),
}

/// The file at `path` whole if it starts as a pipeline cache does (only its first bytes are
/// read to tell: `--pipeline-cache movie.mkv` reads no more), `None` if there is none yet (no
/// file, or an empty one); `Err(None)` for a file that is not one, `Err(Some(e))` for one
/// that cannot be read.
fn read_if_cache(path: &Path) -> Result<Option<Vec<u8>>, Option<std::io::Error>> {
    use std::io::Read;
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Some(e)),
    };
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAGIC.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(Some)?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes != MAGIC {
        return Err(None);
    }
    file.read_to_end(&mut bytes).map_err(Some)?;
    Ok(Some(bytes))
}

/// wgpu's data in `file`, if the file is whole and was made for `adapter` by this gpukit.
fn decode<'f>(file: &'f [u8], adapter: &AdapterKey) -> Result<&'f [u8], Unusable> {
    let damaged = |why: &str| Unusable::Damaged(why.to_string());
    let rest = file.strip_prefix(MAGIC).ok_or(Unusable::Foreign)?;
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| damaged("its header is cut short"))?;
    let header: Header = serde_json::from_slice(&rest[..end])
        .map_err(|e| Unusable::Damaged(format!("its header does not parse: {e}")))?;
    let data = &rest[end + 1..];
    if header.format != FORMAT {
        return Err(Unusable::Stale(format!(
            "format {} (this gpukit reads {FORMAT})",
            header.format
        )));
    }
    if data.len() as u64 != header.bytes {
        return Err(Unusable::Damaged(format!(
            "{} bytes of data where its header says {}",
            data.len(),
            header.bytes
        )));
    }
    if header.fnv1a64 != format!("{:016x}", fnv1a64(data)) {
        return Err(damaged("its data does not match its checksum"));
    }
    let version = env!("CARGO_PKG_VERSION");
    if header.gpukit_version != version {
        return Err(Unusable::Stale(format!(
            "made by gpukit {} (this is {version})",
            header.gpukit_version
        )));
    }
    if header.adapter != *adapter {
        let a = &header.adapter;
        return Err(Unusable::Stale(format!(
            "made for {} ({}, driver {} {})",
            a.name, a.backend, a.driver, a.driver_info
        )));
    }
    Ok(data)
}

/// A device's pipeline cache and the file it came from and goes back to.
pub(crate) struct PipelineCache {
    pub(crate) cache: wgpu::PipelineCache,
    path: PathBuf,
    adapter: AdapterKey,
    /// The length and checksum of the data read, so that unchanged data is not written back.
    read: Option<(usize, u64)>,
    settings: Settings,
}

impl PipelineCache {
    /// The pipeline cache of a device just opened on `info`'s adapter, seeded from its file;
    /// `None` when it is off or the backend has none. Never fails: a file that cannot be used
    /// is reported (a warning when damaged or unreadable, a note when missing or stale).
    pub(crate) fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        settings: &Settings,
    ) -> Option<PipelineCache> {
        let path = match &settings.source {
            Source::Off => {
                note(settings, "off");
                return None;
            }
            _ if !device.features().contains(wgpu::Features::PIPELINE_CACHE) => {
                note(
                    settings,
                    &format!(
                        "none on this adapter ({} has no pipeline cache)",
                        super::adapters::backend_name(info.backend)
                    ),
                );
                return None;
            }
            Source::File(p) => p.clone(),
            Source::UserCache => {
                let file = AdapterKey::from_info(info).pipeline_file_name();
                match cache_dir() {
                    Ok(dir) => dir.join(file),
                    Err(e) => {
                        (settings.warn)(&format!(
                            "no pipeline cache: {e:#}; give --pipeline-cache FILE"
                        ));
                        return None;
                    }
                }
            }
        };
        let adapter = AdapterKey::from_info(info);
        // A file that cannot be read, or someone's file named by mistake (`--pipeline-cache
        // photo.png`), is left as it is: no cache this run, so nothing is written over it.
        let refused = |why: String| {
            (settings.warn)(&format!(
                "{}: {why}, so it is not replaced; no pipeline cache this run (name another \
                 file with --pipeline-cache)",
                path.display()
            ));
        };
        let bytes = match read_if_cache(&path) {
            Ok(Some(b)) => Some(b),
            Ok(None) => {
                note(settings, &format!("none yet at {}", path.display()));
                None
            }
            Err(None) => {
                refused("not a gpukit pipeline cache".into());
                return None;
            }
            Err(Some(e)) => {
                refused(format!("cannot read it: {e}"));
                return None;
            }
        };
        let data = bytes.as_deref().and_then(|b| match decode(b, &adapter) {
            Ok(data) => Some(data),
            // Refused by `read_if_cache` already.
            Err(Unusable::Foreign) => None,
            Err(Unusable::Damaged(why)) => {
                (settings.warn)(&format!(
                    "{}: ignoring a damaged pipeline cache ({why}); it is rebuilt",
                    path.display()
                ));
                None
            }
            Err(Unusable::Stale(why)) => {
                note(
                    settings,
                    &format!("{}: stale ({why}); rebuilding it", path.display()),
                );
                None
            }
        });
        let cache = match data.and_then(|d| seeded(device, d, settings, &path)) {
            Some(cache) => {
                let d = data.expect("seeded from data");
                note(
                    settings,
                    &format!("read {} bytes from {}", d.len(), path.display()),
                );
                cache
            }
            None => create(device, None),
        };
        Some(PipelineCache {
            cache,
            read: data.map(|d| (d.len(), fnv1a64(d))),
            path,
            adapter,
            settings: settings.clone(),
        })
    }

    /// Writes the cache back if the driver's data changed since it was read (new pipelines
    /// were compiled), atomically; a failure is a warning, never an error of the run.
    pub(crate) fn save(&self) {
        let Some(data) = self.cache.get_data() else {
            return;
        };
        if self.read == Some((data.len(), fnv1a64(&data))) {
            note(
                &self.settings,
                &format!(
                    "unchanged, not written ({} bytes at {})",
                    data.len(),
                    self.path.display()
                ),
            );
            return;
        }
        match write(&self.path, &self.adapter, &data) {
            Ok(()) => note(
                &self.settings,
                &format!("wrote {} bytes to {}", data.len(), self.path.display()),
            ),
            Err(e) => (self.settings.warn)(&format!("could not write the pipeline cache: {e:#}")),
        }
    }
}

/// A cache seeded with `data`, or `None` (with a warning) when wgpu refuses it: made for
/// another device or driver than its header says, which only a damaged file can be.
fn seeded(
    device: &wgpu::Device,
    data: &[u8],
    settings: &Settings,
    path: &Path,
) -> Option<wgpu::PipelineCache> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let cache = create(device, Some(data));
    match pollster::block_on(scope.pop()) {
        None => Some(cache),
        Some(e) => {
            (settings.warn)(&format!(
                "{}: ignoring the pipeline cache: wgpu refused it ({}); it is rebuilt",
                path.display(),
                super::kernel::one_line(&e.to_string())
            ));
            None
        }
    }
}

fn create(device: &wgpu::Device, data: Option<&[u8]>) -> wgpu::PipelineCache {
    // SAFETY: `data` is what `PipelineCache::get_data` returned on an adapter with the same
    // key (the header's adapter, driver and gpukit version match, its checksum holds); wgpu
    // checks its own header too, and with `fallback` starts empty where that check fails.
    unsafe {
        device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
            label: Some("gpukit"),
            data,
            fallback: true,
        })
    }
}

fn write(path: &Path, adapter: &AdapterKey, data: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    }
    if path.is_dir() {
        bail!("{}: is a folder", path.display());
    }
    write_atomic(path, &encode(adapter, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(driver_info: &str) -> AdapterKey {
        AdapterKey {
            name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            vendor_id: 0x10005,
            device_id: 0,
            driver: "llvmpipe".into(),
            driver_info: driver_info.into(),
            backend: "vulkan".into(),
        }
    }

    #[test]
    fn a_file_reads_back_only_whole_and_for_its_adapter() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let file = encode(&key("Mesa 22.3.6"), &data).unwrap();
        assert_eq!(decode(&file, &key("Mesa 22.3.6")), Ok(&data[..]));
        // Another driver: stale, not damaged.
        assert!(matches!(
            decode(&file, &key("Mesa 23.0.0")),
            Err(Unusable::Stale(why)) if why.contains("Mesa 22.3.6")
        ));
        // Cut inside the magic: not a cache at all (never replaced); past it: damaged.
        for cut in [0, 5, MAGIC.len() - 1] {
            assert_eq!(
                decode(&file[..cut], &key("Mesa 22.3.6")),
                Err(Unusable::Foreign),
                "cut at {cut}"
            );
        }
        for cut in [MAGIC.len(), MAGIC.len() + 10, file.len() - 1] {
            assert!(
                matches!(
                    decode(&file[..cut], &key("Mesa 22.3.6")),
                    Err(Unusable::Damaged(_))
                ),
                "cut at {cut}"
            );
        }
        // One byte of the data changed: damaged.
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&flipped, &key("Mesa 22.3.6")),
            Err(Unusable::Damaged(
                "its data does not match its checksum".into()
            ))
        );
    }

    #[test]
    fn fnv1a64_is_the_published_function() {
        // Test vectors of the FNV reference (www.isthe.com/chongo/tech/comp/fnv).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
