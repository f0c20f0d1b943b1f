//! What became of each file of a batch: the `--report` JSON document (docs/formats.md) and
//! the one-line summary on stderr.

use std::time::Duration;

use serde::Serialize;

use super::pipeline::StageTimes;

/// How one file ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    Ok,
    /// Its output existed already (`--skip-existing`).
    Skipped,
    Failed,
}

/// One file's line in the report.
#[derive(Clone, Debug, Serialize)]
pub struct FileRecord {
    pub input: String,
    pub output: Option<String>,
    pub status: FileStatus,
    /// The error, one line, when it failed.
    pub error: Option<String>,
    /// Where its time went; null for a skipped file.
    pub times: Option<StageTimes>,
    /// The index in `devices` of the device that worked on it; null when none did.
    pub device: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub files: usize,
    pub done: usize,
    pub skipped: usize,
    pub failed: usize,
    pub seconds: f64,
    /// Files done (not skipped) per second of the whole batch.
    pub images_per_second: f64,
}

/// The `--report` document: every file in input order, and the totals.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub gpukit_version: &'static str,
    pub command: &'static str,
    /// The devices (engines) the batch ran on.
    pub devices: Vec<String>,
    pub files: Vec<FileRecord>,
    pub summary: Summary,
}

impl crate::io::json::Document for Report {
    const SCHEMA: &'static str = "gpukit.batch-report/1";
}

impl Report {
    /// A report of `files` (in input order) for a batch that took `elapsed`.
    pub fn new(
        command: &'static str,
        devices: Vec<String>,
        files: Vec<FileRecord>,
        elapsed: Duration,
    ) -> Report {
        let count = |s: FileStatus| files.iter().filter(|f| f.status == s).count();
        let summary = Summary::new(
            count(FileStatus::Ok),
            count(FileStatus::Skipped),
            count(FileStatus::Failed),
            elapsed,
        );
        Report {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            command,
            devices,
            files,
            summary,
        }
    }

    /// "64 done, 0 skipped, 1 failed in 2.31 s (27.7 images/s)".
    pub fn summary_line(&self) -> String {
        self.summary.line()
    }
}

impl Summary {
    /// The totals of a batch that took `elapsed`.
    pub fn new(done: usize, skipped: usize, failed: usize, elapsed: Duration) -> Summary {
        let seconds = elapsed.as_secs_f64();
        Summary {
            files: done + skipped + failed,
            done,
            skipped,
            failed,
            seconds,
            images_per_second: if seconds > 0.0 {
                done as f64 / seconds
            } else {
                0.0
            },
        }
    }

    /// "64 done, 0 skipped, 1 failed in 2.31 s (27.7 images/s)": the line a batch of more
    /// than one file ends with.
    pub fn line(&self) -> String {
        format!(
            "{} done, {} skipped, {} failed in {:.2} s ({:.1} images/s)",
            self.done, self.skipped, self.failed, self.seconds, self.images_per_second
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: FileStatus) -> FileRecord {
        FileRecord {
            input: "in.png".into(),
            output: Some("out/in.png".into()),
            status,
            error: (status == FileStatus::Failed).then(|| "in.png: truncated".into()),
            times: None,
            device: None,
        }
    }

    #[test]
    fn totals_and_rate_count_only_the_files_done() {
        use FileStatus::*;
        let files = vec![record(Ok), record(Ok), record(Skipped), record(Failed)];
        let r = Report::new(
            "blur",
            vec!["cpu".into()],
            files,
            Duration::from_millis(500),
        );
        assert_eq!(
            r.summary,
            Summary {
                files: 4,
                done: 2,
                skipped: 1,
                failed: 1,
                seconds: 0.5,
                images_per_second: 4.0
            }
        );
        assert_eq!(
            r.summary_line(),
            "2 done, 1 skipped, 1 failed in 0.50 s (4.0 images/s)"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["files"][2]["status"], "skipped");
        assert_eq!(json["files"][3]["error"], "in.png: truncated");
    }
}
