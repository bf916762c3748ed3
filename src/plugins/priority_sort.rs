//! `priority-sort` (QueueSort): higher priority first, then earlier submission, then the
//! lower job id, so that equal jobs keep their arrival order.

use std::cmp::Ordering;

use crate::framework::{Plugin, QueueSort};
use crate::model::Job;

pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        "priority-sort"
    }
}

impl QueueSort for PrioritySort {
    fn compare(&self, a: &Job, b: &Job) -> Ordering {
        b.priority
            .cmp(&a.priority)
            .then(a.submit_ms.cmp(&b.submit_ms))
            .then(a.id.cmp(&b.id))
    }
}
