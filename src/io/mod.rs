//! Input and output: atomic output files and JSON documents (images and arrays join later).

pub mod json;
pub mod output;
