//! `taint-toleration` (Filter): a node's `NoSchedule` and `NoExecute` taints keep away the
//! pods that do not tolerate them (each pod by its own tolerations), as kube-scheduler's `TaintToleration` plugin decides.
//! `PreferNoSchedule` is a preference and does not filter.

use crate::framework::{CycleState, Filter, NodeView, Plugin, PodContext, Status};
use crate::model::{ClusterSpec, Job, Pool, untolerated};

pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "taint-toleration"
    }
}

impl Filter for TaintToleration {
    /// Whether some pod of the job leaves a taint of its pools untolerated (GPU nodes
    /// tainted for GPU pods alone, which tolerate it, refuse none of them).
    fn judges_spec(&self, job: &Job, cluster: &ClusterSpec, _state: &CycleState) -> bool {
        let refuses = |pool: &Pool| {
            job.some_pod(|c| {
                let tolerations = c.map_or(&[][..], |c| &c.tolerations);
                untolerated(tolerations, &pool.taints).is_some()
            })
        };
        // The pools the job may use: those it names, or every one (with GPUs, for a job
        // asking for some), as the search has them.
        let needs_gpu = job.total_milli() > 0;
        match job.pools.is_empty() {
            true => (cluster.pools.iter())
                .filter(|pool| !needs_gpu || pool.gpus_per_node > 0)
                .any(refuses),
            false => job.pools.iter().any(|&p| refuses(cluster.pool(p))),
        }
    }

    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        if node.spec.taints.is_empty() {
            return Status::SUCCESS;
        }
        let tolerations = pod
            .job
            .constraints_of(pod.index)
            .map_or(&[][..], |c| &c.tolerations);
        match untolerated(tolerations, &node.spec.taints) {
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key, taint.value
            )),
            None => Status::SUCCESS,
        }
    }
}
