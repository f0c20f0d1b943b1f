//! Where `gpukit compare` finds each pair's mask: `--mask FILE` for two images, `--mask DIR`
//! (a folder mirroring the compared tree) and `--ignore-regions FILE.json` (rectangles per
//! relative path) for two folders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::driver::Env;
use crate::ops::compare::{Mask, Rect};

/// The masks of a run.
#[derive(Default)]
pub struct Masks {
    /// `--mask`: one mask image (two images compared) or a folder of them (two folders).
    pub source: Option<PathBuf>,
    /// `--ignore-regions`: rectangles per relative path (two folders).
    pub regions: BTreeMap<String, Vec<Rect>>,
}

impl Masks {
    /// Reads `--ignore-regions FILE.json`: an object whose keys are relative paths (with `/`)
    /// and whose values are arrays of rectangles, each `"x1:y1-x2:y2"` or
    /// `{"x1": .., "y1": .., "x2": .., "y2": ..}` (corners included).
    pub fn read_regions(path: &Path) -> Result<BTreeMap<String, Vec<Rect>>> {
        let name = path.display();
        let text = std::fs::read_to_string(path).with_context(|| format!("{name}: cannot read"))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{name}: not JSON"))?;
        let bad = |why: String| anyhow::anyhow!("{name}: {why}");
        let obj = doc.as_object().ok_or_else(|| {
            bad("expected an object of relative paths to arrays of rectangles".into())
        })?;
        let mut out = BTreeMap::new();
        for (key, rects) in obj {
            let list = rects
                .as_array()
                .ok_or_else(|| bad(format!("{key:?}: expected an array of rectangles")))?;
            let mut parsed = Vec::new();
            for r in list {
                let rect = match r {
                    serde_json::Value::String(s) => s.parse::<Rect>(),
                    serde_json::Value::Object(o) => {
                        let field = |k: &str| {
                            o.get(k)
                                .and_then(serde_json::Value::as_u64)
                                .and_then(|v| u32::try_from(v).ok())
                        };
                        match (field("x1"), field("y1"), field("x2"), field("y2")) {
                            (Some(x1), Some(y1), Some(x2), Some(y2)) => {
                                format!("{x1}:{y1}-{x2}:{y2}").parse::<Rect>()
                            }
                            _ => Err("expected x1, y1, x2, y2 as whole numbers".into()),
                        }
                    }
                    _ => Err("expected \"x1:y1-x2:y2\" or {\"x1\", \"y1\", \"x2\", \"y2\"}".into()),
                };
                parsed.push(rect.map_err(|e| bad(format!("{key:?}: {e}")))?);
            }
            out.insert(key.clone(), parsed);
        }
        Ok(out)
    }

    /// Warns of `--ignore-regions` keys that name no compared pair (a typo would otherwise
    /// ignore nothing, silently).
    pub fn warn_unused(&self, env: &dyn Env, pairs: &[&PathBuf]) {
        for key in self.regions.keys() {
            if !pairs.iter().any(|p| rel_key(p) == *key) {
                env.warn(&format!(
                    "--ignore-regions: {key:?} names no file present in both folders"
                ));
            }
        }
    }

    /// Whether the pair at `rel` (None: two images) has a mask.
    pub fn has(&self, rel: Option<&Path>) -> bool {
        match rel {
            None => self.source.is_some(),
            Some(rel) => self.file_for(rel).is_some() || self.regions.contains_key(&rel_key(rel)),
        }
    }

    /// The mask image of the pair at `rel` in a mask folder: `DIR/rel`, else `rel` with the
    /// extension `.png`.
    fn file_for(&self, rel: &Path) -> Option<PathBuf> {
        let dir = self.source.as_ref()?;
        [dir.join(rel), dir.join(rel).with_extension("png")]
            .into_iter()
            .find(|p| p.is_file())
    }

    /// The mask of the pair at `rel` (None: two images), whose expected image is
    /// `width` x `height`: the mask image's non-black pixels, with the pair's regions added.
    /// A mask image of another size is an error.
    pub fn load(
        &self,
        env: &dyn Env,
        rel: Option<&Path>,
        (width, height): (u32, u32),
    ) -> Result<Option<Mask>> {
        let file = match rel {
            None => self.source.clone(),
            Some(rel) => self.file_for(rel),
        };
        let mut mask = match file {
            Some(path) => {
                let img = env.load_image(&path)?;
                if (img.width, img.height) != (width, height) {
                    anyhow::bail!(
                        "{}: the mask is {}x{}, the expected image {width}x{height}",
                        path.display(),
                        img.width,
                        img.height
                    );
                }
                Some(Mask::from_image(&img))
            }
            None => None,
        };
        if let Some(rects) = rel.and_then(|r| self.regions.get(&rel_key(r))) {
            mask.get_or_insert_with(|| Mask::empty(width, height))
                .add_rects(rects);
        }
        Ok(mask)
    }
}

/// A relative path as `--ignore-regions` keys name it: components joined by `/`.
fn rel_key(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
