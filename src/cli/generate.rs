//! `gpukit completions` and `gpukit man`: shell completions and man pages, generated from the
//! one clap definition so that they never drift from `--help`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};

use super::Status;
use crate::io::output::{write_atomic, PendingFile};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for. Bash: `source <(gpukit completions bash)`, or save it as
    /// /usr/share/bash-completion/completions/gpukit; zsh: save it as `_gpukit` on $fpath;
    /// fish: as ~/.config/fish/completions/gpukit.fish.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print, e.g. `blur` (gpukit-blur(1)); without it,
    /// gpukit(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Option<String>,
    /// Write every page (gpukit.1, gpukit-blur.1, ...) into DIR instead of printing one, e.g.
    /// /usr/local/share/man/man1.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub out_dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> Result<Status> {
    let mut cmd = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gpukit", &mut script);
    PendingFile::create("-".as_ref())?.commit_bytes(&script)?;
    Ok(Status::Success)
}

pub fn man(args: ManArgs) -> Result<Status> {
    let mut cmd = super::Cli::command();
    // Globals and help flags propagate to the subcommands only once the command is built.
    cmd.build();
    let pages = pages(&cmd);
    match (args.out_dir, args.subcommand) {
        (Some(dir), _) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("{}: cannot make the folder", dir.display()))?;
            for (name, page) in &pages {
                write_atomic(&dir.join(format!("{name}.1")), page)?;
            }
        }
        (None, sub) => {
            let name = match sub {
                Some(s) => format!("gpukit-{s}"),
                None => "gpukit".to_owned(),
            };
            let Some((_, page)) = pages.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = pages
                    .iter()
                    .skip(1)
                    .map(|(n, _)| &n["gpukit-".len()..])
                    .collect();
                return Err(crate::UsageError(format!(
                    "no subcommand {:?}; pages exist for: {}",
                    name.trim_start_matches("gpukit-"),
                    known.join(", ")
                ))
                .into());
            };
            PendingFile::create("-".as_ref())?.commit_bytes(page)?;
        }
    }
    Ok(Status::Success)
}

/// Each page's name (`gpukit`, `gpukit-blur`, ...) and roff text.
fn pages(cmd: &clap::Command) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![("gpukit".to_owned(), render(cmd.clone()))];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("gpukit-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("gpukit {}", sub.get_name()));
        out.push((name, render(page)));
    }
    out
}

fn render(cmd: clap::Command) -> Vec<u8> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .expect("rendering into memory cannot fail");
    page
}
