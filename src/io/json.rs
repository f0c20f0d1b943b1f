//! JSON documents: pretty-printed with a trailing newline, to a file (atomically), a device
//! or FIFO, or stdout.

use std::path::{Path, PathBuf};

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

impl JsonDest {
    /// The file, if not stdout.
    pub fn path(&self) -> Option<&Path> {
        match self {
            JsonDest::Stdout => None,
            JsonDest::File(p) => Some(p),
        }
    }
}

/// A JSON destination opened before the work starts, so a bad path fails at once.
pub struct JsonSink(PendingFile);

impl JsonSink {
    /// Opens `dest`, given with `--json`. A file name must end in `.json` unless it names a
    /// device or FIFO: a mistyped `--json input.png` must not overwrite an image with JSON.
    pub fn open(dest: &JsonDest) -> Result<Self> {
        Self::open_as(dest, "--json")
    }

    /// Opens `dest`, given with `option` (named in its errors), as [`JsonSink::open`].
    pub fn open_as(dest: &JsonDest, option: &str) -> Result<Self> {
        let path = match dest {
            JsonDest::Stdout => Path::new("-"),
            JsonDest::File(p) => p,
        };
        super::output::check_extension(option, path, &["json"], "a JSON file")?;
        Ok(JsonSink(PendingFile::create(path)?))
    }

    pub fn is_stdout(&self) -> bool {
        self.0.is_stdout()
    }

    /// How the document will be written, for `-vv`.
    pub fn describe(&self) -> String {
        self.0.describe()
    }

    /// Writes `doc` with its `schema` first (`{"schema": "gpukit.histogram/1", ...}`).
    pub fn write<T: Document>(self, doc: &T) -> Result<()> {
        #[derive(Serialize)]
        struct Versioned<'a, T> {
            schema: &'static str,
            #[serde(flatten)]
            doc: &'a T,
        }
        self.write_value(&Versioned {
            schema: T::SCHEMA,
            doc,
        })
    }

    /// Writes a document built as a JSON value, which carries its own `schema` (`merge`'s,
    /// the schema of the documents it merged).
    pub fn write_value<T: Serialize>(self, value: &T) -> Result<()> {
        let mut text = serde_json::to_string_pretty(value).context("serialising JSON")?;
        text.push('\n');
        self.0.commit_bytes(text.as_bytes())
    }
}

/// A JSON document gpukit writes. Its `schema` names the document and its version
/// (`gpukit.histogram/1`); docs/schemas/NAME.schema.json is its JSON Schema, against which
/// scripts/validate_json.py checks real outputs in CI. A change that can break a reader (a
/// field removed, renamed or retyped) bumps the version; a field added does not.
pub trait Document: Serialize {
    const SCHEMA: &'static str;
}
