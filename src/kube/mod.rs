//! The Kubernetes world: it watches the API server (pods with this scheduler's name, all
//! nodes, bound pods, PodGroups and Queues), feeds the very same `Scheduler` the simulator
//! drives as events, and carries its decisions out (bindings with device annotations,
//! evictions, pod conditions and events, PodGroup and Queue status). No scheduling logic
//! lives here: this module converts and carries.

pub mod convert;
pub mod crd;
mod lease;
mod run;
pub mod serve;
mod watch;
pub mod world;
mod writer;

pub use run::{RunError, RunOptions, Serving, now_ms, run, run_with_config};
