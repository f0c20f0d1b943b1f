//! Input and output: images, numeric arrays, atomic output files and JSON documents.

pub mod array;
pub mod image;
pub mod jpeg;
pub mod json;
pub mod metadata;
pub mod output;

/// Writes `text` to stdout; a closed pipe surfaces as an error `main` treats as success.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
