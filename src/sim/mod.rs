//! The simulator world: traces, synthetic workloads, the discrete-event loop, reports.

pub mod synthetic;
pub mod trace;
