//! `node-affinity` (Filter): a job's pods go only to nodes that match its node selector and
//! its required node affinity, as kube-scheduler's `NodeAffinity` plugin decides. A job
//! without constraints passes everywhere at the cost of one branch.

use crate::framework::{CycleState, Filter, NodeView, Plugin, PodContext, Status};

pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        "node-affinity"
    }
}

impl Filter for NodeAffinity {
    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        match &pod.job.constraints {
            Some(c) if !c.selects(&node.spec.name, &node.spec.labels) => {
                Status::unresolvable("node(s) didn't match Pod's node affinity/selector")
            }
            _ => Status::SUCCESS,
        }
    }
}
