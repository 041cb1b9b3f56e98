//! Exit statuses (docs/method.md): bad input → one line and status 2; anything the
//! user cannot fix → status 1; interrupted → 128 + signal.

use std::process::ExitCode;
use thiserror::Error;

/// Something the user asked for that cannot be done as asked.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct UserError(pub String);

/// The run was stopped by a signal; everything has been cleaned up.
#[derive(Debug, Error)]
#[error("interrupted by signal {0}; run stored as interrupted (continue it with `kscale run --resume {1}`)")]
pub struct Interrupted(pub i32, pub i64);

/// A command that stores as it goes (`kscale vm`) was stopped by a
/// signal; what it stored stays.
#[derive(Debug, Error)]
#[error("interrupted by signal {0}; the boots that ended are stored")]
pub struct Stopped(pub i32);

pub fn user(msg: impl Into<String>) -> anyhow::Error {
    UserError(msg.into()).into()
}

fn is_user_error(e: &anyhow::Error) -> bool {
    use kscale_store::StoreError;
    if e.downcast_ref::<UserError>().is_some()
        || e.downcast_ref::<kscale_core::ParamError>().is_some()
        || e.downcast_ref::<kscale_core::CpuSpecError>().is_some()
    {
        return true;
    }
    matches!(
        e.downcast_ref::<StoreError>(),
        Some(
            StoreError::NoSuchRun(_)
                | StoreError::Foreign { .. }
                | StoreError::TooNew { .. }
                | StoreError::Open { .. }
                | StoreError::BadUrl { .. }
                | StoreError::Connect { .. }
        )
    )
}

pub fn report(e: &anyhow::Error) -> ExitCode {
    if let Some(i) = e.downcast_ref::<Interrupted>() {
        eprintln!("kscale: {i}");
        return ExitCode::from((128 + i.0).clamp(0, 255) as u8);
    }
    if let Some(i) = e.downcast_ref::<Stopped>() {
        eprintln!("kscale: {i}");
        return ExitCode::from((128 + i.0).clamp(0, 255) as u8);
    }
    if is_user_error(e) {
        eprintln!("kscale: error: {e}");
        return ExitCode::from(2);
    }
    eprintln!("kscale: error: {e:#}");
    ExitCode::from(1)
}
