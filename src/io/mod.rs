//! Input and output: images, numeric arrays, atomic output files and JSON documents.

pub mod array;
pub mod frames;
pub mod image;
pub mod jpeg;
pub mod json;
pub mod metadata;
pub mod output;
mod tiff;
