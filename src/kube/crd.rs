//! The custom resources Kant reads: its own Queue (`kant.io/v1alpha1`) and the
//! scheduler-plugins PodGroup (`scheduling.x-k8s.io/v1alpha1`).
//!
//! This module owns the wire shape of both (the Rust types, their CRD schemas, the YAML of
//! `kant crds`), how an object as the API server serves it is read ([`read`]: a missing
//! spec is an empty one), and the conversion of a Queue's spec into a tenant. It holds no
//! scheduling logic and talks to no API server.
//!
//! The PodGroup is field for field the one of kubernetes-sigs/scheduler-plugins, so that
//! the PodGroups that Kubeflow's training operator (and others) create deserialize here, and
//! a cluster that already has that CRD needs none from Kant.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::{CustomResourceExt, DynamicObject};
use kube::{CustomResource, Resource, ResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::queue::{MAX_QUOTA_GPUS, TenantConfig, TenantMode};

/// The pod label that makes a pod a member of the PodGroup it names (same namespace).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// A PodGroup or Queue as the API server serves it. A missing or null `spec` reads as an
/// empty one, every field at its default, as scheduler-plugins' Go types read it (its
/// PodGroup CRD does not require a spec). Fails with a message that names the object.
pub fn read<K>(mut object: DynamicObject) -> Result<K, String>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    if object
        .data
        .get("spec")
        .is_none_or(serde_json::Value::is_null)
    {
        object.data["spec"] = serde_json::json!({});
    }
    let name = match object.namespace() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    };
    object
        .try_parse()
        .map_err(|e| format!("{} {name} cannot be read: {e}", K::kind(&())))
}

// ---------------------------------------------------------------------------------------
// Queue
// ---------------------------------------------------------------------------------------

/// What a queue is given: its sharing mode, its weight in the fair share, and its GPU quota
/// per GPU model. Pods name their queue with the label `kant.io/queue`; pods that name
/// none go to the `default` tenant.
// The printer columns repeat `type_` and so on, which the lint takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[kube(
    group = "kant.io",
    version = "v1alpha1",
    kind = "Queue",
    status = "QueueStatus",
    shortname = "kq",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Kant queue: one tenant of the cluster, with its sharing mode, fair-share \
           weight and GPU quota per GPU model.",
    printcolumn(
        name = "Mode",
        type_ = "string",
        json_path = ".spec.mode",
        description = "shared (borrows and lends idle quota) or isolated."
    ),
    printcolumn(
        name = "Weight",
        type_ = "number",
        json_path = ".spec.weight",
        description = "Weight of the queue's fair share."
    ),
    printcolumn(
        name = "Quota",
        type_ = "string",
        json_path = ".spec.quota",
        description = "Whole GPUs per GPU model."
    ),
    printcolumn(
        name = "Pending",
        type_ = "integer",
        json_path = ".status.pending",
        description = "Jobs waiting in the queue."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// `shared`: the queue may borrow GPUs that other shared queues leave idle (and the
    /// capacity no quota covers) and lends its own idle quota. `isolated`: the queue never
    /// goes past its quota and lends nothing. Default `shared`.
    #[serde(default)]
    pub mode: QueueMode,
    /// Weight of the queue's fair share across queues; must be greater than 0. Default 1.
    #[serde(default = "default_weight")]
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub weight: f64,
    /// Whole GPUs per GPU model (the node pool's model name, e.g. `NVIDIA-H100-80GB-HBM3`),
    /// each 0 or more. A model the quota does not name gives the queue no quota there.
    #[serde(default)]
    #[schemars(schema_with = "quota_schema")]
    pub quota: BTreeMap<String, i64>,
}

fn default_weight() -> f64 {
    1.0
}

/// The quota map's schema: non-negative integers by GPU model.
fn quota_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Whole GPUs per GPU model (the node pool's model name, e.g. \
                        NVIDIA-H100-80GB-HBM3), each 0 or more. A model the quota does \
                        not name gives the queue no quota there.",
        "type": "object",
        "additionalProperties": {"type": "integer", "format": "int64", "minimum": 0},
        "default": {},
    })
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            mode: QueueMode::default(),
            weight: default_weight(),
            quota: BTreeMap::new(),
        }
    }
}

/// How a queue shares its quota.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// Borrows idle GPUs of other shared queues, lends its own idle quota.
    #[default]
    Shared,
    /// Never goes past its quota; its quota is held for it alone.
    Isolated,
}

