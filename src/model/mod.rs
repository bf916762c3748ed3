//! Pure domain types: resources, nodes with their GPU devices and topology coordinates,
//! pods and jobs (gangs), and the dense integer ids the hot paths index by.
//!
//! This module owns no state that changes during scheduling (that is the cache's) and knows
//! nothing of Kubernetes, files or time sources.

mod cluster;
mod constraints;
mod ids;
mod job;
mod links;
mod node;
mod resources;
mod topo_matrix;

pub use cluster::{
    Allocatable, ClusterSpec, ClusterSpecBuilder, LEAF_BLOCK, LeafPath, MAX_POOLS, NodeRow, Pool,
    SearchGroup, UNGROUPED_BLOCK,
};
pub use constraints::{
    ExtendedResources, Labels, Namespaces, NodeConstraints, PodAffinityTerm, PodIdentity, PodRules,
    Requirement, SelectorOp, SelectorTerm, SpreadConstraint, Taint, TaintEffect, Toleration,
    UNSCHEDULABLE_TAINT, VolumeTopology, Weighted, preference_score, untolerated,
    untolerated_preferences,
};
pub use ids::{GroupId, JobId, LeafId, NodeId, PoolId, TenantId};
pub use job::{Job, JobKind, JobShape, PodRequest, PodWidths, Tier, TopologyNeed};
pub use links::{LinkClass, LinkMatrix, LinkProfile, bits};
pub use node::{
    MAX_GPUS_PER_NODE, NodeSpec, NodeTopology, device_mask as node_device_mask, pods_that_fit,
};
pub use resources::{BYTES_PER_MIB, GpuRequest, MILLI_PER_GPU, Milli, thousandths};
pub use topo_matrix::{parse_topo_matrix, parse_topo_matrix_expecting};

/// A domain object that failed validation; the message names the object and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {message}")]
pub struct ModelError {
    pub object: String,
    pub message: String,
}

impl ModelError {
    pub fn new(object: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            object: object.into(),
            message: message.into(),
        }
    }
}
