//! The input options every batch subcommand shares: files, folders, globs, lists, stdin, the
//! pool's width and the shard (docs/cli.md#batches, docs/scale-out.md).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use super::Ctx;
use crate::batch::shard::Shard;
use crate::batch::{self, InputOptions, Item, Pipeline};

#[derive(Debug, Args)]
pub struct InputArgs {
    /// Input images (PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO; 8 or 16 bits),
    /// folders of images, quoted globs that gpukit expands itself ('photos/**/*.jpg'), or `-`
    /// for an image on stdin (histogram: images one after another, as ffmpeg -f image2pipe;
    /// blur and histogram --per-frame: Y4M or raw video frames, docs/formats.md).
    #[arg(value_name = "IN", required_unless_present = "files_from")]
    pub inputs: Vec<PathBuf>,
    /// Folders give the images in their whole tree (blur: kept as a tree under --out-dir).
    #[arg(long)]
    pub recursive: bool,
    /// Also read inputs from FILE (`-`: stdin), NUL-separated if it holds a NUL, else one a line.
    #[arg(long, value_name = "FILE|-")]
    pub files_from: Option<PathBuf>,
    /// Files decoded at once, and as many encoded (default: the number of cores).
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: Option<u32>,
    /// Only the I-th of N disjoint parts of the inputs, chosen by a hash of each file's path
    /// (docs/scale-out.md). Without it, a Slurm array's or a Kubernetes Indexed Job's task
    /// index is used when set.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// How many shards a Kubernetes Indexed Job has (its completions), or to override Slurm's.
    #[arg(long, env = "GPUKIT_SHARD_COUNT", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub shard_count: Option<u64>,
}

impl InputArgs {
    /// The batch's files: the inputs expanded (folders and globs passing over `exclude`, the
    /// output folder), then this task's shard of them. With a shard, an empty list is not an
    /// error (a small batch over many tasks leaves some idle).
    pub fn items(&self, ctx: &Ctx, exclude: Option<&Path>) -> Result<Vec<Item>> {
        // --shard-count given beside --shard: the counts must agree (GPUKIT_SHARD_COUNT, set
        // for the scheduler's index, gives way to the flag).
        let from_env = || {
            std::env::var("GPUKIT_SHARD_COUNT")
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()
        };
        if let (Some(shard), Some(count)) = (self.shard, self.shard_count) {
            if shard.count != count && from_env() != Some(count) {
                anyhow::bail!(crate::UsageError(format!(
                    "--shard {shard} and --shard-count {count} disagree on the number of shards: \
                     give one of them"
                )));
            }
        }
        let options = InputOptions {
            recursive: self.recursive,
            files_from: self.files_from.clone(),
            exclude: exclude.map(Path::to_path_buf),
        };
        let expanded = batch::expand(&self.inputs, &options)?;
        for line in &expanded.left_out {
            ctx.warn(line);
        }
        let mut items = expanded.items;
        let shard = self.shard_from(ctx)?;
        if items.is_empty() && shard.is_none() {
            anyhow::bail!(crate::UsageError(
                "no inputs: --files-from listed none".into()
            ));
        }
        if let Some(shard) = shard {
            let all = items.len();
            items.retain(|i| shard.contains(&i.rel));
            if ctx.global.verbose > 0 {
                ctx.note(&format!("shard {shard}: {} of {all} files", items.len()));
            }
        }
        Ok(items)
    }

    /// The shard: the flag's, else the scheduler's (said with `-v`).
    fn shard_from(&self, ctx: &Ctx) -> Result<Option<Shard>> {
        if self.shard.is_some() {
            return Ok(self.shard);
        }
        let env = |name: &str| std::env::var(name).ok();
        let found = Shard::from_env(env, self.shard_count)
            .map_err(|e| crate::UsageError(format!("{e:#}")))?;
        Ok(found.map(|(shard, from)| {
            if ctx.global.verbose > 0 {
                ctx.note(&format!("shard {shard} from {from}"));
            }
            shard
        }))
    }

    pub fn pipeline(&self) -> Pipeline {
        Pipeline::new(self.jobs.map(|j| j as usize))
    }
}
