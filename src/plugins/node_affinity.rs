//! `node-affinity` (Filter, Score): each pod of a job goes only to nodes that match its node
//! selector and its required node affinity, and prefers the nodes that meet more of the
//! weight of its preferred node affinity, as kube-scheduler's `NodeAffinity` plugin
//! decides; and only to nodes where its persistent volumes let it run (a bound volume's
//! node affinity, the topologies a volume to provision may take), in the words of
//! kube-scheduler's `VolumeBinding`. A job without constraints is not asked, and one
//! without preferences is not scored.

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
            .any(|c| !c.node_selector.is_empty() || !c.affinity.is_empty() || !c.volumes.is_empty())
    }

    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        let Some(c) = pod.job.constraints_of(pod.index) else {
            return Status::SUCCESS;
        };
        let (name, labels) = (&node.spec.name, &node.spec.labels);
        match c.volume_refusing(name, labels) {
            Some(volume) if volume.unbound => {
                Status::unresolvable("node(s) didn't find available persistent volumes to bind")
            }
            Some(_) => Status::unresolvable("node(s) had volume node affinity conflict"),
            None if !c.selects(name, labels) => {
                Status::unresolvable("node(s) didn't match Pod's node affinity/selector")
            }
            None => Status::SUCCESS,
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
