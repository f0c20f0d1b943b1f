//! Input and output: numeric arrays, atomic output files and JSON documents.

pub mod array;
pub mod json;
pub mod output;
