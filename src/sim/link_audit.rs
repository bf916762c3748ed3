//! The NVLink audit of a replay: every pod of two or more whole GPUs should get an
//! all-NVLink device set whenever one was free in its pool. An exception is a pod placed on
//! a set with a slower link while some node of the same pool had an all-NVLink set of that
//! size free just before the pod was placed.

use serde::Serialize;

use crate::cache::ClusterState;
use crate::framework::JobPlan;
use crate::model::{Job, LinkClass, bits};

/// How many exceptions are described in full.
const EXAMPLES: usize = 5;

#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkAudit {
    /// Pods of two or more whole GPUs placed.
    pub multi_gpu_pods: u64,
    /// Of those, placed off NVLink while an NVLink set was free in their pool.
    pub exceptions: u64,
    /// The first exceptions, described.
    pub examples: Vec<String>,
}

impl LinkAudit {
    /// Audits one job's placement against `before`, the state just before it, and then
    /// applies the placement to `before` so that the next job of the round is judged on
    /// the state it met.
    pub fn placed(&mut self, before: &mut ClusterState, job: &Job, plan: &JobPlan) {
        for (key, placement) in &plan.pods {
            let k = placement.gpus.devices.count_ones();
            if k >= 2 && placement.gpus.milli_each == crate::model::MILLI_PER_GPU {
                self.multi_gpu_pods += 1;
                let spec = before.spec().clone();
                let node = spec.node(placement.node);
                let class = node.links.worst_class(placement.gpus.devices);
                // An all-NVLink set of `k` free devices lies inside an NVLink island of at
                // least `k`: the pool's aggregate rules most pools out without a scan.
                let may_exist = before.pool(node.pool).max_nvlink_island() >= k;
                if class != LinkClass::NvLink && may_exist {
                    let free_elsewhere = spec.pool(node.pool).nodes.iter().find(|&&other| {
                        let state = before.node(other);
                        let links = &spec.node(other).links;
                        state.nvlink_island() >= k
                            && links
                                .best_set(state.free_whole(), k)
                                .is_some_and(|set| links.worst_class(set) == LinkClass::NvLink)
                    });
                    if let Some(&other) = free_elsewhere {
                        self.exceptions += 1;
                        if self.examples.len() < EXAMPLES {
                            let devices: Vec<usize> = bits(placement.gpus.devices).collect();
                            self.examples.push(format!(
                                "job {} pod {} on {} devices {devices:?} ({}) while {} had {k} \
                                 NVLink GPUs free",
                                job.name,
                                key.pod,
                                node.name,
                                class.name(),
                                spec.node(other).name
                            ));
                        }
                    }
                }
            }
            // The plan was assumed on the scheduler's state from this very state.
            let _ = before.assume(*key, *placement);
        }
    }
}
