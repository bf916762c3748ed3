//! The scheduling framework: extension-point traits, statuses, the cycle state, profiles,
//! the two-level search and the scheduler that runs cycles over jobs. It owns how a job is
//! placed; the plugins own why a node is good or bad; the worlds own time and I/O.

mod candidates;
mod cycle_state;
mod fruitless;
mod plugin;
mod profile;
mod scheduler;
mod search;
mod status;
mod usable;

pub use candidates::{CandidateClass, CandidateMemo, Candidates, Stamped};
pub use cycle_state::CycleState;
pub use plugin::{
    Allocate, Bind, Filter, GroupFilter, GroupQuery, GroupScore, JobNodes, JobPlan, Landing,
    MAX_NODE_SCORE, NodeView, Permit, Plugin, PodContext, PostFilter, PostFilterResult, PreFilter,
    PreemptionContext, PreemptionKind, QueueSort, Reserve, RunningJob, Score,
};
pub use profile::{Profile, SearchMode, SearchOptions};
pub use scheduler::{Adopted, Decision, Reshaped, Scheduler};
pub use search::{
    AnyGroup, FirstPass, Found, HeldForGpuPods, HeldGroups, LastResort, diagnose, domain_groups,
    place_job, pools_for, reservation_groups, some_domain_could_hold, some_domain_holds,
};
pub use status::{Code, Diagnosis, Status};
pub use usable::{Reach, ReachOf, reach};
