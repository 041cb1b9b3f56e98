//! `kscale import FILE.json…`: merges runs exported by `kscale export
//! --format json` on other machines into this store (docs/fleet.md).

use crate::error::user;
use anyhow::Result;
use kscale_store::import::ImportError;
use kscale_store::{ImportOutcome, Store};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  kscale import lab1.json lab2.json       merge two machines' exported runs
  kscale import --label lab1 run.json     store the run under another label")]
pub struct Args {
    /// Files written by `kscale export RUN --format json`.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Store the runs under this label instead of their own.
    #[arg(long)]
    label: Option<String>,
}

pub fn run(args: Args, db: Option<PathBuf>) -> Result<ExitCode> {
    if let Some(l) = &args.label {
        crate::engine::args::check_label(l)?;
    }
    let store = super::open_store(db)?;
    let mut status = ExitCode::SUCCESS;
    for f in &args.files {
        match import_file(&store, f, args.label.as_deref()) {
            Ok(msg) => eprintln!("kscale: {msg}"),
            // Each bad file costs one line; the others are still merged.
            Err(e) if args.files.len() > 1 => status = crate::error::report(&e),
            Err(e) => return Err(e),
        }
    }
    Ok(status)
}

/// Imports one export file; the message says what happened.
pub fn import_file(store: &Store, path: &Path, label: Option<&str>) -> Result<String> {
    let name = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| user(format!("cannot read {name}: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| user(format!("{name} is not a kscale export (not JSON: {e})")))?;
    let outcome = import_value(store, &v, label).map_err(|e| match e {
        ImportError::NotExport(_) | ImportError::TooNew { .. } | ImportError::Clash { .. } => {
            user(format!("{name}: {e}"))
        }
        e => anyhow::Error::new(e).context(format!("cannot import {name}")),
    })?;
    let uuid = v["run"]["uuid"].as_str().unwrap_or_default();
    Ok(match outcome {
        ImportOutcome::Imported(id) => {
            let row = store.run(id)?;
            format!(
                "{name}: imported run {uuid} as run {id} ({}, {} cases)",
                row.label, row.cases_total
            )
        }
        ImportOutcome::AlreadyThere(id) => {
            format!("{name}: run {uuid} is already stored as run {id}; nothing to do")
        }
    })
}

/// Imports one parsed export.
pub fn import_value(
    store: &Store,
    v: &serde_json::Value,
    label: Option<&str>,
) -> Result<ImportOutcome, ImportError> {
    store.import_run(v, label, &|s, id| {
        super::export::run_json(s, id).map_err(|e| ImportError::Render(format!("{e:#}")))
    })
}
