//! JSON documents: pretty-printed with a trailing newline, to a file (atomically) or stdout.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use super::output::PendingFile;

/// Where `--json` sends its document: a file, or stdout for `-`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonDest {
    Stdout,
    File(PathBuf),
}

impl std::str::FromStr for JsonDest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("expected a file name or - for stdout".into()),
            "-" => Ok(JsonDest::Stdout),
            _ => Ok(JsonDest::File(PathBuf::from(s))),
        }
    }
}

/// A JSON destination opened before the work starts, so a bad path fails at once.
pub enum JsonSink {
    Stdout,
    File(PendingFile),
}

impl JsonSink {
    pub fn open(dest: &JsonDest) -> Result<Self> {
        Ok(match dest {
            JsonDest::Stdout => JsonSink::Stdout,
            JsonDest::File(p) => JsonSink::File(PendingFile::create(p)?),
        })
    }

    pub fn is_stdout(&self) -> bool {
        matches!(self, JsonSink::Stdout)
    }

    pub fn write<T: Serialize>(self, value: &T) -> Result<()> {
        let mut text = serde_json::to_string_pretty(value).context("serialising JSON")?;
        text.push('\n');
        match self {
            JsonSink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.flush()?;
                Ok(())
            }
            JsonSink::File(f) => f.commit_bytes(text.as_bytes()),
        }
    }
}