impl From<QueueMode> for TenantMode {
    fn from(mode: QueueMode) -> Self {
        match mode {
            QueueMode::Shared => TenantMode::Shared,
            QueueMode::Isolated => TenantMode::Isolated,
        }
    }
}

impl From<TenantMode> for QueueMode {
    fn from(mode: TenantMode) -> Self {
        match mode {
            TenantMode::Shared => QueueMode::Shared,
            TenantMode::Isolated => QueueMode::Isolated,
        }
    }
}

impl QueueSpec {
    /// The tenant this queue declares, named after the Queue object. Fails, naming the
    /// queue and the field, on an empty name, a weight that is not a positive number, or a
    /// negative (or unnamed) quota entry.
    pub fn to_tenant_config(&self, name: &str) -> Result<TenantConfig, String> {
        if name.is_empty() {
            return Err("a queue has an empty name".into());
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(format!(
                "queue {name}: weight {} must be a positive number",
                self.weight
            ));
        }
        for (model, &gpus) in &self.quota {
            if model.is_empty() {
                return Err(format!("queue {name}: quota names an empty GPU model"));
            }
            if gpus < 0 {
                return Err(format!("queue {name}: quota {gpus} of {model} is negative"));
            }
            if gpus > MAX_QUOTA_GPUS {
                return Err(format!(
                    "queue {name}: quota {gpus} of {model} is more than {MAX_QUOTA_GPUS} GPUs"
                ));
            }
        }
        Ok(TenantConfig {
            name: name.to_owned(),
            mode: self.mode.into(),
            weight: self.weight,
            quota: self.quota.clone(),
        })
    }
}

/// What Kant observes of a queue, written by the scheduler.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// GPUs in use by the queue's placed jobs, per GPU model, as an exact decimal count
    /// (GPUs may be fractional; e.g. "12.5"). A model no node carries any more is removed
    /// (a merge patch's null).
    #[serde(default)]
    pub allocated: BTreeMap<String, Option<String>>,
    /// The part of `allocated` that is borrowed beyond the queue's own quota, per GPU
    /// model, as an exact decimal count of GPUs.
    #[serde(default)]
    pub borrowed: BTreeMap<String, Option<String>>,
    /// Jobs of the queue waiting to be placed (in a sharded deployment, the sum of
    /// `shards`).
    #[serde(default)]
    pub pending: i64,
    /// Jobs of the queue placed and not finished (in a sharded deployment, the sum of
    /// `shards`).
    #[serde(default)]
    pub running: i64,
    /// In a sharded deployment, the jobs each shard counts, by shard name: each shard
    /// sees only the jobs of its GPU models. An entry its shard has not written for 15
    /// minutes (each shard writes its own at least every 5) is of a shard that is gone:
    /// the others leave it out of the totals and remove it (a merge patch's null).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shards: BTreeMap<String, Option<ShardJobs>>,
    /// Standard conditions of the queue, when any are reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// A queue's jobs as one shard counts them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardJobs {
    #[serde(default)]
    pub pending: i64,
    #[serde(default)]
    pub running: i64,
    /// When the shard last wrote these counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
}

// ---------------------------------------------------------------------------------------
// PodGroup
// ---------------------------------------------------------------------------------------

