//! `gang` (Permit): all or nothing. A job is let through only when every one of its pods
//! is in the plan; a partial gang never reaches the binder.

use crate::framework::{CycleState, JobPlan, Permit, Plugin, Status};
use crate::model::Job;

pub struct Gang;

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }
}

impl Permit for Gang {
    fn permit(&self, job: &Job, plan: &JobPlan, _state: &CycleState) -> Status {
        let placed = plan.pods.len();
        let members = job.pods.len();
        let mut seen: Vec<u32> = plan.pods.iter().map(|(k, _)| k.pod).collect();
        seen.sort_unstable();
        seen.dedup();
        if placed == members
            && seen.len() == members
            && plan.pods.iter().all(|(k, _)| k.job == job.id)
        {
            Status::SUCCESS
        } else {
            Status::unschedulable(format!(
                "gang incomplete: {placed} of {members} pods placed"
            ))
        }
    }
}
