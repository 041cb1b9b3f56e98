//! The vocabulary of kscale (docs/method.md) and the arithmetic behind its run rules
//! (docs/method.md). Nothing here touches the operating system, so every rule can be
//! unit- and property-tested in isolation.

pub mod ahead;
pub mod budget;
pub mod changes;
pub mod cpus;
pub mod decision;
pub mod hist;
pub mod hostfit;
pub mod label;
pub mod model;
pub mod noise;
pub mod order;
pub mod pace;
pub mod params;
pub mod profile;
pub mod stats;
pub mod topo;
pub mod twosample;
pub mod usl;
pub mod verdict;

pub use cpus::{CpuConfig, CpuSpecError};
pub use model::{
    load_bound, CaseKey, Direction, MetricDef, MetricKind, RoleCpu, RunRule, TrialValues, CAPACITY,
};
pub use params::{ParamDef, ParamError, ParamKind, Params};
pub use stats::{Decision, Estimate, Estimator, Follows, StopRule, Summary, Welch};
pub use topo::{CpuOrder, Topology};
