//! The Kubernetes world: it watches the API server (every pod, whichever scheduler it
//! names, nodes, PodGroups, Queues, and the claims, volumes and storage classes of pods'
//! volumes), feeds the very same `Scheduler` the simulator drives as events, and carries
//! its decisions out (bindings with device annotations, volume binding, evictions, pod
//! conditions and events, PodGroup and Queue status). Replicas elect a leader per shard on
//! a Lease. No scheduling logic
//! lives here: this module converts and carries.

pub mod convert;
pub mod crd;
mod events;
mod lease;
mod run;
pub mod serve;
mod watch;
pub mod world;
mod writer;

pub use lease::{ShardClaim, ShardSeen};
pub use run::{RunError, RunOptions, Serving, now_ms, run, run_with_config};
