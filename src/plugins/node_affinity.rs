//! `node-affinity` (Filter, Score): each pod of a job goes only to nodes that match its node
//! selector and its required node affinity, and prefers the nodes that meet more of the
//! weight of its preferred node affinity, as kube-scheduler's `NodeAffinity` plugin
//! decides. A job without constraints is not asked, and one without preferences is not
//! scored.

use crate::framework::{CycleState, Filter, NodeView, Plugin, PodContext, Score, Status};
use crate::model::{ClusterSpec, Job};

pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        "node-affinity"
    }
}

impl Filter for NodeAffinity {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
        job.all_constraints().next().is_some()
    }

    fn judges_spec(&self, job: &Job, _cluster: &ClusterSpec, _state: &CycleState) -> bool {
        job.all_constraints()
            .any(|c| !c.node_selector.is_empty() || !c.affinity.is_empty())
    }

    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        match pod.job.constraints_of(pod.index) {
            Some(c) if !c.selects(&node.spec.name, &node.spec.labels) => {
                Status::unresolvable("node(s) didn't match Pod's node affinity/selector")
            }
            _ => Status::SUCCESS,
        }
    }
}

impl Score for NodeAffinity {
    fn applies(&self, job: &Job, _cluster: &ClusterSpec) -> bool {
        job.all_constraints().any(|c| !c.preferred.is_empty())
    }

    fn score(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> i64 {
        pod.job
            .constraints_of(pod.index)
            .map_or(0, |c| c.preference(&node.spec.name, &node.spec.labels))
    }
}
