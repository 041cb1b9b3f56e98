//! `kscale completions SHELL`: a completion script generated from the clap
//! definitions, so completions never lag behind the options.

use crate::output::print;
use anyhow::Result;
use clap_complete::Shell;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale completions bash > ~/.local/share/bash-completion/completions/kscale
  kscale completions zsh > ~/.zfunc/_kscale      (with fpath+=(~/.zfunc) before compinit)
  kscale completions fish > ~/.config/fish/completions/kscale.fish")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Sh,
}

/// The shells the issue promises; clap_complete's PowerShell is left out
/// because kscale runs only on Linux.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Sh {
    Bash,
    Zsh,
    Fish,
    Elvish,
}

pub fn run(a: Args, mut cli: clap::Command) -> Result<ExitCode> {
    let shell = match a.shell {
        Sh::Bash => Shell::Bash,
        Sh::Zsh => Shell::Zsh,
        Sh::Fish => Shell::Fish,
        Sh::Elvish => Shell::Elvish,
    };
    // Generated into memory first: clap_complete panics on a write error,
    // and `print` turns a closed pipe into a quiet exit.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cli, "kscale", &mut buf);
    print(&String::from_utf8_lossy(&buf))?;
    Ok(ExitCode::SUCCESS)
}
