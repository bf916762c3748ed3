//! `taint-toleration` (Filter, Score): a node's `NoSchedule` and `NoExecute` taints keep
//! away the pods that do not tolerate them (each pod by its own tolerations), and its
//! `PreferNoSchedule` taints rank it below the nodes with fewer such taints the pod does
//! not tolerate, as kube-scheduler's `TaintToleration` plugin decides and scores. A job
//! whose pools have no taint it minds is not asked per node. A cordoned node (its
//! `node.kubernetes.io/unschedulable` taint) is refused with kube-scheduler's
//! `NodeUnschedulable` reason.

use crate::framework::{
    CycleState, Filter, MAX_NODE_SCORE, NodeView, Plugin, PodContext, Score, Status,
};
use crate::model::{ClusterSpec, Job, Taint, Toleration, untolerated, untolerated_preferences};

pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "taint-toleration"
    }
}

/// Whether some pod of the job, by its tolerations, minds a taint of a pool it may use:
/// those it names, or every one (with GPUs, for a job asking for some), as the search
/// has them; with `launchers_anywhere`, every pool for a gang with a pod without GPUs,
/// which may go to any node when its workers' pools hold it nowhere.
fn some_pod_minds(
    job: &Job,
    cluster: &ClusterSpec,
    launchers_anywhere: bool,
    minds: impl Fn(&[Toleration], &[Taint]) -> bool,
) -> bool {
    let minds_pool = |taints: &[Taint]| {
        !taints.is_empty() && job.some_pod(|c| minds(c.map_or(&[][..], |c| &c.tolerations), taints))
    };
    let needs_gpu = job.pods.iter().any(|p| !p.gpu.is_none());
    let launcher = job.is_gang() && job.pods.iter().any(|p| p.gpu.is_none());
    match job.pools.is_empty() {
        _ if launchers_anywhere && launcher => {
            cluster.pools.iter().any(|pool| minds_pool(&pool.taints))
        }
        true => (cluster.pools.iter())
            .filter(|pool| !needs_gpu || pool.gpus_per_node > 0)
            .any(|pool| minds_pool(&pool.taints)),
        false => (job.pools.iter()).any(|&p| minds_pool(&cluster.pool(p).taints)),
    }
}

/// kube-scheduler's reason for a cordoned node, which its `NodeUnschedulable` plugin
/// gives before `TaintToleration` is asked.
const CORDONED: &str = "node(s) were unschedulable";

/// Whether the node is cordoned and the pod does not tolerate it.
fn cordoned_for(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    (taints.iter())
        .any(|taint| taint.is_cordon() && !tolerations.iter().any(|t| t.tolerates(taint)))
}

fn tolerations<'a>(pod: &PodContext<'a>) -> &'a [Toleration] {
    pod.job
        .constraints_of(pod.index)
        .map_or(&[][..], |c| &c.tolerations)
}

impl Filter for TaintToleration {
    fn applies(&self, job: &Job, cluster: &ClusterSpec) -> bool {
        some_pod_minds(job, cluster, true, |t, taints| {
            untolerated(t, taints).is_some()
        })
    }

    /// Whether some pod of the job leaves a taint of its pools untolerated (GPU nodes
    /// tainted for GPU pods alone, which tolerate it, refuse none of them).
    fn judges_spec(&self, job: &Job, cluster: &ClusterSpec, _state: &CycleState) -> bool {
        some_pod_minds(job, cluster, false, |t, taints| {
            untolerated(t, taints).is_some()
        })
    }

    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        if node.spec.taints.is_empty() {
            return Status::SUCCESS;
        }
        let tolerations = tolerations(pod);
        let taints = &node.spec.taints;
        match untolerated(tolerations, taints) {
            Some(_) if cordoned_for(tolerations, taints) => Status::unresolvable(CORDONED),
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key, taint.value
            )),
            None => Status::SUCCESS,
        }
    }
}

impl Score for TaintToleration {
    fn applies(&self, job: &Job, cluster: &ClusterSpec) -> bool {
        some_pod_minds(job, cluster, true, |t, taints| {
            untolerated_preferences(t, taints) > 0
        })
    }

    /// The node's `PreferNoSchedule` taints the pod does not tolerate (fewer is better:
    /// `normalize` turns the count around).
    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        if node.spec.taints.is_empty() {
            return 0;
        }
        untolerated_preferences(tolerations(pod), &node.spec.taints) as i64
    }

    /// kube-scheduler's reversed default normalisation: a node with none of the counted
    /// taints scores `MAX_NODE_SCORE`, the node with the most scores 0, and the others in
    /// proportion.
    fn normalize(&self, scores: &mut [i64]) {
        let most = scores.iter().copied().max().unwrap_or(0);
        for score in scores.iter_mut() {
            *score = match most {
                0 => MAX_NODE_SCORE,
                _ => MAX_NODE_SCORE - *score * MAX_NODE_SCORE / most,
            };
        }
    }

    fn normalizes(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As kube-scheduler's `DefaultNormalizeScore(MaxNodeScore, reverse=true)`.
    #[test]
    fn fewer_untolerated_preferences_score_higher() {
        let mut scores = [0, 1, 3, 2];
        TaintToleration.normalize(&mut scores);
        assert_eq!(scores, [100, 67, 0, 34]);
        let mut none = [0, 0];
        TaintToleration.normalize(&mut none);
        assert_eq!(none, [100, 100]);
    }
}
