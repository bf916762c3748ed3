//! Kant: a unified queue- and resource-aware scheduler for large AI GPU clusters.
//!
//! The core (`model`, `cache`, `queue`, `framework`, `plugins`, `metrics`) takes events and
//! returns decisions; it knows nothing of Kubernetes, HTTP or wall-clock time. Worlds feed
//! it: `sim` replays traces on a virtual clock, `kube` schedules a Kubernetes cluster's
//! pods.
//!
//! A two-node cluster, a gang of two 8-GPU pods, one scheduling round:
//!
//! ```
//! use std::sync::Arc;
//! use kant::config::Config;
//! use kant::framework::{Bind, Decision, JobPlan, Plugin, Scheduler, Status};
//! use kant::model::*;
//!
//! struct BindAtOnce;
//! impl Plugin for BindAtOnce {
//!     fn name(&self) -> &'static str { "bind-at-once" }
//! }
//! impl Bind for BindAtOnce {
//!     fn bind(&self, _: &Job, _: &JobPlan) -> Status { Status::SUCCESS }
//! }
//!
//! let mut cluster = ClusterSpecBuilder::new();
//! for name in ["node-a", "node-b"] {
//!     let row = NodeRow {
//!         name: name.into(),
//!         gpu_model: Some("H100".into()),
//!         gpus: 8,
//!         cpu_milli: None,
//!         memory_bytes: None,
//!         leaf: None,
//!         hbd: None,
//!         ..Default::default()
//!     };
//!     cluster.add(row, LinkProfile::NvlinkAll).unwrap();
//! }
//! let config = Config::embedded();
//! let profile = kant::plugins::build_profile(config.profile("default").unwrap(), &config)
//!     .unwrap();
//! let mut scheduler = Scheduler::new(profile, Box::new(BindAtOnce), Arc::new(cluster.build()));
//! let pods = vec![PodRequest::gpus(GpuRequest::parse("8").unwrap()); 2];
//! scheduler.submit(Job::new(JobId(0), pods));
//! let decisions = scheduler.schedule(0);
//! assert!(matches!(&decisions[..], [Decision::Placed { plan, .. }] if plan.pods.len() == 2));
//! assert_eq!(scheduler.state().total().free_gpus, 0);
//! ```

pub mod cache;
#[doc(hidden)]
pub mod captured_log;
pub mod config;
pub mod framework;
pub mod kube;
pub mod metrics;
pub mod model;
pub mod plugins;
pub mod queue;
pub mod sim;
