//! The simulator world: reads traces or generates the embedded default, replays them on a
//! virtual clock through the scheduler, and reports the Kant metrics.

pub mod engine;
pub mod events;
pub mod link_audit;
pub mod report;
pub mod synthetic;
pub mod tenant_report;
pub mod trace;

pub use engine::{PastTheClock, ReplayOptions, RunReport, fill_workload, run, scale_arrivals};
pub use events::EventLog;
pub use trace::{TraceError, TraceOptions, Workload};