/// PodGroupSpec represents the template of a pod group: pods scheduled all together or
/// not at all (a gang). Pods join a group with the label
/// `scheduling.x-k8s.io/pod-group: <name>` in the group's namespace. This is the PodGroup of
/// kubernetes-sigs/scheduler-plugins (coscheduling).
#[allow(clippy::duplicated_attributes)] // the printer columns, as on QueueSpec
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    group = "scheduling.x-k8s.io",
    version = "v1alpha1",
    kind = "PodGroup",
    namespaced,
    status = "PodGroupStatus",
    shortname = "pg",
    shortname = "pgs",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodGroup is a collection of Pod; used for batch workload.",
    annotation(
        "api-approved.kubernetes.io",
        "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Current phase of PodGroup."
    ),
    printcolumn(
        name = "MinMember",
        type_ = "integer",
        json_path = ".spec.minMember",
        description = "MinMember defines the minimal number of members/tasks to run the pod group."
    ),
    printcolumn(
        name = "Running",
        type_ = "string",
        json_path = ".status.running",
        description = "The number of actively running pods."
    ),
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.succeeded",
        description = "The number of pods which reached phase Succeeded."
    ),
    printcolumn(
        name = "Failed",
        type_ = "string",
        json_path = ".status.failed",
        description = "The number of pods which reached phase Failed."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Age is the time PodGroup was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// MinMember defines the minimal number of members/tasks to run the pod group; if
    /// there's not enough resources to start all tasks, the scheduler will not start anyone.
    #[serde(default)]
    pub min_member: i32,
    /// MinResources defines the minimal resource of members/tasks to run the pod group; if
    /// there's not enough resources to start all tasks, the scheduler will not start anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list_schema")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// ScheduleTimeoutSeconds defines the maximal time of members/tasks to wait before run
    /// the pod group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// A resource list (`name: quantity`) as scheduler-plugins' CRD declares it, less its
/// `anyOf` of integer and string (which the structural-schema rewrite empties); k8s-openapi's
/// own Quantity schema carries a page of description into every entry.
fn resource_list_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "MinResources defines the minimal resource of members/tasks to run \
                        the pod group; if there's not enough resources to start all tasks, \
                        the scheduler will not start anyone.",
        "type": "object",
        "nullable": true,
        "additionalProperties": {
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// PodGroupStatus represents the current state of a pod group.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Current phase of PodGroup: Pending, Scheduling, Scheduled, Running, Succeeded,
    /// Failed, Finished or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,
    /// OccupiedBy marks the workload (e.g., deployment, statefulset) UID that occupy the
    /// podgroup. It is empty if not initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupied_by: Option<String>,
    /// The number of pods placed (bound or about to be). Older scheduler-plugins versions
    /// have this field; a cluster with the newer scheduler-plugins CRD drops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<i32>,
    /// The number of actively running pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// The number of pods which reached phase Succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// The number of pods which reached phase Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    /// ScheduleStartTime of the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_start_time: Option<Time>,
}

/// The phase of a pod group. A phase this version does not know (another scheduler's, or
/// a later version's) is kept as it was written.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
#[serde(from = "String", into = "String")]
pub enum PodGroupPhase {
    /// Accepted, but the scheduler cannot place `minMember` pods yet.
    Pending,
    /// Some pods are placed, fewer than `minMember`.
    Scheduling,
    /// At least `minMember` pods are placed, fewer are running.
    Scheduled,
    /// At least `minMember` pods are running.
    Running,
    /// All pods succeeded.
    Succeeded,
    /// At least one pod failed.
    Failed,
    /// At least `minMember` pods finished successfully.
    Finished,
    /// Part of the group is placed but the rest cannot be.
    Unknown,
    /// Any other phase, as written.
    Other(String),
}

impl PodGroupPhase {
    /// The phase as written on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            PodGroupPhase::Pending => "Pending",
            PodGroupPhase::Scheduling => "Scheduling",
            PodGroupPhase::Scheduled => "Scheduled",
            PodGroupPhase::Running => "Running",
            PodGroupPhase::Succeeded => "Succeeded",
            PodGroupPhase::Failed => "Failed",
            PodGroupPhase::Finished => "Finished",
            PodGroupPhase::Unknown => "Unknown",
            PodGroupPhase::Other(other) => other,
        }
    }
}

impl From<String> for PodGroupPhase {
    fn from(text: String) -> Self {
        match text.as_str() {
            "Pending" => PodGroupPhase::Pending,
            "Scheduling" => PodGroupPhase::Scheduling,
            "Scheduled" => PodGroupPhase::Scheduled,
            "Running" => PodGroupPhase::Running,
            "Succeeded" => PodGroupPhase::Succeeded,
            "Failed" => PodGroupPhase::Failed,
            "Finished" => PodGroupPhase::Finished,
            "Unknown" => PodGroupPhase::Unknown,
            _ => PodGroupPhase::Other(text),
        }
    }
}

impl From<PodGroupPhase> for String {
    fn from(phase: PodGroupPhase) -> Self {
        match phase {
            PodGroupPhase::Other(other) => other,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for PodGroupPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plain string in the schema, as in scheduler-plugins' CRD: the API server accepts any
/// phase, and so does this type.
impl JsonSchema for PodGroupPhase {
    fn schema_name() -> Cow<'static, str> {
        "PodGroupPhase".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Current phase of PodGroup.",
            "type": "string",
        })
    }
}

// ---------------------------------------------------------------------------------------
// The CRD manifests
// ---------------------------------------------------------------------------------------

const QUEUE_HEADER: &str = "# Queue (kant.io/v1alpha1): a Kant tenant with its quota per GPU model. \
                            Generated by `kant crds`; do not edit.";
