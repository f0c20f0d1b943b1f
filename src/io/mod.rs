//! Input and output: images, video frame streams, numeric arrays, atomic output files and JSON
//! documents.

pub mod array;
pub mod image;
pub mod jpeg;
pub mod json;
pub mod metadata;
pub mod output;
#[cfg(target_os = "linux")]
pub mod pipe;
pub mod video;

/// Writes `text` to stdout; a closed pipe surfaces as an error `main` treats as success.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
