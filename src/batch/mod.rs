//! Batches of files: the inputs (files, folders, globs, lists), the pipeline that decodes and
//! encodes on all cores around one engine, and the report of what became of each file.

pub mod baselines;
pub mod compare;
pub mod driver;
pub mod histogram;
pub mod images;
pub mod inputs;
pub mod masks;
pub mod merge;
pub mod outputs;
pub mod pipeline;
pub mod report;
pub mod shard;
pub mod staging;
pub mod video;
pub mod video_gpu;

pub use inputs::{expand, same_folder, Expanded, InputOptions, Item};
pub use pipeline::{Outcome, Pipeline, StageTimes, Stages};
pub use report::{FileRecord, FileStatus, Report};
