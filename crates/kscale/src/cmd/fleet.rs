//! `kscale fleet`: placeholder while written.
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args, _db: Option<PathBuf>) -> Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