const POD_GROUP_HEADER: &str = "# PodGroup (scheduling.x-k8s.io/v1alpha1): a gang of pods, as in \
                                kubernetes-sigs/scheduler-plugins. Generated by `kant crds`; \
                                skip this document when scheduler-plugins' PodGroup CRD is \
                                already installed (e.g. with Kubeflow).";

/// The Queue CRD (`queues.kant.io`), as `kant crds` writes it.
pub fn queue_crd() -> CustomResourceDefinition {
    tidy(Queue::crd())
}

/// The PodGroup CRD (`podgroups.scheduling.x-k8s.io`), as `kant crds` writes it.
pub fn pod_group_crd() -> CustomResourceDefinition {
    tidy(PodGroup::crd())
}

/// Both CRDs as one YAML stream, Queue first, each document after a one-line comment that
/// says what it is. What `kant crds` prints and `manifests/crds.yaml` holds; deterministic.
pub fn crd_manifests() -> String {
    let mut out = String::new();
    for (index, (header, yaml)) in [
        (QUEUE_HEADER, to_yaml(&queue_crd())),
        (POD_GROUP_HEADER, to_yaml(&pod_group_crd())),
    ]
    .into_iter()
    .enumerate()
    {
        if index > 0 {
            out.push_str("---\n");
        }
        out.push_str(header);
        out.push('\n');
        out.push_str(&yaml);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The CRD with its descriptions unwrapped: doc comments break lines at 90 columns, and
/// `kubectl explain` reads better with one line per paragraph.
fn tidy(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD converts to JSON");
    unwrap_descriptions(&mut value);
    serde_json::from_value(value).expect("a CRD converts back from JSON")
}

fn unwrap_descriptions(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(text) if key == "description" => *text = unwrap_lines(text),
                    _ => unwrap_descriptions(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

/// Joins the lines of each paragraph with a space; paragraphs stay apart.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One CRD as YAML. A CRD is plain strings, numbers, booleans, maps and lists, all of which
/// the serializer handles; a failure here is a bug in this module, not bad input.
fn to_yaml<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("a CRD serializes to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn queue_spec(value: Value) -> QueueSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn queue_spec_defaults() {
        let spec = queue_spec(json!({}));
        assert_eq!(spec, QueueSpec::default());
        assert_eq!(spec.mode, QueueMode::Shared);
        assert_eq!(spec.weight, 1.0);
        assert!(spec.quota.is_empty());
        let config = spec.to_tenant_config("team-a").unwrap();
        assert_eq!(config.name, "team-a");
        assert_eq!(config.mode, TenantMode::Shared);
        assert_eq!(config.weight, 1.0);
    }

    #[test]
    fn queue_spec_converts() {
        let spec = queue_spec(json!({
            "mode": "isolated", "weight": 2.5, "quota": {"H100": 64, "A100": 0}
        }));
        let config = spec.to_tenant_config("team-research").unwrap();
        assert_eq!(config.mode, TenantMode::Isolated);
        assert_eq!(config.weight, 2.5);
        assert_eq!(config.quota.get("H100"), Some(&64));
        assert_eq!(config.quota.get("A100"), Some(&0));
        config.validate().unwrap();
        assert_eq!(QueueMode::from(TenantMode::Isolated), QueueMode::Isolated);
    }

    #[test]
    fn queue_spec_validation_names_queue_and_field() {
        let negative = queue_spec(json!({"quota": {"H100": -3}}));
        assert_eq!(
            negative.to_tenant_config("team-a").unwrap_err(),
            "queue team-a: quota -3 of H100 is negative"
        );
        // A quota past any cluster is refused here, so that it never keeps the other
        // Queues from taking effect.
        let huge = queue_spec(json!({"quota": {"H100": 18_446_744_073_709_552_i64}}));
        assert_eq!(
            huge.to_tenant_config("huge").unwrap_err(),
            "queue huge: quota 18446744073709552 of H100 is more than 4294967296 GPUs"
        );
        for weight in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let spec = QueueSpec {
                weight,
                ..QueueSpec::default()
            };
            let error = spec.to_tenant_config("team-b").unwrap_err();
            assert!(error.starts_with("queue team-b: weight"), "{error}");
        }
        let unnamed = queue_spec(json!({"quota": {"": 1}}));
        assert!(
            unnamed
                .to_tenant_config("q")
                .unwrap_err()
                .contains("empty GPU model")
        );
        assert!(QueueSpec::default().to_tenant_config("").is_err());
    }

    #[test]
    fn queue_spec_rejects_unknown_mode() {
        assert!(serde_json::from_value::<QueueSpec>(json!({"mode": "greedy"})).is_err());
    }

    #[test]
    fn queue_status_serializes_for_a_merge_patch() {
        let status = QueueStatus {
            allocated: BTreeMap::from([("H100".into(), Some("12.5".into()))]),
            pending: 3,
            ..QueueStatus::default()
        };
        let value = serde_json::to_value(&status).unwrap();
        assert_eq!(
            value,
            json!({"allocated": {"H100": "12.5"}, "borrowed": {}, "pending": 3, "running": 0})
        );
        let back: QueueStatus = serde_json::from_value(value).unwrap();
        assert_eq!(back, status);
    }

    /// A PodGroup as Kubeflow's training operator writes it, status included (Go's
    /// `metav1.Time` writes its zero value as null).
    #[test]
    fn training_operator_pod_group_deserializes() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "pytorch-dist-mnist",
                "namespace": "kubeflow",
                "uid": "6d0e5c4e-6c0e-4e4b-a0a5-b1a3e6f0c2a1",
                "ownerReferences": [{
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "pytorch-dist-mnist",
                    "uid": "0b1c2d3e-0000-4000-8000-000000000001",
                    "controller": true,
                    "blockOwnerDeletion": true
                }]
            },
            "spec": {
                "minMember": 3,
                "minResources": {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": 3},
                "scheduleTimeoutSeconds": 60
            },
            "status": {
                "phase": "Running",
                "occupiedBy": "0b1c2d3e-0000-4000-8000-000000000001",
                "running": 3,
                "scheduleStartTime": null
            }
        }))
        .unwrap();
        assert_eq!(group.spec.min_member, 3);
        let resources = group.spec.min_resources.as_ref().unwrap();
        assert_eq!(resources["memory"], Quantity("6Gi".into()));
        assert_eq!(group.spec.schedule_timeout_seconds, Some(60));
        let status = group.status.unwrap();
        assert_eq!(status.phase, Some(PodGroupPhase::Running));
        assert_eq!(status.running, Some(3));
        assert_eq!(status.schedule_start_time, None);
    }

    #[test]
    fn pod_group_minimal_and_unknown_phase() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {},
            "status": {"phase": "Inqueue", "scheduleStartTime": "2025-01-02T03:04:05Z"}
        }))
        .unwrap();
        assert_eq!(group.spec.min_member, 0);
        assert_eq!(group.spec.min_resources, None);
        let status = group.status.unwrap();
        assert_eq!(status.phase, Some(PodGroupPhase::Other("Inqueue".into())));
        assert!(status.schedule_start_time.is_some());
        let phase = serde_json::to_value(PodGroupPhase::Other("Inqueue".into())).unwrap();
        assert_eq!(phase, json!("Inqueue"));
        for name in [
            "Pending",
            "Scheduling",
            "Scheduled",
            "Running",
            "Succeeded",
            "Failed",
            "Finished",
            "Unknown",
        ] {
            let phase = PodGroupPhase::from(name.to_owned());
            assert!(!matches!(phase, PodGroupPhase::Other(_)), "{name}");
            assert_eq!(serde_json::to_value(&phase).unwrap(), json!(name));
        }
    }

    #[test]
    fn a_missing_spec_reads_as_empty_and_an_unreadable_object_is_named() {
        let served = |value: Value| -> DynamicObject { serde_json::from_value(value).unwrap() };
        let bare = served(json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "bare", "namespace": "ml"}
        }));
        let group: PodGroup = read(bare).unwrap();
        assert_eq!(group.spec, PodGroupSpec::default());
        let null = served(json!({
            "apiVersion": "kant.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team"}, "spec": null
        }));
        let queue: Queue = read(null).unwrap();
        assert_eq!(queue.spec, QueueSpec::default());
        let bad = served(json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "bad", "namespace": "ml"}, "spec": {"minMember": "lots"}
        }));
        let error = read::<PodGroup>(bad).unwrap_err();
        assert!(
            error.starts_with("PodGroup ml/bad cannot be read: "),
            "{error}"
        );
    }

    #[test]
    fn pod_group_status_leaves_out_what_it_does_not_know() {
        let status = PodGroupStatus {
            phase: Some(PodGroupPhase::Scheduled),
            scheduled: Some(8),
            ..PodGroupStatus::default()
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"phase": "Scheduled", "scheduled": 8})
        );
    }

    #[test]
    fn descriptions_are_unwrapped() {
        assert_eq!(unwrap_lines("a\n  b\n\nc\nd\n"), "a b\n\nc d");
        let description = queue_crd().spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| s.properties.as_ref())
            .and_then(|p| p["spec"].properties.as_ref())
            .and_then(|p| p["mode"].description.clone())
            .unwrap();
        assert!(!description.contains('\n'), "{description}");
    }

    #[test]
    fn crds_have_the_expected_names_and_schema() {
        let queue = queue_crd();
        assert_eq!(queue.metadata.name.as_deref(), Some("queues.kant.io"));
        assert_eq!(queue.spec.scope, "Cluster");
        assert_eq!(queue.spec.names.short_names, Some(vec!["kq".to_owned()]));
        let group = pod_group_crd();
        assert_eq!(
            group.metadata.name.as_deref(),
            Some("podgroups.scheduling.x-k8s.io")
        );
        assert_eq!(group.spec.scope, "Namespaced");
        assert_eq!(
            group.spec.names.short_names,
            Some(vec!["pg".to_owned(), "pgs".to_owned()])
        );
        for crd in [&queue, &group] {
            let version = &crd.spec.versions[0];
            assert!(version.subresources.as_ref().unwrap().status.is_some());
        }
        let value = serde_json::to_value(&queue).unwrap();
        let spec = &value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"];
        assert_eq!(spec["mode"]["enum"], json!(["shared", "isolated"]));
        assert_eq!(spec["weight"]["exclusiveMinimum"], json!(true));
        assert_eq!(spec["quota"]["additionalProperties"]["minimum"], json!(0.0));
        let value = serde_json::to_value(&group).unwrap();
        let schema = &value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(schema["spec"]["properties"]["minMember"]["format"], "int32");
        assert_eq!(schema["status"]["properties"]["phase"]["type"], "string");
        assert_eq!(
            schema["status"]["properties"]["scheduleStartTime"]["format"],
            "date-time"
        );
    }

    #[test]
    fn crd_manifests_round_trip() {
        let text = crd_manifests();
        assert_eq!(text, crd_manifests(), "deterministic");
        let documents: Vec<&str> = text.split("\n---\n").collect();
        assert_eq!(documents.len(), 2);
        assert!(documents[0].starts_with("# Queue"));
        assert!(documents[1].starts_with("# PodGroup"));
        assert!(
            documents[1]
                .lines()
                .next()
                .unwrap()
                .contains("scheduler-plugins")
        );
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let expected = [
            serde_json::to_value(queue_crd()).unwrap(),
            serde_json::to_value(pod_group_crd()).unwrap(),
        ];
        assert_eq!(parsed, expected);
        let typed: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&text).unwrap();
        assert_eq!(typed, vec![queue_crd(), pod_group_crd()]);
        // Only the descriptions differ from what the derive makes.
        let mut derived = serde_json::to_value(Queue::crd()).unwrap();
        unwrap_descriptions(&mut derived);
        assert_eq!(derived, expected[0]);
    }

    /// The YAML writer quotes what needs quoting: strings that read as other types, or
    /// hold YAML syntax, come back as the same strings.
    #[test]
    fn yaml_keeps_awkward_strings() {
        let value = json!({
            "a": ["true", "null", "~", "1", "0x10", "1e3", "-", "- x", "a: b", "#c", " lead",
                  "trail ", "", "multi\nline\n", "tab\there", "'q'", "\"d\"", "{x}", "[y]",
                  "&a", "*b", "!t", "%p", "@", "`", "yes", "No", "é ☃", "\u{7f}", "a #b",
                  "x\r\ny", "---", "..."],
            "key: with colon": {"nested": [1, 2.5, -3, true, null]},
            "long": [
                "word ".repeat(40),
                format!(" {}", "lead and  double  spaces ".repeat(8)),
                format!("{}\n\n{}", "para one ".repeat(12), "para two ".repeat(12)),
                format!("{}\n", "trailing newline ".repeat(8)),
                format!("{}\n\n\n", "trailing newlines ".repeat(8)),
                format!("\n{}", "leading newline ".repeat(8)),
                format!("{}\tx", "tab ".repeat(30)),
                format!("# {}: {}", "hash colon".repeat(10), "x ".repeat(40)),
                "x".repeat(200),
            ],
        });
        let text = to_yaml(&value);
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, value, "{text}");
    }
}
