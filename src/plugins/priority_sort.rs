//! `priority-sort` (QueueSort): higher priority first, then earlier submission, then size
//! (smaller or larger first, as configured), then the lower job id, so that equal jobs
//! keep their arrival order.

use std::cmp::Ordering;

use crate::config::SizeOrder;
use crate::framework::{Plugin, QueueSort};
use crate::model::Job;

pub struct PrioritySort {
    pub size_order: SizeOrder,
}

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        "priority-sort"
    }
}

impl QueueSort for PrioritySort {
    fn compare(&self, a: &Job, b: &Job) -> Ordering {
        let by_size = match self.size_order {
            SizeOrder::SmallerFirst => a.total_milli().cmp(&b.total_milli()),
            SizeOrder::LargerFirst => b.total_milli().cmp(&a.total_milli()),
        };
        b.priority
            .cmp(&a.priority)
            .then(a.submit_ms.cmp(&b.submit_ms))
            .then(by_size)
            .then(a.id.cmp(&b.id))
    }
}
