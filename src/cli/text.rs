//! The flags of text array inputs (`.csv`, `.txt`) that `scan` and `matmul` share.

use clap::Args;

use crate::io::array::Header;

/// Whether a text input's first line is a header row: detected unless told.
#[derive(Debug, Args)]
pub struct HeaderArgs {
    /// The first line of a .csv/.txt input is a header row of column names, whatever they
    /// are (without it, a first line with no number in it is taken as one).
    #[arg(long, conflicts_with = "no_header")]
    header: bool,
    /// A .csv/.txt input has no header row: a first line of names is an error.
    #[arg(long)]
    no_header: bool,
}

impl HeaderArgs {
    pub fn header(&self) -> Header {
        match (self.header, self.no_header) {
            (true, _) => Header::Present,
            (_, true) => Header::Absent,
            _ => Header::Detect,
        }
    }
}
