//! Kant: a unified queue- and resource-aware scheduler for large AI GPU clusters.
//!
//! The core (`model`, `cache`, `queue`, `framework`, `plugins`, `metrics`) takes events and
//! returns decisions; it knows nothing of Kubernetes, HTTP or wall-clock time. Worlds feed
//! it: `sim` replays traces on a virtual clock.

pub mod cache;
pub mod config;
pub mod framework;
pub mod metrics;
pub mod model;
pub mod plugins;
pub mod queue;
pub mod sim;
