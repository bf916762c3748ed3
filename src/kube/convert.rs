//! Conversions between Kubernetes objects (`Pod`, `Node`) and the scheduler's model: pure
//! and synchronous, no I/O. This is where bad input from the API server is caught: every
//! error names the object (`pod NAMESPACE/NAME`, `node NAME`), the field and what was
//! wrong, and nothing here panics on an object's content.
//!
//! Conventions (the README's "What it reads" says them for users, at more length):
//!
//! Pods
//! - Whole GPUs: the `nvidia.com/gpu` resource, from the limits (the requests when there is
//!   no limit; both given and different is an error, as Kubernetes requires them equal). The
//!   pod's request is what kube-scheduler computes: max(sum over containers, max over init
//!   containers), sidecars (init containers with `restartPolicy: Always`) counted with the
//!   containers. It must be a whole, non-negative number.
//! - A fraction of one GPU: the annotation `kant.io/gpu-fraction` (`"0.5"`), exact to a
//!   milli-GPU, strictly between 0 and 1, never together with a non-zero `nvidia.com/gpu`.
//! - CPU (millicores), memory and ephemeral storage (`ephemeral-storage`, bytes), rounded
//!   up, from the same effective requests (a container's limit stands for a missing
//!   request, as the API server defaults it), with pod-level `spec.resources.requests`
//!   replacing the containers' sum of CPU and memory where given, plus `spec.overhead`
//!   (of every resource it names).
//! - Extended resources: every other resource the pod asks for (`rdma/hca`,
//!   `hugepages-2Mi`, any device plugin's), from the same effective requests (request and
//!   limit, both given, must be equal, as for GPUs), in the resource's base unit (a count,
//!   bytes), rounded up. Read with the node constraints: each pod needs a node whose
//!   `status.allocatable` lists at least that much (a node that does not list it has
//!   none), less what the pods placed there hold. A bound pod's are read from its
//!   resources alone, like its request, and held on its node.
//! - Priority: `spec.priority` (filled from `priorityClassName` by the admission
//!   controller), 0 when absent; `spec.preemptionPolicy: Never` (from the class too): the
//!   pod never makes room by preemption, it waits.
//! - Tenant: the label `kant.io/queue`; absent: the default tenant.
//! - GPU models: `spec.nodeSelector["nvidia.com/gpu.product"]`; otherwise, when every
//!   required node-affinity term has an `In` requirement on that label, the union of their
//!   values; otherwise any model.
//! - Node constraints: `spec.nodeSelector`, required node affinity (`matchExpressions` on
//!   labels, `matchFields` on `metadata.name`) and `spec.tolerations`.
//! - Inter-pod rules: required `podAffinity` and `podAntiAffinity` terms, over the pods'
//!   namespaces and labels and any node label as the topology key (`matchLabelKeys` and
//!   `mismatchLabelKeys` included), their preferred terms, and topology spread
//!   constraints (`DoNotSchedule` and `ScheduleAnyway`; an empty `labelSelector` counts
//!   no pod, as kube-scheduler's). A non-empty `namespaceSelector` is read as every
//!   namespace (namespaces are not watched). Preferred node affinity is read with the node
//!   constraints.
//! - Gang: the label `scheduling.x-k8s.io/pod-group` names the pod's PodGroup.
//! - Gated: a non-empty `spec.schedulingGates` keeps the pod out of the queues.
//! - Workload kind: the label `kant.io/workload`: `train`, `inference` or `dev`.
//! - Topology need: the annotation `kant.io/topology`: `required:TIER` or
//!   `preferred:TIER`, TIER one of `hbd`, `leaf`, `spine`, `superspine`.
//!
//! Bound pods (the scheduler writes these annotations on the binding; the API server copies
//! them onto the pod, where a restarted scheduler reads them back)
//! - `kant.io/gpu-ids`: the device indexes on the node, ascending (`"0,1,2,3"`).
//! - `kant.io/rdma-nic`: the RDMA NIC nearest each device, without repeats, in device
//!   order (`"mlx5_0,mlx5_1"`).
//! - A fractional pod's share per device is its `kant.io/gpu-fraction`.
//! - What a bound pod holds is read from its resources alone, whatever else of it does
//!   not parse: the request above, except that a `kant.io/gpu-fraction` that does not
//!   parse leaves its whole GPUs, or one whole GPU where it asks for none.
//!
//! Nodes
//! - GPU model: the label `nvidia.com/gpu.product` (set by NVIDIA's GPU feature discovery);
//!   GPUs: `status.capacity["nvidia.com/gpu"]` (all the devices, numbered `0..n`), else
//!   `status.allocatable`, whole, absent = 0. GPUs without the label are an error; the
//!   label on a node with no GPUs is ignored (a CPU-only node).
//! - CPU, memory and ephemeral storage: `status.allocatable` `cpu`, `memory` and
//!   `ephemeral-storage`, rounded down to millicores and bytes; absent: none, as
//!   kube-scheduler reads it (a pod asking for some does not fit).
//! - Pods: `status.allocatable["pods"]`, the most pods the node runs (every pod bound
//!   there counts); absent: none (the node takes no pod, as under kube-scheduler).
//! - Extended resources: every other entry of `status.allocatable`, rounded down to its
//!   base unit.
//! - Network position: the labels `kant.io/superspine`, `kant.io/spine`, `kant.io/leaf`
//!   and `kant.io/hbd` (the keys are configurable). A node without a leaf label is in no
//!   leaf group.
//! - Unhealthy GPUs: the devices the annotation `kant.io/unhealthy-gpus` lists (`"2,5"`,
//!   device indexes), and as many as the device plugin reports unhealthy beyond them
//!   (capacity less allocatable; `allocatable` absent counts 0 healthy, more than
//!   capacity is an error). Which ones the plugin means is not known: the world marks the
//!   highest-numbered devices no pod holds, then, if every device is held, the
//!   highest-numbered held ones (which keep their pods).
//! - Device links: the annotation `kant.io/gpu-topology`, a layout name (`nvlink-all`,
//!   `nvlink-pairs`, `pcie`) or the full output of `nvidia-smi topo -m` (its GPU count
//!   must be the node's). Absent: an all-NVLink node is assumed unless the configuration
//!   says otherwise for its GPU model (`links.topologies`, then `links.by_model`, then
//!   `links.default`).
//! - RDMA NIC names: the annotation `kant.io/rdma-nics` (`"mlx5_0,mlx5_1,..."`) names
//!   the NICs in the order `nvidia-smi topo -m` numbers them, each once; absent: the names
//!   a `nvidia-smi topo -m` matrix gives, else `NIC0`, `NIC1`, ... Fewer than a layout
//!   assumes are shared between neighbouring GPUs.
//! - A node without GPUs ignores the GPU annotations (its device plugin may not have
//!   reported them yet). One of them that does not parse closes the node's GPUs, not the
//!   node: every device counts as unhealthy, on the layout and NIC names the node would
//!   have without any of the three (`NodeFacts::problem` says why), so the pods it runs
//!   stay counted.
//! - Labels: all of them. Taints: `spec.taints`; `spec.unschedulable: true` adds the taint
//!   `node.kubernetes.io/unschedulable:NoSchedule`, as Kubernetes itself does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm as TermObject,
    PodSpec, TopologySpreadConstraint, WeightedPodAffinityTerm as WeightedTermObject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde::de::IntoDeserializer;
use serde::de::value::StrDeserializer;

use super::crd::POD_GROUP_LABEL;
use crate::cache::DeviceAlloc;
use crate::config::Config;
use crate::model::{
    ExtendedResources, GpuRequest, JobKind, Labels, LeafPath, LinkMatrix, LinkProfile,
    MAX_GPUS_PER_NODE, MILLI_PER_GPU, Namespaces, NodeConstraints, NodeRow, PodAffinityTerm,
    PodIdentity, PodRequest, PodRules, Requirement, SelectorOp, SelectorTerm, SpreadConstraint,
    Taint, TaintEffect, Toleration, TopologyNeed, UNSCHEDULABLE_TAINT, Weighted, bits,
    node_device_mask,
};

/// The extended resource of whole NVIDIA GPUs.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The node label that names the GPU model (NVIDIA GPU feature discovery).
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// Pod annotation: a fraction of one GPU, such as `"0.5"`.
pub const GPU_FRACTION_ANNOTATION: &str = "kant.io/gpu-fraction";
/// Pod label: the tenant's queue.
pub const QUEUE_LABEL: &str = "kant.io/queue";
/// Pod label: `train`, `inference` or `dev`.
pub const WORKLOAD_LABEL: &str = "kant.io/workload";
/// Pod annotation: `required:TIER` or `preferred:TIER`.
pub const TOPOLOGY_ANNOTATION: &str = "kant.io/topology";
/// Bound pod annotation: the device indexes given to the pod, ascending.
pub const GPU_IDS_ANNOTATION: &str = "kant.io/gpu-ids";
/// Bound pod annotation: the RDMA NICs nearest the pod's devices.
pub const RDMA_NIC_ANNOTATION: &str = "kant.io/rdma-nic";
/// Node annotation: indexes of devices that take no new pod.
pub const UNHEALTHY_GPUS_ANNOTATION: &str = "kant.io/unhealthy-gpus";
/// Node annotation: a link layout name or the output of `nvidia-smi topo -m`.
pub const GPU_TOPOLOGY_ANNOTATION: &str = "kant.io/gpu-topology";
/// Node annotation: the names of the node's RDMA NICs, NIC0 first.
pub const RDMA_NICS_ANNOTATION: &str = "kant.io/rdma-nics";
/// Default node label of the superspine.
pub const SUPERSPINE_LABEL: &str = "kant.io/superspine";
/// Default node label of the spine.
pub const SPINE_LABEL: &str = "kant.io/spine";
/// Default node label of the leaf switch group.
pub const LEAF_LABEL: &str = "kant.io/leaf";
/// Default node label of the scale-up (HBD) domain.
pub const HBD_LABEL: &str = "kant.io/hbd";

/// The label, on a pod's identity only, that says it holds a host port: `<prefix>tcp.8080`.
const HOST_PORT_LABEL_PREFIX: &str = "kant.io/host-port.";

/// The node label of one node's domain.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
const PODS: &str = "pods";
/// The resources read into their own fields; any other is an extended resource.
const NOT_EXTENDED: [&str; 5] = [CPU, MEMORY, EPHEMERAL_STORAGE, GPU_RESOURCE, PODS];
const NODE_NAME_FIELD: &str = "metadata.name";
const LAYOUT_NAMES: &str = "nvlink-all, nvlink-pairs, pcie";
/// Distinct `kant.io/gpu-topology` texts kept parsed; a cluster has a handful.
const MAX_CACHED_TEXTS: usize = 1024;

/// A Kubernetes object the model cannot take, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct ConvertError {
    /// `pod NAMESPACE/NAME` or `node NAME`.
    pub object: String,
    /// The field, as the API names it (`spec.containers[main].resources.limits[cpu]`).
    pub field: String,
    pub message: String,
}

impl ConvertError {
    fn new(object: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            object: object.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }
}

// ----------------------------------------------------------------------------------------
// Quantities

const NANO: u128 = 1_000_000_000;

/// The exact value of a Kubernetes quantity in billionths (`"1"` is 1,000,000,000).
///
/// Accepts what Kubernetes accepts: an optionally signed decimal number (`5`, `0.5`, `.5`,
/// `5.`) followed by a decimal SI suffix (`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`,
/// `E`), a binary one (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`) or a decimal exponent (`e3`,
/// `E-3`). No floating point: the value is exact, except that a magnitude finer than one
/// billionth is rounded up (away from zero) to a whole billionth, as Kubernetes does.
pub fn parse_quantity_nano(text: &str) -> Result<i128, String> {
    let bad = || format!("{text:?} is not a quantity");
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return Err(bad());
    }
    let (exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .ok_or_else(|| format!("{text:?} has an unknown suffix {suffix:?}"))?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let exponent: i32 = exponent
                .parse()
                .map_err(|_| format!("{text:?} has an exponent out of range"))?;
            (i64::from(exponent), 0)
        }
    };
    // value = digits x 10^(exp10 - fraction digits) x 2^exp2; leading and trailing zeros
    // carry no information.
    let mut digits = format!("{int_part}{frac_part}");
    let mut exp10 = exp10 - frac_part.len() as i64;
    let significant_end = digits.trim_end_matches('0').len();
    exp10 += (digits.len() - significant_end) as i64;
    digits.truncate(significant_end);
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(0);
    }
    let too_large = || format!("{text:?} is too large");
    if digits.len() > 38 {
        return Err(format!("{text:?} has too many significant digits"));
    }
    let mantissa: u128 = digits.parse().map_err(|_| bad())?;
    let mantissa = mantissa.checked_mul(1 << exp2).ok_or_else(too_large)?;
    let scale = exp10 + 9;
    let magnitude = if scale >= 0 {
        u32::try_from(scale)
            .ok()
            .and_then(|s| 10u128.checked_pow(s))
            .and_then(|p| mantissa.checked_mul(p))
            .ok_or_else(too_large)?
    } else {
        match u32::try_from(-scale)
            .ok()
            .and_then(|s| 10u128.checked_pow(s))
        {
            Some(divisor) => mantissa.div_ceil(divisor),
            // Below one billionth, whatever the digits: rounded up to one.
            None => 1,
        }
    };
    let magnitude = i128::try_from(magnitude).map_err(|_| too_large())?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// The value of a Kubernetes quantity in thousandths, rounded up (away from zero) as
/// Kubernetes' `MilliValue` does: `"100m"` is 100, `"1e-3"` is 1, `"1n"` is 1.
pub fn parse_quantity_milli(text: &str) -> Result<i128, String> {
    let nano = parse_quantity_nano(text)?;
    let magnitude = nano.unsigned_abs().div_ceil(1_000_000) as i128;
    Ok(if nano < 0 { -magnitude } else { magnitude })
}

/// A non-negative quantity in billionths, or why not.
fn non_negative(q: &Quantity) -> Result<u128, String> {
    let nano = parse_quantity_nano(&q.0)?;
    u128::try_from(nano).map_err(|_| format!("{:?} is negative", q.0))
}

/// A whole, non-negative count of GPUs.
fn whole_gpus(q: &Quantity) -> Result<u64, String> {
    let nano = non_negative(q)?;
    if nano % NANO != 0 {
        return Err(format!("{:?} is not a whole number of GPUs", q.0));
    }
    u64::try_from(nano / NANO).map_err(|_| format!("{:?} is too many GPUs", q.0))
}

// ----------------------------------------------------------------------------------------
// Pods

/// What the scheduler needs to know of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub request: PodRequest,
    pub priority: i32,
    /// Whether it names a `priorityClassName` (rather than taking the default priority).
    pub names_priority_class: bool,
    /// Not `preemptionPolicy: Never`.
    pub may_preempt: bool,
    /// `status.nominatedNodeName`: where a preemption made room for it.
    pub nominated_node: Option<String>,
    /// The tenant's queue; `None`: the default tenant.
    pub queue: Option<String>,
    /// The GPU models the pod accepts; empty: any.
    pub gpu_models: Vec<String>,
    pub constraints: Option<NodeConstraints>,
    /// Who the pod is, with its required inter-pod affinity and anti-affinity.
    pub pod_rules: Arc<PodRules>,
    /// The PodGroup, in the pod's namespace.
    pub group: Option<String>,
    pub gated: bool,
    pub kind: JobKind,
    pub topology: Option<TopologyNeed>,
    /// Scheduling fields the pod sets that Kant does not honour, to report once.
    pub ignored: Vec<&'static str>,
    /// The PersistentVolumeClaims its volumes use, in its namespace: those it names, and
    /// those its ephemeral volumes make (`<pod>-<volume>`).
    pub claims: Vec<String>,
}

/// How errors name a pod.
fn pod_object(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or("<unnamed>");
    match pod.metadata.namespace.as_deref() {
        Some(namespace) => format!("pod {namespace}/{name}"),
        None => format!("pod {name}"),
    }
}

fn annotation_field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// The pod's name for errors, and its spec, which every reading needs.
fn pod_spec(pod: &Pod) -> Result<(String, &PodSpec), ConvertError> {
    let object = pod_object(pod);
    match pod.spec.as_ref() {
        Some(spec) => Ok((object, spec)),
        None => Err(ConvertError::new(&object, "spec", "missing")),
    }
}

fn label_field(key: &str) -> String {
    format!("metadata.labels[{key}]")
}

/// A label's value; `None` where it is absent or empty. An empty value names nothing: a
/// Helm value left blank reads as no queue, no workload kind and, as scheduler-plugins
/// reads it, no pod group.
pub fn label_value<'a>(labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels?
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Reads what the scheduler needs of a pod, following the conventions at the top of this
/// file.
pub fn pod_facts(pod: &Pod) -> Result<PodFacts, ConvertError> {
    let (object, spec) = pod_spec(pod)?;
    // Bound without its claims allocated, such a pod would never start.
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(ConvertError::new(
            &object,
            "spec.resourceClaims",
            "dynamic resource allocation is not supported: ask for GPUs as nvidia.com/gpu \
             (and kant.io/gpu-fraction), or give the pod to kube-scheduler",
        ));
    }
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);

    let amounts = effective_amounts(&object, spec)?;
    let request = pod_request(&object, &amounts, |whole| {
        gpu_request(&object, whole, annotations)
    })?;

    let kind = match label_value(Some(labels), WORKLOAD_LABEL) {
        None => JobKind::Unknown,
        Some("train") => JobKind::Train,
        Some("inference") => JobKind::Inference,
        Some("dev") => JobKind::Dev,
        Some(other) => {
            return Err(ConvertError::new(
                &object,
                label_field(WORKLOAD_LABEL),
                format!("unknown workload {other:?} (known: train, inference, dev)"),
            ));
        }
    };
    let topology = match annotations.get(TOPOLOGY_ANNOTATION) {
        Some(text) => TopologyNeed::parse(text)
            .map_err(|e| ConvertError::new(&object, annotation_field(TOPOLOGY_ANNOTATION), e))?,
        None => None,
    };
    let (constraints, gpu_models) = constraints(&object, spec, amounts.extended(&object)?)?;

    let mut ignored = Vec::new();
    let pod_rules = pod_rules(&object, pod, &mut ignored)?;

    Ok(PodFacts {
        request,
        priority: spec.priority.unwrap_or(0),
        names_priority_class: (spec.priority_class_name.as_deref()).is_some_and(|c| !c.is_empty()),
        may_preempt: spec.preemption_policy.as_deref() != Some("Never"),
        nominated_node: (pod.status.as_ref())
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        queue: label_value(Some(labels), QUEUE_LABEL).map(str::to_owned),
        gpu_models,
        constraints,
        pod_rules: Arc::new(pod_rules),
        group: label_value(Some(labels), POD_GROUP_LABEL).map(str::to_owned),
        gated: spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty()),
        kind,
        topology,
        ignored,
        claims: claims(pod),
    })
}

/// The PersistentVolumeClaims a pod's volumes use (see [`PodFacts::claims`]).
fn claims(pod: &Pod) -> Vec<String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    volumes
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(claim), _) => Some(claim.claim_name.clone()),
            (None, Some(_)) => Some(format!("{name}-{}", v.name)),
            (None, None) => None,
        })
        .collect()
}

/// What a bound pod holds, from its resources alone: whatever else is wrong with the pod
/// (its scheduling fields may not parse), it runs and holds this. The request and extended
/// resources as [`pod_facts`] reads them, except that a `kant.io/gpu-fraction` that
/// cannot be read leaves the whole GPUs of `nvidia.com/gpu`, or one whole GPU where that
/// asks for none (the device the pod was given, all of it). `ours`: whether this
/// scheduler placed the pod; another scheduler's pod holds its `nvidia.com/gpu` alone,
/// whatever `kant.io/gpu-fraction` it carries (one copied from a template, or left from
/// when the workload was Kant's).
pub fn bound_request(
    pod: &Pod,
    ours: bool,
) -> Result<(PodRequest, ExtendedResources), ConvertError> {
    let (object, spec) = pod_spec(pod)?;
    let empty = BTreeMap::new();
    let annotations = (pod.metadata.annotations.as_ref())
        .filter(|_| ours)
        .unwrap_or(&empty);
    let amounts = effective_amounts(&object, spec)?;
    let request = pod_request(&object, &amounts, |whole| {
        gpu_request(&object, whole, annotations)
            .or_else(|_| gpu_request(&object, whole.max(1), &empty))
    })?;
    Ok((request, amounts.extended(&object)?))
}

/// The pod's request from its effective amounts (see [`effective_amounts`]), the whole
/// GPUs among them read into a GPU request by `gpu`.
fn pod_request(
    object: &str,
    amounts: &Amounts,
    gpu: impl FnOnce(u64) -> Result<GpuRequest, ConvertError>,
) -> Result<PodRequest, ConvertError> {
    let bytes = |name: &str| amounts.rounded_up(object, name, NANO);
    Ok(PodRequest {
        gpu: gpu(amounts.rounded_up(object, GPU_RESOURCE, NANO)?)?,
        cpu_milli: amounts.rounded_up(object, CPU, 1_000_000)?,
        memory_bytes: bytes(MEMORY)?,
        ephemeral_bytes: bytes(EPHEMERAL_STORAGE)?,
    })
}

/// Requests in billionths by resource name (GPUs in whole ones, so whole billions).
#[derive(Debug, Clone, Default)]
struct Amounts(BTreeMap<String, u128>);

impl Amounts {
    fn get(&self, name: &str) -> u128 {
        self.0.get(name).copied().unwrap_or(0)
    }

    fn add(&mut self, name: &str, value: u128) {
        let slot = self.0.entry(name.to_owned()).or_default();
        *slot = slot.saturating_add(value);
    }

    fn plus(&mut self, other: &Amounts) {
        for (name, &value) in &other.0 {
            self.add(name, value);
        }
    }

    fn at_least(&mut self, other: &Amounts) {
        for (name, &value) in &other.0 {
            let slot = self.0.entry(name.clone()).or_default();
            *slot = (*slot).max(value);
        }
    }

    /// The amount of `name` in units of `unit` billionths, rounded up.
    fn rounded_up(&self, object: &str, name: &str, unit: u128) -> Result<u64, ConvertError> {
        u64::try_from(self.get(name).div_ceil(unit)).map_err(|_| {
            ConvertError::new(
                object,
                "spec.containers",
                format!("the pod's {name} request is too large"),
            )
        })
    }

    /// The extended resources asked for, in their base units, rounded up; none of 0.
    fn extended(&self, object: &str) -> Result<ExtendedResources, ConvertError> {
        let mut extended = ExtendedResources::new();
        for name in self
            .0
            .keys()
            .filter(|n| !NOT_EXTENDED.contains(&n.as_str()))
        {
            let amount = self.rounded_up(object, name, NANO)?;
            if amount > 0 {
                extended.insert(name.clone(), amount);
            }
        }
        Ok(extended)
    }
}

/// The pod's requests as kube-scheduler computes them (`resourcehelper.PodRequests`): the
/// containers' sum; each init container on top of the sidecars started before it, the
/// sidecars themselves added to the sum; the larger of the two; pod-level requests for cpu
/// and memory where given; plus the overhead.
fn effective_amounts(object: &str, spec: &PodSpec) -> Result<Amounts, ConvertError> {
    let mut total = Amounts::default();
    for container in &spec.containers {
        let path = format!("spec.containers[{}]", container.name);
        total.plus(&container_amounts(object, &path, container)?);
    }
    let mut sidecars = Amounts::default();
    let mut init_peak = Amounts::default();
    for container in spec.init_containers.iter().flatten() {
        let path = format!("spec.initContainers[{}]", container.name);
        let own = container_amounts(object, &path, container)?;
        if container.restart_policy.as_deref() == Some("Always") {
            total.plus(&own);
            sidecars.plus(&own);
            init_peak.at_least(&sidecars);
        } else {
            let mut running = own;
            running.plus(&sidecars);
            init_peak.at_least(&running);
        }
    }
    total.at_least(&init_peak);
    if let Some(requests) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for name in [CPU, MEMORY] {
            if let Some(q) = requests.get(name) {
                let field = format!("spec.resources.requests[{name}]");
                total
                    .0
                    .insert(name.to_owned(), amount(object, field, name, q)?);
            }
        }
    }
    for (name, q) in spec.overhead.iter().flatten() {
        let value = amount(object, format!("spec.overhead[{name}]"), name, q)?;
        total.add(name, value);
    }
    Ok(total)
}

/// A quantity of the resource `name` in billionths: non-negative, and whole for GPUs.
fn amount(object: &str, field: String, name: &str, q: &Quantity) -> Result<u128, ConvertError> {
    let value = if name == GPU_RESOURCE {
        whole_gpus(q).map(|gpus| u128::from(gpus) * NANO)
    } else {
        non_negative(q)
    };
    value.map_err(|e| ConvertError::new(object, field, e))
}

/// One container's requests: a limit stands for a missing request (the API server's
/// defaulting); for every resource but cpu, memory and ephemeral storage (GPUs, extended
/// resources, hugepages), both given must be equal.
fn container_amounts(
    object: &str,
    path: &str,
    container: &Container,
) -> Result<Amounts, ConvertError> {
    let resources = container.resources.as_ref();
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    let field = |list: &str, name: &str| format!("{path}.resources.{list}[{name}]");
    let mut amounts = Amounts::default();
    for (name, request) in requests.into_iter().flatten() {
        let value = amount(object, field("requests", name), name, request)?;
        amounts.0.insert(name.clone(), value);
    }
    for (name, limit) in limits.into_iter().flatten() {
        let value = match requests.and_then(|r| r.get(name)) {
            None => amount(object, field("limits", name), name, limit)?,
            Some(_) if [CPU, MEMORY, EPHEMERAL_STORAGE].contains(&name.as_str()) => continue,
            Some(request) => {
                let value = amount(object, field("limits", name), name, limit)?;
                if amounts.get(name) != value {
                    return Err(ConvertError::new(
                        object,
                        field("requests", name),
                        format!(
                            "{:?} differs from the limit {:?} (an extended resource's request \
                             and limit must be equal)",
                            request.0, limit.0
                        ),
                    ));
                }
                value
            }
        };
        amounts.0.insert(name.clone(), value);
    }
    Ok(amounts)
}

/// The pod's GPU request: whole GPUs from the resource, or the fraction annotation.
fn gpu_request(
    object: &str,
    whole: u64,
    annotations: &BTreeMap<String, String>,
) -> Result<GpuRequest, ConvertError> {
    let Some(text) = annotations.get(GPU_FRACTION_ANNOTATION) else {
        let whole = u32::try_from(whole).map_err(|_| {
            ConvertError::new(
                object,
                "spec.containers",
                format!("{whole} {GPU_RESOURCE} is too many GPUs"),
            )
        })?;
        return Ok(GpuRequest::Whole(whole));
    };
    let field = annotation_field(GPU_FRACTION_ANNOTATION);
    let milli = match GpuRequest::parse(text) {
        Ok(GpuRequest::Fraction(milli)) => milli,
        Ok(GpuRequest::Whole(0)) => {
            return Err(ConvertError::new(
                object,
                field,
                format!("{text:?} is not above 0"),
            ));
        }
        Ok(GpuRequest::Whole(_)) => {
            return Err(ConvertError::new(
                object,
                field,
                format!(
                    "{text:?} is not below 1: ask for whole GPUs with the {GPU_RESOURCE} \
                     resource"
                ),
            ));
        }
        Err(e) => {
            return Err(ConvertError::new(
                object,
                field,
                format!("{e}: expected a fraction of one GPU between 0 and 1, such as \"0.5\""),
            ));
        }
    };
    if whole > 0 {
        return Err(ConvertError::new(
            object,
            field,
            format!(
                "a fraction of a GPU cannot be combined with {whole} whole GPUs \
                 ({GPU_RESOURCE})"
            ),
        ));
    }
    Ok(GpuRequest::Fraction(milli))
}

const REQUIRED_AFFINITY: &str =
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED_AFFINITY: &str =
    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";

/// A requirement on the node's name that no node meets.
pub(super) fn no_node() -> Requirement {
    Requirement {
        key: NODE_NAME_FIELD.to_owned(),
        op: SelectorOp::In,
        values: Vec::new(),
    }
}

/// One node selector term, as written (an empty one is the caller's to judge).
pub(super) fn selector_term(
    object: &str,
    path: &str,
    term: &NodeSelectorTerm,
) -> Result<SelectorTerm, ConvertError> {
    let mut converted = SelectorTerm::default();
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{i}]");
        converted
            .match_expressions
            .push(requirement(object, &path, r)?);
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        let path = format!("{path}.matchFields[{i}]");
        if r.key != NODE_NAME_FIELD {
            return Err(ConvertError::new(
                object,
                format!("{path}.key"),
                format!(
                    "unknown field {:?} (only {NODE_NAME_FIELD} is known)",
                    r.key
                ),
            ));
        }
        converted.match_fields.push(requirement(object, &path, r)?);
    }
    Ok(converted)
}

/// A preference's weight, 1 to 100 as Kubernetes requires.
fn weight(object: &str, path: &str, weight: i32) -> Result<u32, ConvertError> {
    u32::try_from(weight)
        .ok()
        .filter(|w| (1..=100).contains(w))
        .ok_or_else(|| {
            ConvertError::new(
                object,
                format!("{path}.weight"),
                format!("{weight} is not in 1..=100"),
            )
        })
}

/// The pod's node constraints (`None` when it has none), with the `extended` resources it
/// asks for, and the GPU models they name.
fn constraints(
    object: &str,
    spec: &PodSpec,
    extended: ExtendedResources,
) -> Result<(Option<NodeConstraints>, Vec<String>), ConvertError> {
    let node_selector: Vec<(String, String)> = spec
        .node_selector
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let mut affinity = Vec::new();
    if let Some(selector) = required {
        for (t, term) in selector.node_selector_terms.iter().enumerate() {
            let path = format!("{REQUIRED_AFFINITY}.nodeSelectorTerms[{t}]");
            let mut converted = selector_term(object, &path, term)?;
            if converted.match_expressions.is_empty() && converted.match_fields.is_empty() {
                // Kubernetes: an empty term matches no node. The model's empty term would
                // match every node, so it gets a requirement no node meets.
                converted.match_fields.push(no_node());
            }
            affinity.push(converted);
        }
        if affinity.is_empty() {
            // No term at all: Kubernetes places the pod nowhere.
            affinity.push(SelectorTerm {
                match_fields: vec![no_node()],
                ..SelectorTerm::default()
            });
        }
    }
    let mut preferred = Vec::new();
    let preferences = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        });
    for (t, p) in preferences.into_iter().flatten().enumerate() {
        let path = format!("{PREFERRED_AFFINITY}[{t}]");
        let term = selector_term(object, &format!("{path}.preference"), &p.preference)?;
        // An empty preference matches every node alike: it orders nothing.
        if !term.match_expressions.is_empty() || !term.match_fields.is_empty() {
            let weight = weight(object, &path, p.weight)?;
            preferred.push(Weighted { weight, term });
        }
    }
    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let path = format!("spec.tolerations[{i}]");
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(ConvertError::new(
                    object,
                    format!("{path}.operator"),
                    format!("unknown operator {other:?} (known: Equal, Exists)"),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(text) => Some(TaintEffect::parse(text).ok_or_else(|| {
                ConvertError::new(
                    object,
                    format!("{path}.effect"),
                    format!(
                        "unknown effect {text:?} (known: NoSchedule, PreferNoSchedule, \
                         NoExecute)"
                    ),
                )
            })?),
        };
        tolerations.push(Toleration {
            key: t.key.clone().filter(|k| !k.is_empty()),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }

    let selected = (spec.node_selector.as_ref()).and_then(|s| s.get(GPU_PRODUCT_LABEL));
    let gpu_models = match (selected, affinity_models(&affinity)) {
        (_, Some(allowed)) if allowed.is_empty() => {
            return Err(ConvertError::new(
                object,
                format!("{REQUIRED_AFFINITY}.nodeSelectorTerms"),
                format!(
                    "allows no GPU model: within each term, the `In` requirements on \
                     {GPU_PRODUCT_LABEL} share no value, so no node can match"
                ),
            ));
        }
        (Some(model), Some(allowed)) if !allowed.contains(model) => {
            return Err(ConvertError::new(
                object,
                format!("{REQUIRED_AFFINITY}.nodeSelectorTerms"),
                format!(
                    "allows no node of spec.nodeSelector's {GPU_PRODUCT_LABEL} {model:?} (it \
                     allows {})",
                    allowed.join(", ")
                ),
            ));
        }
        (Some(model), _) => vec![model.clone()],
        (None, allowed) => allowed.unwrap_or_default(),
    };
    let constraints = (!node_selector.is_empty()
        || !affinity.is_empty()
        || !tolerations.is_empty()
        || !preferred.is_empty()
        || !extended.is_empty())
    .then_some(NodeConstraints {
        node_selector,
        affinity,
        tolerations,
        preferred,
        extended,
        volumes: Vec::new(),
    });
    Ok((constraints, gpu_models))
}

/// The union over the affinity terms of the GPU models each allows, when every term has an
/// `In` requirement on the GPU product label (empty when they allow none); otherwise `None`
/// (any model).
fn affinity_models(terms: &[SelectorTerm]) -> Option<Vec<String>> {
    if terms.is_empty() {
        return None;
    }
    let mut models: Vec<String> = Vec::new();
    for term in terms {
        let mut allowed: Option<Vec<&String>> = None;
        for r in &term.match_expressions {
            if r.key == GPU_PRODUCT_LABEL && r.op == SelectorOp::In {
                let values = r.values.iter();
                allowed = Some(match allowed {
                    // Several `In` on the label within one term: all must hold.
                    Some(previous) => values.filter(|v| previous.contains(v)).collect(),
                    None => values.collect(),
                });
            }
        }
        for model in allowed? {
            if !models.contains(model) {
                models.push(model.clone());
            }
        }
    }
    Some(models)
}

fn requirement(
    object: &str,
    path: &str,
    r: &NodeSelectorRequirement,
) -> Result<Requirement, ConvertError> {
    selector_requirement(object, path, (&r.key, &r.operator, &r.values), true)
}

/// A requirement of a node selector (`numeric`: `Gt` and `Lt` allowed too) or of a label
/// selector, from its key, operator and values.
fn selector_requirement(
    object: &str,
    path: &str,
    (key, operator, values): (&str, &str, &Option<Vec<String>>),
    numeric: bool,
) -> Result<Requirement, ConvertError> {
    let op = SelectorOp::parse(operator)
        .filter(|op| numeric || !matches!(op, SelectorOp::Gt | SelectorOp::Lt))
        .ok_or_else(|| {
            let known = if numeric {
                "In, NotIn, Exists, DoesNotExist, Gt, Lt"
            } else {
                "In, NotIn, Exists, DoesNotExist"
            };
            ConvertError::new(
                object,
                format!("{path}.operator"),
                format!("unknown operator {operator:?} (known: {known})"),
            )
        })?;
    let values = values.clone().unwrap_or_default();
    let problem = match op {
        SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
            Some(format!("{operator} needs at least one value"))
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
            Some(format!("{operator} takes no values"))
        }
        SelectorOp::Gt | SelectorOp::Lt
            if values.len() != 1 || values[0].parse::<i64>().is_err() =>
        {
            Some(format!("{operator} takes one integer value"))
        }
        _ => None,
    };
    if let Some(message) = problem {
        return Err(ConvertError::new(object, format!("{path}.values"), message));
    }
    Ok(Requirement {
        key: key.to_owned(),
        op,
        values,
    })
}

/// Who the pod is, with its inter-pod affinity and anti-affinity terms and its topology
/// spread constraints, required and preferred. Host ports are rules too (see
/// [`host_port_rules`]). A term's `matchLabelKeys` and `mismatchLabelKeys`
/// become requirements on the pod's own label values, as the API server does. A non-empty
/// `namespaceSelector` cannot be evaluated (namespaces are not watched): the term is read
/// as selecting every namespace, which makes anti-affinity stricter and affinity looser,
/// and the field is reported.
fn pod_rules(
    object: &str,
    pod: &Pod,
    ignored: &mut Vec<&'static str>,
) -> Result<PodRules, ConvertError> {
    let identity = PodIdentity {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
    };
    let spec = pod.spec.as_ref();
    let affinity = spec.and_then(|s| s.affinity.as_ref());
    let mut required = |field: &'static str, terms: Option<&Vec<TermObject>>| {
        let mut converted = Vec::new();
        for (i, term) in terms.into_iter().flatten().enumerate() {
            let path = format!(
                "spec.affinity.{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
            );
            converted.push(affinity_term(object, &path, term, &identity, ignored)?);
        }
        Ok::<_, ConvertError>(converted)
    };
    let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
    let pod_anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let affinity_terms = pod_affinity.and_then(|a| {
        a.required_during_scheduling_ignored_during_execution
            .as_ref()
    });
    let anti_terms = pod_anti_affinity.and_then(|a| {
        a.required_during_scheduling_ignored_during_execution
            .as_ref()
    });
    let affinity = required("podAffinity", affinity_terms)?;
    let anti_affinity = required("podAntiAffinity", anti_terms)?;
    let mut preferred = |field: &'static str, terms: Option<&Vec<WeightedTermObject>>| {
        let mut converted = Vec::new();
        for (i, p) in terms.into_iter().flatten().enumerate() {
            let path = format!(
                "spec.affinity.{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            );
            let term_path = format!("{path}.podAffinityTerm");
            let term = affinity_term(object, &term_path, &p.pod_affinity_term, &identity, ignored)?;
            let weight = weight(object, &path, p.weight)?;
            converted.push(Weighted { weight, term });
        }
        Ok::<_, ConvertError>(converted)
    };
    let preferred_affinity = preferred(
        "podAffinity",
        pod_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let preferred_anti_affinity = preferred(
        "podAntiAffinity",
        pod_anti_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
    )?;
    let (mut spread, mut preferred_spread) = (Vec::new(), Vec::new());
    let constraints = spec.and_then(|s| s.topology_spread_constraints.as_ref());
    for (i, constraint) in constraints.into_iter().flatten().enumerate() {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        let (hard, converted) = spread_constraint(object, &path, constraint, &identity)?;
        if hard {
            spread.push(converted);
        } else {
            preferred_spread.push(converted);
        }
    }
    ignored.dedup();
    let (identity, anti_affinity) = host_port_rules(spec, identity, anti_affinity);
    Ok(PodRules {
        identity,
        affinity,
        anti_affinity,
        spread,
        preferred_spread,
        preferred_affinity,
        preferred_anti_affinity,
    })
}

/// Two pods asking for one host port cannot share a node (kube-scheduler's `NodePorts`):
/// each port a container asks for becomes a label on the pod's identity and a required
/// anti-affinity term, by hostname, against every pod that carries it, in any namespace.
/// The host IP is not looked at: pods asking for one port on two addresses are kept
/// apart too. `hostNetwork` pods ask for their container ports as host ports (the API
/// server defaults them so).
fn host_port_rules(
    spec: Option<&PodSpec>,
    mut identity: PodIdentity,
    mut anti_affinity: Vec<PodAffinityTerm>,
) -> (PodIdentity, Vec<PodAffinityTerm>) {
    let ports = (spec.into_iter())
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&port| port > 0)?;
            let protocol = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
            Some(format!("{HOST_PORT_LABEL_PREFIX}{protocol}.{port}"))
        });
    for key in ports {
        if identity.labels.insert(key.clone(), String::new()).is_some() {
            continue;
        }
        anti_affinity.push(PodAffinityTerm {
            selector: Some(vec![Requirement {
                key,
                op: SelectorOp::Exists,
                values: Vec::new(),
            }]),
            namespaces: Namespaces::All,
            topology_key: HOSTNAME_LABEL.to_owned(),
        });
    }
    (identity, anti_affinity)
}

fn affinity_term(
    object: &str,
    path: &str,
    term: &TermObject,
    pod: &PodIdentity,
    ignored: &mut Vec<&'static str>,
) -> Result<PodAffinityTerm, ConvertError> {
    let keys = [
        (&term.match_label_keys, SelectorOp::In),
        (&term.mismatch_label_keys, SelectorOp::NotIn),
    ];
    let selector = pod_selector(object, path, term.label_selector.as_ref(), keys, pod)?;
    let listed = term.namespaces.clone().unwrap_or_default();
    let namespaces = match &term.namespace_selector {
        Some(s)
            if s.match_labels.iter().flatten().next().is_none()
                && s.match_expressions.iter().flatten().next().is_none() =>
        {
            Namespaces::All
        }
        Some(_) => {
            ignored.push(
                "a pod affinity term's namespaceSelector (the term is applied to every namespace)",
            );
            Namespaces::All
        }
        None if listed.is_empty() => Namespaces::Only(vec![pod.namespace.clone()]),
        None => Namespaces::Only(listed),
    };
    Ok(PodAffinityTerm {
        selector,
        namespaces,
        topology_key: topology_key(object, path, &term.topology_key)?,
    })
}

/// A spread constraint, and whether it is hard (`DoNotSchedule`).
fn spread_constraint(
    object: &str,
    path: &str,
    constraint: &TopologySpreadConstraint,
    pod: &PodIdentity,
) -> Result<(bool, SpreadConstraint), ConvertError> {
    let field = |name: &str| format!("{path}.{name}");
    let hard = match constraint.when_unsatisfiable.as_str() {
        "DoNotSchedule" => true,
        "ScheduleAnyway" => false,
        other => {
            return Err(ConvertError::new(
                object,
                field("whenUnsatisfiable"),
                format!("unknown value {other:?} (known: DoNotSchedule, ScheduleAnyway)"),
            ));
        }
    };
    let max_skew = u32::try_from(constraint.max_skew)
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| {
            ConvertError::new(
                object,
                field("maxSkew"),
                format!("{} is not above 0", constraint.max_skew),
            )
        })?;
    let min_domains = match constraint.min_domains {
        None => None,
        Some(m) => Some(u32::try_from(m).ok().filter(|&m| m > 0).ok_or_else(|| {
            ConvertError::new(object, field("minDomains"), format!("{m} is not above 0"))
        })?),
    };
    let policy = |name: &str, value: &Option<String>, default: bool| match value.as_deref() {
        None => Ok(default),
        Some("Honor") => Ok(true),
        Some("Ignore") => Ok(false),
        Some(other) => Err(ConvertError::new(
            object,
            field(name),
            format!("unknown policy {other:?} (known: Honor, Ignore)"),
        )),
    };
    let keys = [
        (&constraint.match_label_keys, SelectorOp::In),
        (&None, SelectorOp::NotIn),
    ];
    // kube-scheduler counts no pod for a selector without requirements (an empty
    // `labelSelector` whose `matchLabelKeys` add none): the constraint then holds
    // everywhere, as one selecting no pod does.
    let selector = pod_selector(object, path, constraint.label_selector.as_ref(), keys, pod)?
        .filter(|requirements| !requirements.is_empty());
    let converted = SpreadConstraint {
        pods: PodAffinityTerm {
            selector,
            namespaces: Namespaces::Only(vec![pod.namespace.clone()]),
            topology_key: topology_key(object, path, &constraint.topology_key)?,
        },
        max_skew,
        min_domains,
        honor_node_affinity: policy("nodeAffinityPolicy", &constraint.node_affinity_policy, true)?,
        honor_taints: policy("nodeTaintsPolicy", &constraint.node_taints_policy, false)?,
    };
    Ok((hard, converted))
}

fn topology_key(object: &str, path: &str, key: &str) -> Result<String, ConvertError> {
    if key.is_empty() {
        return Err(ConvertError::new(
            object,
            format!("{path}.topologyKey"),
            "empty",
        ));
    }
    Ok(key.to_owned())
}

/// A label selector on pods (`None`: a null selector, which selects no pod), with the
/// pod's own values of `own_keys` added as requirements (`In` for `matchLabelKeys`,
/// `NotIn` for `mismatchLabelKeys`).
fn pod_selector(
    object: &str,
    path: &str,
    selector: Option<&LabelSelector>,
    own_keys: [(&Option<Vec<String>>, SelectorOp); 2],
    pod: &PodIdentity,
) -> Result<Option<Vec<Requirement>>, ConvertError> {
    let Some(selector) = selector else {
        return Ok(None);
    };
    let path = format!("{path}.labelSelector");
    let mut requirements = label_selector(object, &path, selector)?;
    for (keys, op) in own_keys {
        for key in keys.iter().flatten() {
            if let Some(value) = pod.labels.get(key) {
                requirements.push(Requirement {
                    key: key.clone(),
                    op,
                    values: vec![value.clone()],
                });
            }
        }
    }
    Ok(Some(requirements))
}

/// The requirements of a label selector at `path` of `object`: every one must hold.
pub(super) fn label_selector(
    object: &str,
    path: &str,
    selector: &LabelSelector,
) -> Result<Vec<Requirement>, ConvertError> {
    let mut requirements: Vec<Requirement> = (selector.match_labels.iter().flatten())
        .map(|(key, value)| Requirement {
            key: key.clone(),
            op: SelectorOp::In,
            values: vec![value.clone()],
        })
        .collect();
    for (j, r) in selector.match_expressions.iter().flatten().enumerate() {
        let path = format!("{path}.matchExpressions[{j}]");
        let fields = (r.key.as_str(), r.operator.as_str(), &r.values);
        requirements.push(selector_requirement(object, &path, fields, false)?);
    }
    Ok(requirements)
}

// ----------------------------------------------------------------------------------------
// Bound pods

/// The annotations that record a pod's devices on its binding: `kant.io/gpu-ids` and
/// `kant.io/rdma-nic` (none for a pod without GPUs). `nics` names the node's NICs as
/// [`LinkMatrix::nic`] numbers them.
pub fn binding_annotations(
    alloc: &DeviceAlloc,
    links: &LinkMatrix,
    nics: &[String],
) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    if alloc.devices == 0 {
        return annotations;
    }
    let ids: Vec<String> = bits(alloc.devices).map(|d| d.to_string()).collect();
    annotations.insert(GPU_IDS_ANNOTATION.to_owned(), ids.join(","));
    let mut names: Vec<String> = Vec::new();
    for device in bits(alloc.devices).filter(|&d| d < links.devices()) {
        let index = usize::from(links.nic(device));
        let name = nics
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("NIC{index}"));
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if !names.is_empty() {
        annotations.insert(RDMA_NIC_ANNOTATION.to_owned(), names.join(","));
    }
    annotations
}

/// The devices a bound pod holds on its node of `node_gpus` GPUs, as its
/// `kant.io/gpu-ids` annotation names them; `None` when it has none (a pod another
/// scheduler placed). A fraction's share per device is the request's.
pub fn bound_devices(
    pod: &Pod,
    request: &PodRequest,
    node_gpus: usize,
) -> Result<Option<DeviceAlloc>, ConvertError> {
    let Some(text) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GPU_IDS_ANNOTATION))
    else {
        return Ok(None);
    };
    let object = pod_object(pod);
    let field = annotation_field(GPU_IDS_ANNOTATION);
    let err = |message: String| ConvertError::new(&object, &field, message);
    let devices = parse_device_list(text, node_gpus).map_err(err)?;
    let count = devices.count_ones();
    let (wanted, milli_each) = match request.gpu {
        GpuRequest::Whole(n) => (n, MILLI_PER_GPU),
        GpuRequest::Fraction(milli) => (1, milli),
    };
    if count != wanted {
        return Err(err(format!(
            "{text:?} names {count} GPUs, the pod asks for {}",
            request.gpu
        )));
    }
    Ok(Some(DeviceAlloc {
        devices,
        milli_each,
    }))
}

/// A comma-separated list of device indexes below `gpus` as a bit mask; empty text is no
/// device.
fn parse_device_list(text: &str, gpus: usize) -> Result<u32, String> {
    let mut mask = 0u32;
    if text.trim().is_empty() {
        return Ok(0);
    }
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{text:?} is not a comma-separated list of GPU indexes ({item:?})"
            ));
        }
        let index = item
            .parse::<usize>()
            .ok()
            .filter(|&i| i < gpus)
            .ok_or_else(|| format!("GPU {item} is out of range: the node has {gpus} GPUs"))?;
        let bit = 1u32 << index;
        if mask & bit != 0 {
            return Err(format!("{text:?} names GPU {index} twice"));
        }
        mask |= bit;
    }
    Ok(mask)
}

// ----------------------------------------------------------------------------------------
// Nodes

/// The node labels of the network position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyKeys {
    pub superspine: String,
    pub spine: String,
    pub leaf: String,
    pub hbd: String,
}

impl Default for TopologyKeys {
    fn default() -> Self {
        Self {
            superspine: SUPERSPINE_LABEL.to_owned(),
            spine: SPINE_LABEL.to_owned(),
            leaf: LEAF_LABEL.to_owned(),
            hbd: HBD_LABEL.to_owned(),
        }
    }
}

/// What the scheduler needs to know of a node. Equal facts mean nothing relevant changed.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub row: NodeRow,
    /// Shared with every node of the same layout.
    pub links: Arc<LinkMatrix>,
    /// The node's RDMA NIC names, indexed as [`LinkMatrix::nic`] numbers them.
    pub nics: Vec<String>,
    /// How many more devices the device plugin reports unhealthy (capacity less
    /// allocatable) than `kant.io/unhealthy-gpus` lists: which ones is not known.
    pub unlisted_unhealthy: usize,
    /// Why a GPU annotation of the node does not parse: its devices are then all marked
    /// unhealthy (it takes no new GPU pod; the pods it runs keep theirs), on the layout and
    /// NIC names its model has without GPU annotations.
    pub problem: Option<String>,
    /// A label that cannot take effect though the node is usable: a spine or superspine
    /// without a leaf (the node is in no leaf group, and so in no spine or superspine).
    pub notice: Option<String>,
}

/// Converts nodes, sharing one link matrix between nodes of one layout: a layout name and
/// GPU count, or an identical `kant.io/gpu-topology` text, is parsed once.
#[derive(Debug)]
pub struct NodeConverter {
    keys: TopologyKeys,
    default_profile: LinkProfile,
    by_model: HashMap<String, LinkProfile>,
    topologies: HashMap<String, Arc<LinkMatrix>>,
    profiles: HashMap<(LinkProfile, usize), Arc<LinkMatrix>>,
    /// Parsed annotation texts, or why they do not parse.
    texts: HashMap<String, Result<Arc<LinkMatrix>, String>>,
}

impl NodeConverter {
    /// A converter with the configuration's link layouts; fails when one of its
    /// `links.topologies` does not parse.
    pub fn new(config: &Config, keys: TopologyKeys) -> Result<NodeConverter, String> {
        Ok(NodeConverter {
            keys,
            default_profile: config.links.default,
            by_model: config.links.by_model.clone(),
            topologies: config.links.parsed_topologies()?,
            profiles: HashMap::new(),
            texts: HashMap::new(),
        })
    }

    /// The GPU models the configuration's links name (`by_model` and `topologies`).
    pub fn link_models(&self) -> impl Iterator<Item = &String> {
        self.by_model.keys().chain(self.topologies.keys())
    }

    /// Reads what the scheduler needs of a node, following the conventions at the top of
    /// this file.
    pub fn node(&mut self, node: &Node) -> Result<NodeFacts, ConvertError> {
        let name = node
            .metadata
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ConvertError::new("node", NODE_NAME_FIELD, "missing"))?;
        let object = format!("node {name}");
        let labels: Labels = node.metadata.labels.clone().unwrap_or_default();
        let empty = BTreeMap::new();
        let annotations = node.metadata.annotations.as_ref().unwrap_or(&empty);
        let status = node.status.as_ref();
        let allocatable = status.and_then(|s| s.allocatable.as_ref());
        let allocatable_field = |name: &str| format!("status.allocatable[{name}]");
        let quantity = |name: &str| allocatable.and_then(|a| a.get(name));

        let healthy = listed_gpus(&object, "status.allocatable", allocatable)?;
        let all_devices = status.and_then(|s| s.capacity.as_ref());
        let (gpus, gpu_field) = match listed_gpus(&object, "status.capacity", all_devices)? {
            Some(gpus) => (gpus, format!("status.capacity[{GPU_RESOURCE}]")),
            None => (healthy.unwrap_or(0), allocatable_field(GPU_RESOURCE)),
        };
        let healthy = healthy.unwrap_or(0);
        if healthy > gpus {
            return Err(ConvertError::new(
                &object,
                allocatable_field(GPU_RESOURCE),
                format!("{healthy} GPUs, more than the {gpus} of {gpu_field}"),
            ));
        }
        let model = labels
            .get(GPU_PRODUCT_LABEL)
            .filter(|m| !m.is_empty())
            .cloned();
        if gpus > 0 && model.is_none() {
            return Err(ConvertError::new(
                &object,
                label_field(GPU_PRODUCT_LABEL),
                format!(
                    "missing on a node with {gpus} GPUs ({gpu_field}): the GPU model is unknown"
                ),
            ));
        }
        let gpu_model = if gpus > 0 { model } else { None };

        // An allocatable quantity in units of `unit` billionths, rounded down.
        let capacity = |name: &str, q: &Quantity, unit: u128| -> Result<u64, ConvertError> {
            let field = allocatable_field(name);
            let nano = non_negative(q).map_err(|e| ConvertError::new(&object, &field, e))?;
            u64::try_from(nano / unit)
                .map_err(|_| ConvertError::new(&object, &field, format!("{:?} is too large", q.0)))
        };
        // Absent is none, as kube-scheduler reads it: a node that lists no `pods` takes
        // no pod, and one that lists no `cpu` no pod asking for some.
        let listed = |name: &str, unit: u128| match quantity(name) {
            Some(q) => capacity(name, q, unit).map(Some),
            None => Ok(Some(0)),
        };
        let cpu_milli = listed(CPU, 1_000_000)?;
        let memory_bytes = listed(MEMORY, NANO)?;
        let ephemeral_bytes = listed(EPHEMERAL_STORAGE, NANO)?;
        let max_pods = listed(PODS, NANO)?.map(|pods| u32::try_from(pods).unwrap_or(u32::MAX));
        let mut extended = ExtendedResources::new();
        for (name, q) in allocatable.into_iter().flatten() {
            if !NOT_EXTENDED.contains(&name.as_str()) {
                extended.insert(name.clone(), capacity(name, q, NANO)?);
            }
        }

        let label = |key: &str| labels.get(key).filter(|v| !v.is_empty()).cloned();
        let leaf = label(&self.keys.leaf).map(|leaf| LeafPath {
            superspine: label(&self.keys.superspine).unwrap_or_default(),
            spine: label(&self.keys.spine).unwrap_or_default(),
            leaf,
        });
        let hbd = label(&self.keys.hbd);
        let above_no_leaf = [&self.keys.spine, &self.keys.superspine]
            .into_iter()
            .find(|key| leaf.is_none() && label(key).is_some());
        let notice = above_no_leaf.map(|key| {
            format!(
                "{object}: {}: set without {}: the node is in no leaf group, and so in no \
                 spine or superspine either",
                label_field(key),
                label_field(&self.keys.leaf)
            )
        });

        let taints = taints(&object, node)?;
        // A GPU annotation that does not parse closes the node's GPUs, not the node: its
        // running pods stay counted, on the layout its model would have without one.
        let model = gpu_model.as_deref();
        let (unhealthy, links, nics, problem) =
            match self.devices(&object, gpus, &gpu_field, model, annotations) {
                Ok((unhealthy, links, nics)) => (unhealthy, links, nics, None),
                Err(problem) => {
                    let links = self.links(&object, gpus, &gpu_field, model, &empty)?;
                    let (links, nics) = nic_names(&object, links, gpus, &empty)?;
                    (
                        node_device_mask(gpus),
                        links,
                        nics,
                        Some(problem.to_string()),
                    )
                }
            };
        let unlisted_unhealthy = (gpus - healthy).saturating_sub(unhealthy.count_ones() as usize);

        Ok(NodeFacts {
            row: NodeRow {
                name: name.to_owned(),
                gpu_model,
                gpus,
                cpu_milli,
                memory_bytes,
                ephemeral_bytes,
                max_pods,
                extended,
                leaf,
                hbd,
                unhealthy,
                labels,
                taints,
            },
            links,
            nics,
            unlisted_unhealthy,
            problem,
            notice,
        })
    }

    /// The node's unhealthy devices, link matrix and NIC names, from its annotations.
    fn devices(
        &mut self,
        object: &str,
        gpus: usize,
        gpu_field: &str,
        model: Option<&str>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(u32, Arc<LinkMatrix>, Vec<String>), ConvertError> {
        let unhealthy = match annotations.get(UNHEALTHY_GPUS_ANNOTATION) {
            Some(text) if gpus > 0 => parse_device_list(text, gpus).map_err(|e| {
                ConvertError::new(object, annotation_field(UNHEALTHY_GPUS_ANNOTATION), e)
            })?,
            _ => 0,
        };
        let links = self.links(object, gpus, gpu_field, model, annotations)?;
        let (links, nics) = nic_names(object, links, gpus, annotations)?;
        Ok((unhealthy, links, nics))
    }

    /// The node's link matrix: its annotation, else the configuration for its model.
    fn links(
        &mut self,
        object: &str,
        gpus: usize,
        gpu_field: &str,
        model: Option<&str>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Arc<LinkMatrix>, ConvertError> {
        let field = annotation_field(GPU_TOPOLOGY_ANNOTATION);
        if gpus > 0
            && let Some(text) = annotations.get(GPU_TOPOLOGY_ANNOTATION)
        {
            let name = text.trim();
            let deserializer: StrDeserializer<'_, serde::de::value::Error> =
                name.into_deserializer();
            if let Ok(profile) = LinkProfile::deserialize(deserializer) {
                return self.profile(object, &field, profile, gpus);
            }
            if !name.contains('\n') {
                return Err(ConvertError::new(
                    object,
                    field,
                    format!(
                        "{name:?} is neither a layout name ({LAYOUT_NAMES}) nor the output of \
                         nvidia-smi topo -m"
                    ),
                ));
            }
            let matrix = self.parsed_text(object, text);
            let matrix = matrix.map_err(|message| ConvertError::new(object, &field, message))?;
            if matrix.devices() != gpus {
                return Err(ConvertError::new(
                    object,
                    field,
                    format!(
                        "the topology matrix has {} GPUs, the node has {gpus} ({gpu_field})",
                        matrix.devices(),
                    ),
                ));
            }
            return Ok(matrix);
        }
        if let Some(model) = model {
            if let Some(matrix) = self.topologies.get(model) {
                if matrix.devices() != gpus {
                    return Err(ConvertError::new(
                        object,
                        gpu_field,
                        format!(
                            "{gpus} GPUs, but the configuration's links.topologies.{model} \
                             describes {}",
                            matrix.devices()
                        ),
                    ));
                }
                return Ok(matrix.clone());
            }
            if let Some(&profile) = self.by_model.get(model) {
                let field = format!("links.by_model.{model} of the configuration");
                return self.profile(object, &field, profile, gpus);
            }
        }
        let field = "links.default of the configuration";
        self.profile(object, field, self.default_profile, gpus)
    }

    /// The shared matrix of a layout for `gpus` devices.
    fn profile(
        &mut self,
        object: &str,
        field: &str,
        profile: LinkProfile,
        gpus: usize,
    ) -> Result<Arc<LinkMatrix>, ConvertError> {
        if let Some(matrix) = self.profiles.get(&(profile, gpus)) {
            return Ok(matrix.clone());
        }
        let matrix = LinkMatrix::from_profile(profile, gpus)
            .map_err(|e| ConvertError::new(object, field, e.message))?
            .shared();
        self.profiles.insert((profile, gpus), matrix.clone());
        Ok(matrix)
    }

    /// The matrix of an annotation's `nvidia-smi topo -m` text, parsed once per distinct
    /// text (errors included).
    fn parsed_text(&mut self, object: &str, text: &str) -> Result<Arc<LinkMatrix>, String> {
        if let Some(parsed) = self.texts.get(text) {
            return parsed.clone();
        }
        if self.texts.len() >= MAX_CACHED_TEXTS {
            self.texts.clear();
        }
        let parsed = crate::model::parse_topo_matrix(object, text)
            .map(LinkMatrix::shared)
            .map_err(|e| e.message);
        self.texts.insert(text.to_owned(), parsed.clone());
        parsed
    }
}

/// The whole GPUs of a node's resource list (`status.capacity` or `status.allocatable`,
/// named by `list`), at most [`MAX_GPUS_PER_NODE`]; `None` when it has no GPU entry.
fn listed_gpus(
    object: &str,
    list: &str,
    resources: Option<&BTreeMap<String, Quantity>>,
) -> Result<Option<usize>, ConvertError> {
    let Some(q) = resources.and_then(|r| r.get(GPU_RESOURCE)) else {
        return Ok(None);
    };
    let field = format!("{list}[{GPU_RESOURCE}]");
    let gpus = whole_gpus(q).map_err(|e| ConvertError::new(object, &field, e))?;
    usize::try_from(gpus)
        .ok()
        .filter(|&g| g <= MAX_GPUS_PER_NODE)
        .map(Some)
        .ok_or_else(|| {
            ConvertError::new(
                object,
                &field,
                format!(
                    "{gpus} GPUs, more than the {MAX_GPUS_PER_NODE} a node may have (MIG's \
                     `single` strategy or time-slicing replicas can list more)"
                ),
            )
        })
}

/// The node's taints, with the one Kubernetes puts on a cordoned node.
fn taints(object: &str, node: &Node) -> Result<Vec<Taint>, ConvertError> {
    let spec = node.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
            ConvertError::new(
                object,
                format!("spec.taints[{i}].effect"),
                format!(
                    "unknown effect {:?} (known: NoSchedule, PreferNoSchedule, NoExecute)",
                    t.effect
                ),
            )
        })?;
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    if cordoned && !taints.iter().any(Taint::is_cordon) {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_owned(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
    }
    Ok(taints)
}

/// The names of the NICs the matrix refers to, with the matrix that pairs them: the
/// annotation's, else the matrix's own (`nvidia-smi topo -m` names them), else `NIC0`,
/// `NIC1`, ... Where a layout assumed more NICs than the annotation names (8 GPUs on 4
/// NICs), each named NIC stands for as many of the assumed ones, in device order:
/// neighbouring devices, which share a PCIe switch, share it. Where it names more than a
/// layout assumed (one NIC per GPU where it assumed one per pair), they are spread over the
/// devices in order instead, one each when there are as many as devices.
fn nic_names(
    object: &str,
    links: Arc<LinkMatrix>,
    gpus: usize,
    annotations: &BTreeMap<String, String>,
) -> Result<(Arc<LinkMatrix>, Vec<String>), ConvertError> {
    if gpus == 0 {
        return Ok((links, Vec::new()));
    }
    let needed = (0..links.devices())
        .map(|d| usize::from(links.nic(d)) + 1)
        .max()
        .unwrap_or(0);
    let Some(text) = annotations.get(RDMA_NICS_ANNOTATION) else {
        let names = match links.nic_names() {
            [] => (0..needed).map(|k| format!("NIC{k}")).collect(),
            named => named.to_vec(),
        };
        return Ok((links, names));
    };
    let field = annotation_field(RDMA_NICS_ANNOTATION);
    let names: Vec<String> = text.split(',').map(|n| n.trim().to_owned()).collect();
    if names.iter().any(String::is_empty) {
        return Err(ConvertError::new(
            object,
            field,
            format!("{text:?} has an empty NIC name"),
        ));
    }
    if let Some(twice) = names
        .iter()
        .enumerate()
        .find_map(|(i, n)| names[..i].contains(n).then_some(n))
    {
        return Err(ConvertError::new(
            object,
            field,
            format!(
                "{text:?} names {twice} twice (GPUs that share a NIC are told by naming fewer \
                 NICs than the topology refers to)"
            ),
        ));
    }
    if links.nics_assumed() && names.len() < needed {
        let shared = (0..needed).map(|k| names[k * names.len() / needed].clone());
        return Ok((links, shared.collect()));
    }
    if links.nics_assumed() && names.len() > needed {
        return Ok((links.with_nics_spread(names.len()).shared(), names));
    }
    if names.len() < needed {
        return Err(ConvertError::new(
            object,
            field,
            format!(
                "{text:?} names {} NICs, the node's GPU topology refers to {needed} (NIC0 to \
                 NIC{})",
                names.len(),
                needed - 1
            ),
        ));
    }
    Ok((links, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, value) => *slot = value,
        }
    }

    /// A pod `ml/p` with one container `main`, changed by `extra`.
    fn pod(extra: Value) -> Pod {
        let mut value = json!({
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "main"}]}
        });
        merge(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    fn facts(extra: Value) -> PodFacts {
        pod_facts(&pod(extra)).unwrap()
    }

    fn pod_error(extra: Value) -> String {
        pod_facts(&pod(extra)).unwrap_err().to_string()
    }

    fn containers(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "main", "resources": resources}]}})
    }

    #[test]
    fn empty_labels_name_nothing() {
        // A Helm value left blank: no pod group (as scheduler-plugins reads it), the
        // default queue, no workload kind.
        let blank = facts(json!({"metadata": {"labels": {
            "scheduling.x-k8s.io/pod-group": "",
            "kant.io/queue": "",
            "kant.io/workload": "",
        }}}));
        assert_eq!(blank.group, None);
        assert_eq!(blank.queue, None);
        assert_eq!(blank.kind, JobKind::Unknown);
    }

    #[test]
    fn a_training_operator_worker() {
        let worker = pod(json!({
            "metadata": {
                "name": "llama-worker-3",
                "labels": {
                    "scheduling.x-k8s.io/pod-group": "llama",
                    "kant.io/queue": "team-a",
                    "kant.io/workload": "train",
                    "training.kubeflow.org/replica-type": "worker"
                },
                "annotations": {"kant.io/topology": "required:leaf"}
            },
            "spec": {
                "priority": 1000,
                "priorityClassName": "training",
                "preemptionPolicy": "Never",
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "pool", "value": "llm"}
                ],
                "containers": [{
                    "name": "pytorch",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1600Gi"},
                        "requests": {"nvidia.com/gpu": "8", "cpu": "90", "memory": "1500Gi"}
                    }
                }]
            }
        }));
        let facts = pod_facts(&worker).unwrap();
        assert_eq!(
            facts.request,
            PodRequest {
                gpu: GpuRequest::Whole(8),
                cpu_milli: 90_000,
                memory_bytes: 1500 << 30,
                ephemeral_bytes: 0,
            }
        );
        assert_eq!(facts.priority, 1000);
        assert!(!facts.may_preempt);
        assert_eq!(facts.queue.as_deref(), Some("team-a"));
        assert_eq!(facts.group.as_deref(), Some("llama"));
        assert_eq!(facts.kind, JobKind::Train);
        assert_eq!(facts.gpu_models, ["NVIDIA-H100-80GB-HBM3"]);
        assert_eq!(
            facts.topology,
            Some(TopologyNeed {
                tier: crate::model::Tier::Leaf,
                required: true
            })
        );
        assert!(!facts.gated);
        assert!(facts.ignored.is_empty());
        let constraints = facts.constraints.unwrap();
        assert_eq!(
            constraints.node_selector,
            [(
                GPU_PRODUCT_LABEL.to_owned(),
                "NVIDIA-H100-80GB-HBM3".to_owned()
            )]
        );
        assert!(constraints.affinity.is_empty());
        assert_eq!(
            constraints.tolerations,
            [
                Toleration {
                    key: Some("nvidia.com/gpu".into()),
                    exists: true,
                    value: String::new(),
                    effect: Some(TaintEffect::NoSchedule),
                },
                Toleration {
                    key: Some("pool".into()),
                    exists: false,
                    value: "llm".into(),
                    effect: None,
                },
            ]
        );
    }

    #[test]
    fn a_bare_pod_asks_for_nothing_and_goes_anywhere() {
        let facts = facts(json!({}));
        assert_eq!(facts.request, PodRequest::gpus(GpuRequest::NONE));
        assert_eq!(facts.priority, 0);
        assert!(facts.may_preempt);
        assert_eq!(facts.queue, None);
        assert_eq!(facts.group, None);
        assert_eq!(facts.kind, JobKind::Unknown);
        assert_eq!(facts.topology, None);
        assert_eq!(facts.constraints, None);
        assert!(facts.gpu_models.is_empty());
    }

    #[test]
    fn requests_sum_containers_and_init_containers_raise_them() {
        let spec = json!({"spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "1Gi"}}},
                {"name": "log", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}
            ],
            "initContainers": [
                {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "4", "memory": "100Mi"}}},
                {"name": "fetch", "resources": {"requests": {"cpu": "1", "memory": "3Gi"}}}
            ]
        }});
        let facts = facts(spec);
        // GPUs: max(1, 2); CPU: max(2.5, 4); memory: max(1.5Gi, 3Gi).
        assert_eq!(
            facts.request,
            PodRequest {
                gpu: GpuRequest::Whole(2),
                cpu_milli: 4000,
                memory_bytes: 3 << 30,
                ephemeral_bytes: 0,
            }
        );
    }

    #[test]
    fn sidecars_count_with_the_containers_and_overhead_is_added() {
        let spec = json!({"spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "1500m", "memory": "100Mi"}}}
            ],
            "overhead": {"cpu": "250m", "memory": "64Mi"}
        }});
        // Containers with the sidecar: 2 CPUs, 2Gi; setup runs beside the sidecar: 2.5
        // CPUs, 1Gi + 100Mi. Then the overhead.
        let request = facts(spec).request;
        assert_eq!(request.cpu_milli, 2750);
        assert_eq!(request.memory_bytes, (2048 + 64) << 20);
    }

    #[test]
    fn pod_level_requests_replace_the_containers_sum() {
        let spec = json!({"spec": {
            "resources": {"requests": {"cpu": "8"}},
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
        }});
        let request = facts(spec).request;
        assert_eq!((request.cpu_milli, request.memory_bytes), (8000, 1 << 30));
    }

    #[test]
    fn memory_and_storage_are_counted_in_bytes_as_kube_scheduler_counts_them() {
        // Kubelet reports memory in Ki: a pod asking for all of it fits.
        let allocatable = json!({"memory": "2063731180Ki", "ephemeral-storage": "94580335255"});
        let big = converter()
            .node(&node(json!({"status": {"allocatable": allocatable}})))
            .unwrap();
        let all = facts(containers(json!({"requests": allocatable})));
        assert_eq!(all.request.memory_bytes, big.row.memory_bytes.unwrap());
        assert_eq!(
            all.request.ephemeral_bytes,
            big.row.ephemeral_bytes.unwrap()
        );
        // Ten pods of 100M fill a node of 1000M exactly.
        let small = converter()
            .node(&node(
                json!({"status": {"allocatable": {"memory": "1000M"}}}),
            ))
            .unwrap();
        let tenth = facts(containers(json!({"requests": {"memory": "100M"}})));
        assert_eq!(
            10 * tenth.request.memory_bytes,
            small.row.memory_bytes.unwrap()
        );
    }

    #[test]
    fn cpu_and_memory_round_up() {
        let request = facts(containers(
            json!({"requests": {"cpu": "1e-3", "memory": "1"}}),
        ))
        .request;
        assert_eq!((request.cpu_milli, request.memory_bytes), (1, 1));
        // Three containers of 0.4 millicores: 1.2 in all, 2 after rounding the sum.
        let spec = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "400u"}}},
            {"name": "b", "resources": {"requests": {"cpu": "400u"}}},
            {"name": "c", "resources": {"requests": {"cpu": "400u"}}}
        ]}});
        assert_eq!(facts(spec).request.cpu_milli, 2);
    }

    #[test]
    fn gpu_requests_without_limits_and_mismatches() {
        let requested = facts(containers(json!({"requests": {"nvidia.com/gpu": "4"}})));
        assert_eq!(requested.request.gpu, GpuRequest::Whole(4));
        let same = facts(containers(
            json!({"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}),
        ));
        assert_eq!(same.request.gpu, GpuRequest::Whole(2));
        assert_eq!(
            pod_error(containers(
                json!({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}})
            )),
            "pod ml/p: spec.containers[main].resources.requests[nvidia.com/gpu]: \"1\" differs \
             from the limit \"2\" (an extended resource's request and limit must be equal)"
        );
    }

    #[test]
    fn gpus_must_be_whole_and_non_negative() {
        assert_eq!(
            pod_error(containers(json!({"limits": {"nvidia.com/gpu": "1.5"}}))),
            "pod ml/p: spec.containers[main].resources.limits[nvidia.com/gpu]: \"1.5\" is not \
             a whole number of GPUs"
        );
        assert_eq!(
            pod_error(containers(json!({"limits": {"nvidia.com/gpu": "-1"}}))),
            "pod ml/p: spec.containers[main].resources.limits[nvidia.com/gpu]: \"-1\" is \
             negative"
        );
        assert_eq!(
            pod_error(containers(json!({"requests": {"cpu": "lots"}}))),
            "pod ml/p: spec.containers[main].resources.requests[cpu]: \"lots\" is not a quantity"
        );
    }

    #[test]
    fn ephemeral_storage_is_summed_like_memory() {
        let spec = json!({"spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {"ephemeral-storage": "10Gi"}}},
                {"name": "log", "resources": {"requests": {"ephemeral-storage": "1Gi"},
                                              "limits": {"ephemeral-storage": "5Gi"}}}
            ],
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always",
                 "resources": {"requests": {"ephemeral-storage": "2Gi"}}},
                {"name": "fetch", "resources": {"requests": {"ephemeral-storage": "20Gi"}}}
            ],
            "overhead": {"ephemeral-storage": "512Mi"}
        }});
        // Containers with the sidecar: 10 + 1 + 2 GiB (a request stands, not its limit);
        // fetch runs beside the sidecar: 22 GiB, the larger; then the overhead.
        assert_eq!(facts(spec).request.ephemeral_bytes, (22 * 1024 + 512) << 20);
        let decimal = facts(containers(json!({"requests": {"ephemeral-storage": "1M"}})));
        assert_eq!(
            decimal.request.ephemeral_bytes, 1_000_000,
            "a million bytes, exactly"
        );
        assert_eq!(
            decimal.constraints, None,
            "ephemeral storage is no extended resource"
        );
        assert_eq!(
            pod_error(containers(
                json!({"requests": {"ephemeral-storage": "-1Gi"}})
            )),
            "pod ml/p: spec.containers[main].resources.requests[ephemeral-storage]: \"-1Gi\" is \
             negative"
        );
    }

    #[test]
    fn extended_resources_become_node_constraints() {
        let spec = json!({"spec": {
            "containers": [
                {"name": "main", "resources": {
                    "limits": {"nvidia.com/gpu": "8", "rdma/hca": "1", "hugepages-2Mi": "1Gi",
                               "example.com/zero": "0"},
                    "requests": {"rdma/hca": "1", "cpu": "4"}}},
                {"name": "side", "resources": {"requests": {"rdma/hca": "1"}}}
            ],
            "initContainers": [
                {"name": "setup", "resources": {"limits": {"example.com/foo": "3"}}},
                {"name": "proxy", "restartPolicy": "Always",
                 "resources": {"limits": {"example.com/foo": "1"}}}
            ],
            "overhead": {"rdma/hca": "1"}
        }});
        let read = facts(spec);
        assert_eq!(read.request.gpu, GpuRequest::Whole(8));
        assert_eq!(read.request.cpu_milli, 4000);
        let constraints = read
            .constraints
            .expect("extended resources are constraints");
        // rdma/hca: 1 + 1 and the overhead; example.com/foo: the init container's 3 (it
        // runs before the sidecar) over the sidecar's 1; nothing of a resource asked at 0.
        assert_eq!(
            constraints.extended,
            ExtendedResources::from([
                ("example.com/foo".to_owned(), 3),
                ("hugepages-2Mi".to_owned(), 1 << 30),
                ("rdma/hca".to_owned(), 3),
            ])
        );
        assert!(constraints.node_selector.is_empty() && constraints.tolerations.is_empty());
        // Half a unit asks for one.
        let half = facts(containers(json!({"requests": {"example.com/foo": "500m"}})));
        assert_eq!(
            half.constraints.unwrap().extended,
            ExtendedResources::from([("example.com/foo".to_owned(), 1)])
        );
    }

    #[test]
    fn malformed_extended_resources_are_named() {
        assert_eq!(
            pod_error(containers(json!({"requests": {"rdma/hca": "one"}}))),
            "pod ml/p: spec.containers[main].resources.requests[rdma/hca]: \"one\" is not a \
             quantity"
        );
        assert_eq!(
            pod_error(containers(json!({"limits": {"rdma/hca": "-1"}}))),
            "pod ml/p: spec.containers[main].resources.limits[rdma/hca]: \"-1\" is negative"
        );
        assert_eq!(
            pod_error(containers(
                json!({"requests": {"rdma/hca": "1"}, "limits": {"rdma/hca": "2"}})
            )),
            "pod ml/p: spec.containers[main].resources.requests[rdma/hca]: \"1\" differs from \
             the limit \"2\" (an extended resource's request and limit must be equal)"
        );
        assert_eq!(
            pod_error(json!({"spec": {"overhead": {"rdma/hca": "x"}}})),
            "pod ml/p: spec.overhead[rdma/hca]: \"x\" is not a quantity"
        );
        // CPU, memory and ephemeral storage may ask for less than their limit.
        let under = containers(json!({
            "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
            "limits": {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "2Gi"}
        }));
        assert_eq!(facts(under).request.ephemeral_bytes, 1 << 30);
    }

    fn fraction(text: &str) -> Result<GpuRequest, String> {
        pod_facts(&pod(
            json!({"metadata": {"annotations": {"kant.io/gpu-fraction": text}}}),
        ))
        .map(|f| f.request.gpu)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn fractions_of_one_gpu() {
        assert_eq!(fraction("0.5"), Ok(GpuRequest::Fraction(500)));
        // Exact: 0.1 and 0.2 make exactly 0.3.
        let (a, b, c) = (
            fraction("0.1").unwrap(),
            fraction("0.2").unwrap(),
            fraction("0.3").unwrap(),
        );
        assert_eq!(a.milli() + b.milli(), c.milli());
        let field = "pod ml/p: metadata.annotations[kant.io/gpu-fraction]";
        assert_eq!(
            fraction("1.0").unwrap_err(),
            format!(
                "{field}: \"1.0\" is not below 1: ask for whole GPUs with the nvidia.com/gpu \
                 resource"
            )
        );
        assert_eq!(
            fraction("0").unwrap_err(),
            format!("{field}: \"0\" is not above 0")
        );
        for bad in ["abc", "1.5", "0.0001", "-0.5", ""] {
            let e = fraction(bad).unwrap_err();
            assert!(e.starts_with(&format!("{field}: ")), "{bad}: {e}");
        }
        let with_whole = pod(json!({
            "metadata": {"annotations": {"kant.io/gpu-fraction": "0.25"}},
            "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        }));
        assert_eq!(
            pod_facts(&with_whole).unwrap_err().to_string(),
            format!(
                "{field}: a fraction of a GPU cannot be combined with 1 whole GPUs \
                 (nvidia.com/gpu)"
            )
        );
        // An explicit zero of whole GPUs is no whole GPU.
        let with_zero = pod(json!({
            "metadata": {"annotations": {"kant.io/gpu-fraction": "0.25"}},
            "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "0"}}}]}
        }));
        assert_eq!(
            pod_facts(&with_zero).unwrap().request.gpu,
            GpuRequest::Fraction(250)
        );
    }

    #[test]
    fn quantities_parse_exactly() {
        let milli = |t: &str| parse_quantity_milli(t);
        assert_eq!(milli("100m"), Ok(100));
        assert_eq!(milli("0.5"), Ok(500));
        assert_eq!(milli(".5"), Ok(500));
        assert_eq!(milli("5."), Ok(5000));
        assert_eq!(milli("+2"), Ok(2000));
        assert_eq!(milli("-2"), Ok(-2000));
        assert_eq!(milli("1Gi"), Ok(1_073_741_824_000));
        assert_eq!(milli("1.5Gi"), Ok(1_610_612_736_000));
        assert_eq!(milli("2e3"), Ok(2_000_000));
        assert_eq!(milli("2E3"), Ok(2_000_000));
        assert_eq!(milli("1.5e+2"), Ok(150_000));
        assert_eq!(milli("1e-3"), Ok(1));
        assert_eq!(milli("1E-3"), Ok(1));
        assert_eq!(milli("1e-4"), Ok(1), "rounded up");
        assert_eq!(milli("1n"), Ok(1), "rounded up");
        assert_eq!(milli("1500u"), Ok(2), "rounded up");
        assert_eq!(milli("1k"), Ok(1_000_000));
        assert_eq!(milli("1M"), Ok(1_000_000_000));
        assert_eq!(
            milli("1E"),
            Ok(1_000_000_000_000_000_000_000),
            "exa, not an exponent"
        );
        assert_eq!(milli("1Ki"), Ok(1_024_000));
        assert_eq!(milli("1Ei"), Ok(1_152_921_504_606_846_976_000));
        assert_eq!(milli("0"), Ok(0));
        assert_eq!(milli("000.000"), Ok(0));
        assert_eq!(milli("0e99999"), Ok(0));
        assert_eq!(parse_quantity_nano("1"), Ok(1_000_000_000));
        assert_eq!(parse_quantity_nano("1e-12"), Ok(1), "rounded up to a nano");
        assert_eq!(parse_quantity_nano("1e-99999"), Ok(1));
        assert_eq!(parse_quantity_nano("0.001Ki"), Ok(1_024_000_000));
        for bad in [
            "", "abc", "1.2.3", ".", "+", "-", "1 ", " 1", "1ki", "1KI", "1e", "1e+", "1e1.5",
            "1mi", "1 Gi", "0x10", "1,000", "1Gib",
        ] {
            assert!(parse_quantity_milli(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(milli("abc"), Err("\"abc\" is not a quantity".into()));
        assert_eq!(
            milli("1Xi"),
            Err("\"1Xi\" has an unknown suffix \"Xi\"".into())
        );
        for huge in ["1e30", "1e99999999", "999999999999999999999999999999Ei"] {
            assert!(
                milli(huge).unwrap_err().contains("too large"),
                "{huge}: {:?}",
                milli(huge)
            );
        }
        assert!(milli("1e9999999999").unwrap_err().contains("out of range"));
        assert!(
            milli(&"1".repeat(50))
                .unwrap_err()
                .contains("too many significant digits")
        );
        // Zeros carry no digits.
        assert_eq!(
            milli(&format!("0.{}1", "0".repeat(60))),
            Ok(1),
            "tiny but positive"
        );
        assert_eq!(milli(&format!("1{}", "0".repeat(20))), Ok(10i128.pow(23)));
    }

    #[test]
    fn affinity_terms_become_constraints_and_gpu_models() {
        let affinity = |terms: Value| {
            json!({"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }}}})
        };
        let two_terms = facts(affinity(json!([
            {"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100", "H200"]},
                {"key": "zone", "operator": "NotIn", "values": ["z9"]}
            ]},
            {"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100", "H100"]}
            ], "matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}
            ]}
        ])));
        assert_eq!(two_terms.gpu_models, ["H100", "H200", "A100"]);
        let c = two_terms.constraints.unwrap();
        assert_eq!(c.affinity.len(), 2);
        assert_eq!(
            c.affinity[0].match_expressions[1],
            Requirement {
                key: "zone".into(),
                op: SelectorOp::NotIn,
                values: vec!["z9".into()],
            }
        );
        assert_eq!(c.affinity[1].match_fields[0].key, "metadata.name");
        let labels: Labels = [(GPU_PRODUCT_LABEL.to_owned(), "A100".to_owned())].into();
        assert!(c.selects("n1", &labels));
        assert!(!c.selects("n3", &labels));

        // A term without an `In` on the product: any model.
        let open = facts(affinity(json!([
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
        ])));
        assert!(open.gpu_models.is_empty());
        assert_eq!(open.constraints.unwrap().affinity.len(), 2);

        // An empty term matches no node, as in Kubernetes.
        let empty = facts(affinity(json!([{}])));
        assert!(!empty.constraints.unwrap().selects("n1", &Labels::new()));

        // Requirements that allow no model, or not the node selector's, are refused.
        let in_models = |models: &[&str]| json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": models});
        let contradiction = affinity(json!([{"matchExpressions": [
            in_models(&["A100"]), in_models(&["H100"])
        ]}]));
        assert!(pod_error(contradiction).ends_with(
            "nodeSelectorTerms: allows no GPU model: within each term, the `In` \
                 requirements on nvidia.com/gpu.product share no value, so no node can match"
        ));
        let mut both = affinity(json!([{"matchExpressions": [
            in_models(&["A100"]), in_models(&["H100"])
        ]}]));
        merge(
            &mut both,
            json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}}),
        );
        assert!(pod_error(both).contains("allows no GPU model"));
        let mut other = affinity(json!([{"matchExpressions": [in_models(&["A100"])]}]));
        merge(
            &mut other,
            json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}}),
        );
        assert!(pod_error(other).ends_with(
            "nodeSelectorTerms: allows no node of spec.nodeSelector's \
                 nvidia.com/gpu.product \"H100\" (it allows A100)"
        ));
    }

    #[test]
    fn malformed_affinity_is_an_error_naming_the_field() {
        let term = |requirement: Value, kind: &str| {
            json!({"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {kind: [requirement]}
                ]}
            }}}})
        };
        let path = "pod ml/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
        assert_eq!(
            pod_error(term(
                json!({"key": "zone", "operator": "Like", "values": ["a"]}),
                "matchExpressions"
            )),
            format!(
                "{path}.matchExpressions[0].operator: unknown operator \"Like\" (known: In, \
                 NotIn, Exists, DoesNotExist, Gt, Lt)"
            )
        );
        assert_eq!(
            pod_error(term(
                json!({"key": "metadata.uid", "operator": "In", "values": ["a"]}),
                "matchFields"
            )),
            format!(
                "{path}.matchFields[0].key: unknown field \"metadata.uid\" (only metadata.name \
                 is known)"
            )
        );
        assert_eq!(
            pod_error(term(
                json!({"key": "gpus", "operator": "Gt", "values": ["many"]}),
                "matchExpressions"
            )),
            format!("{path}.matchExpressions[0].values: Gt takes one integer value")
        );
        assert_eq!(
            pod_error(term(
                json!({"key": "zone", "operator": "In"}),
                "matchExpressions"
            )),
            format!("{path}.matchExpressions[0].values: In needs at least one value")
        );
    }

    #[test]
    fn tolerations_default_and_errors() {
        let tolerate = |t: Value| json!({"spec": {"tolerations": [t]}});
        let everything = facts(tolerate(json!({"operator": "Exists"})));
        assert_eq!(
            everything.constraints.unwrap().tolerations,
            [Toleration {
                key: None,
                exists: true,
                value: String::new(),
                effect: None
            }]
        );
        let with_seconds = facts(tolerate(json!({
            "key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300
        })));
        assert_eq!(
            with_seconds.constraints.unwrap().tolerations[0].effect,
            Some(TaintEffect::NoExecute)
        );
        assert_eq!(
            pod_error(tolerate(json!({"key": "a", "operator": "Matches"}))),
            "pod ml/p: spec.tolerations[0].operator: unknown operator \"Matches\" (known: \
             Equal, Exists)"
        );
        assert!(
            pod_error(tolerate(json!({"key": "a", "effect": "NoWay"})))
                .starts_with("pod ml/p: spec.tolerations[0].effect: unknown effect \"NoWay\"")
        );
    }

    #[test]
    fn preferences_and_spread_constraints() {
        let term = json!({"labelSelector": {"matchLabels": {"app": "x"}},
                          "topologyKey": "kubernetes.io/hostname"});
        let facts = facts(json!({"spec": {
            "affinity": {
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
                ]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term.clone()]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 30, "podAffinityTerm": term}
                ]}
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "x"}}, "minDomains": 3,
                 "nodeTaintsPolicy": "Honor"}
            ]
        }}));
        assert!(facts.ignored.is_empty(), "{:?}", facts.ignored);
        assert_eq!(facts.pod_rules.preferred_spread.len(), 1);
        let [hard] = &facts.pod_rules.spread[..] else {
            panic!("one hard constraint: {:?}", facts.pod_rules.spread);
        };
        assert_eq!(
            (
                hard.max_skew,
                hard.min_domains,
                hard.honor_node_affinity,
                hard.honor_taints
            ),
            (2, Some(3), true, true)
        );
        assert_eq!(hard.pods.namespaces, Namespaces::Only(vec!["ml".into()]));
        let node = facts.constraints.expect("a preference");
        assert!(
            node.selects("n1", &Labels::new()),
            "a preference is no constraint"
        );
        assert_eq!(node.preferred[0].weight, 1);
        assert_eq!(
            node.preference("n1", &[("a".into(), "1".into())].into()),
            100
        );
        assert_eq!(node.preference("n1", &Labels::new()), 0);
        assert_eq!(facts.pod_rules.affinity.len(), 1, "required terms are kept");
        assert!(facts.pod_rules.anti_affinity.is_empty());
        assert_eq!(facts.pod_rules.preferred_anti_affinity[0].weight, 30);
    }

    #[test]
    fn an_empty_spread_selector_counts_no_pod_as_kube_schedulers() {
        let spread = |selector: Value, keys: &[&str]| {
            let facts = facts(json!({
                "metadata": {"labels": {"app": "web"}},
                "spec": {"topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": selector, "matchLabelKeys": keys}]}
            }));
            facts.pod_rules.preferred_spread[0].pods.selector.clone()
        };
        assert_eq!(spread(json!({"matchLabels": {}}), &["absent"]), None);
        assert_eq!(
            spread(json!({}), &["app", "absent"]),
            Some(vec![Requirement {
                key: "app".into(),
                op: SelectorOp::In,
                values: vec!["web".into()],
            }]),
            "matchLabelKeys the pod has make it select"
        );
    }

    #[test]
    fn pod_affinity_terms_select_pods_by_namespace_and_labels() {
        let facts = facts(json!({
            "metadata": {"labels": {"app": "web", "tier": "gold"}},
            "spec": {"affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"},
                                       "matchExpressions": [{"key": "v", "operator": "NotIn", "values": ["1"]}]},
                     "namespaces": ["data"], "topologyKey": "zone"}
                ]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {}, "matchLabelKeys": ["app"], "mismatchLabelKeys": ["tier"],
                     "topologyKey": "kubernetes.io/hostname"},
                    {"topologyKey": "zone", "namespaceSelector": {}},
                    {"labelSelector": {}, "topologyKey": "zone",
                     "namespaceSelector": {"matchLabels": {"team": "a"}}}
                ]}
            }}
        }));
        let pod = |namespace: &str, labels: &[(&str, &str)]| PodIdentity {
            namespace: namespace.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let rules = &facts.pod_rules;
        assert_eq!(
            rules.identity,
            pod("ml", &[("app", "web"), ("tier", "gold")])
        );
        let db = &rules.affinity[0];
        assert_eq!(db.topology_key, "zone");
        assert!(db.selects(&pod("data", &[("app", "db")])));
        assert!(!db.selects(&pod("data", &[("app", "db"), ("v", "1")])));
        assert!(
            !db.selects(&pod("ml", &[("app", "db")])),
            "another namespace"
        );
        let [own, none, every] = &rules.anti_affinity[..] else {
            panic!("three anti-affinity terms: {:?}", rules.anti_affinity);
        };
        assert!(own.selects(&pod("ml", &[("app", "web"), ("tier", "silver")])));
        assert!(!own.selects(&pod("ml", &[("app", "web"), ("tier", "gold")])));
        assert!(!own.selects(&pod("ml", &[("app", "api")])));
        assert!(
            !own.selects(&pod("other", &[("app", "web")])),
            "its own namespace only"
        );
        assert!(
            !none.selects(&pod("ml", &[])),
            "a null selector selects no pod"
        );
        assert!(every.selects(&pod("anywhere", &[])));
        assert_eq!(
            facts.ignored,
            ["a pod affinity term's namespaceSelector (the term is applied to every namespace)"]
        );
    }

    #[test]
    fn malformed_spread_constraints_are_named() {
        let spread = |extra: Value| {
            let mut constraint = json!({"maxSkew": 1, "topologyKey": "zone",
                                        "whenUnsatisfiable": "DoNotSchedule"});
            merge(&mut constraint, extra);
            json!({"spec": {"topologySpreadConstraints": [constraint]}})
        };
        for (extra, error) in [
            (json!({"maxSkew": 0}), "maxSkew: 0 is not above 0"),
            (json!({"minDomains": -1}), "minDomains: -1 is not above 0"),
            (
                json!({"whenUnsatisfiable": "Never"}),
                "whenUnsatisfiable: unknown value \"Never\" (known: DoNotSchedule, ScheduleAnyway)",
            ),
            (
                json!({"nodeAffinityPolicy": "Maybe"}),
                "nodeAffinityPolicy: unknown policy \"Maybe\" (known: Honor, Ignore)",
            ),
            (json!({"topologyKey": ""}), "topologyKey: empty"),
        ] {
            assert_eq!(
                pod_error(spread(extra)),
                format!("pod ml/p: spec.topologySpreadConstraints[0].{error}")
            );
        }
    }

    #[test]
    fn malformed_pod_affinity_terms_are_named() {
        let anti = |term: Value| {
            json!({"spec": {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]
            }}}})
        };
        assert_eq!(
            pod_error(anti(json!({"labelSelector": {}, "topologyKey": ""}))),
            "pod ml/p: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]\
             .topologyKey: empty"
        );
        let gt = json!({"labelSelector": {"matchExpressions": [
            {"key": "n", "operator": "Gt", "values": ["1"]}
        ]}, "topologyKey": "zone"});
        assert_eq!(
            pod_error(anti(gt)),
            "pod ml/p: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]\
             .labelSelector.matchExpressions[0].operator: unknown operator \"Gt\" (known: In, \
             NotIn, Exists, DoesNotExist)"
        );
        let heavy = json!({"spec": {"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101,
                "podAffinityTerm": {"labelSelector": {}, "topologyKey": "zone"}}]
        }}}});
        assert_eq!(
            pod_error(heavy),
            "pod ml/p: spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]\
             .weight: 101 is not in 1..=100"
        );
    }

    #[test]
    fn gates_workloads_and_topology() {
        assert!(facts(json!({"spec": {"schedulingGates": [{"name": "wait"}]}})).gated);
        assert!(!facts(json!({"spec": {"schedulingGates": []}})).gated);
        for (label, kind) in [
            ("train", JobKind::Train),
            ("inference", JobKind::Inference),
            ("dev", JobKind::Dev),
        ] {
            let f = facts(json!({"metadata": {"labels": {"kant.io/workload": label}}}));
            assert_eq!(f.kind, kind);
        }
        assert_eq!(
            pod_error(json!({"metadata": {"labels": {"kant.io/workload": "batch"}}})),
            "pod ml/p: metadata.labels[kant.io/workload]: unknown workload \"batch\" (known: \
             train, inference, dev)"
        );
        let preferred =
            facts(json!({"metadata": {"annotations": {"kant.io/topology": "preferred:spine"}}}));
        assert_eq!(preferred.topology.unwrap().to_string(), "preferred:spine");
        assert!(
            pod_error(json!({"metadata": {"annotations": {"kant.io/topology": "required:rack"}}}))
                .starts_with("pod ml/p: metadata.annotations[kant.io/topology]: unknown tier")
        );
    }

    // ------------------------------------------------------------------------------------
    // Nodes

    fn converter() -> NodeConverter {
        NodeConverter::new(&Config::embedded(), TopologyKeys::default()).unwrap()
    }

    /// A node `n1` of 8 H100 GPUs, changed by `extra`.
    fn node(extra: Value) -> Node {
        let mut value = json!({
            "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "H100"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "191500m", "memory": "2063731180Ki"}}
        });
        merge(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    fn node_error(extra: Value) -> String {
        converter().node(&node(extra)).unwrap_err().to_string()
    }

    /// Why a GPU annotation of the node does not parse: the node is kept, its GPUs closed.
    fn gpu_problem(node: &Node) -> String {
        let facts = converter()
            .node(node)
            .expect("a node whose GPU annotation does not parse is kept");
        assert_eq!(facts.row.unhealthy, node_device_mask(facts.row.gpus));
        facts.problem.expect("what does not parse")
    }

    #[test]
    fn a_gpu_node_with_its_position_and_taints() {
        let n = node(json!({
            "metadata": {
                "labels": {
                    "kant.io/superspine": "ss1", "kant.io/spine": "sp2",
                    "kant.io/leaf": "leaf7", "kant.io/hbd": "nvl72-3", "zone": "a"
                },
                "annotations": {"kant.io/unhealthy-gpus": "2, 5"}
            },
            "spec": {
                "unschedulable": true,
                "taints": [
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "maintenance", "effect": "PreferNoSchedule",
                     "timeAdded": "2024-01-01T00:00:00Z"}
                ]
            }
        }));
        let facts = converter().node(&n).unwrap();
        let row = &facts.row;
        assert_eq!(row.name, "n1");
        assert_eq!(row.gpu_model.as_deref(), Some("H100"));
        assert_eq!(row.gpus, 8);
        assert_eq!(row.cpu_milli, Some(191_500));
        assert_eq!(row.memory_bytes, Some(2_063_731_180 * 1024));
        assert_eq!(
            row.leaf,
            Some(LeafPath {
                superspine: "ss1".into(),
                spine: "sp2".into(),
                leaf: "leaf7".into(),
            })
        );
        assert_eq!(row.hbd.as_deref(), Some("nvl72-3"));
        assert_eq!(row.unhealthy, 0b10_0100);
        assert_eq!(row.labels.len(), 6);
        assert_eq!(row.labels["zone"], "a");
        let taint = |key: &str, value: &str, effect| Taint {
            key: key.into(),
            value: value.into(),
            effect,
        };
        assert_eq!(
            row.taints,
            [
                taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule),
                taint("maintenance", "", TaintEffect::PreferNoSchedule),
                taint(UNSCHEDULABLE_TAINT, "", TaintEffect::NoSchedule),
            ]
        );
        // Embedded configuration: H100 is an NVSwitch board.
        assert_eq!(
            *facts.links,
            LinkMatrix::from_profile(LinkProfile::NvlinkAll, 8).unwrap()
        );
        assert_eq!(
            facts.nics,
            (0..8).map(|k| format!("NIC{k}")).collect::<Vec<_>>()
        );
        // The model accepts the row.
        let mut builder = crate::model::ClusterSpecBuilder::new();
        builder.add_with_links(facts.row, facts.links).unwrap();
    }

    #[test]
    fn unschedulable_taint_is_not_doubled_and_missing_spine_is_empty() {
        let n = node(json!({
            "metadata": {"labels": {"kant.io/leaf": "l1"}},
            "spec": {"unschedulable": true, "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                 "timeAdded": "2024-01-01T00:00:00Z"}
            ]}
        }));
        let row = converter().node(&n).unwrap().row;
        assert_eq!(row.taints.len(), 1);
        assert_eq!(
            row.leaf,
            Some(LeafPath {
                superspine: String::new(),
                spine: String::new(),
                leaf: "l1".into(),
            })
        );
        assert_eq!(row.hbd, None);
        let no_leaf = converter()
            .node(&node(
                json!({"metadata": {"labels": {"kant.io/spine": "sp"}}}),
            ))
            .unwrap();
        assert_eq!(no_leaf.row.leaf, None);
        assert_eq!(
            node_error(json!({"spec": {"taints": [{"key": "k", "effect": "NoEntry"}]}})),
            "node n1: spec.taints[0].effect: unknown effect \"NoEntry\" (known: NoSchedule, \
             PreferNoSchedule, NoExecute)"
        );
    }

    #[test]
    fn topology_keys_are_configurable() {
        let keys = TopologyKeys {
            leaf: "net/tor".into(),
            ..TopologyKeys::default()
        };
        let mut converter = NodeConverter::new(&Config::embedded(), keys).unwrap();
        let n = node(json!({"metadata": {"labels": {"net/tor": "t1", "kant.io/leaf": "x"}}}));
        assert_eq!(converter.node(&n).unwrap().row.leaf.unwrap().leaf, "t1");
    }

    #[test]
    fn gpu_counts_models_and_cpu_only_nodes() {
        assert_eq!(
            node_error(json!({"metadata": {"labels": null}})),
            "node n1: metadata.labels[nvidia.com/gpu.product]: missing on a node with 8 GPUs \
             (status.allocatable[nvidia.com/gpu]): the GPU model is unknown"
        );
        // The label with no GPUs (the device plugin not started yet): a CPU-only node,
        // whatever its GPU annotations say.
        let cpu_only = converter()
            .node(&node(json!({
                "metadata": {"annotations": {"kant.io/unhealthy-gpus": "7",
                                             "kant.io/gpu-topology": "pcie"}},
                "status": {"allocatable": {"nvidia.com/gpu": "0"}}
            })))
            .unwrap();
        assert_eq!(cpu_only.row.gpu_model, None);
        assert_eq!(cpu_only.row.gpus, 0);
        assert_eq!(cpu_only.row.unhealthy, 0);
        assert_eq!(cpu_only.links.devices(), 0);
        assert!(cpu_only.nics.is_empty());
        let mut builder = crate::model::ClusterSpecBuilder::new();
        builder
            .add_with_links(cpu_only.row, cpu_only.links)
            .unwrap();

        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "cpu1"}})).unwrap();
        let row = converter().node(&bare).unwrap().row;
        assert_eq!(
            (row.gpus, row.cpu_milli, row.memory_bytes),
            (0, Some(0), Some(0))
        );

        assert_eq!(
            node_error(json!({"status": {"allocatable": {"nvidia.com/gpu": "2.5"}}})),
            "node n1: status.allocatable[nvidia.com/gpu]: \"2.5\" is not a whole number of GPUs"
        );
        assert_eq!(
            node_error(json!({"status": {"allocatable": {"nvidia.com/gpu": "64"}}})),
            "node n1: status.allocatable[nvidia.com/gpu]: 64 GPUs, more than the 32 a node may \
             have (MIG's `single` strategy or time-slicing replicas can list more)"
        );
        assert_eq!(
            node_error(json!({"status": {"allocatable": {"memory": "-1Gi"}}})),
            "node n1: status.allocatable[memory]: \"-1Gi\" is negative"
        );
        let nameless: Node = serde_json::from_value(json!({"metadata": {}})).unwrap();
        assert_eq!(
            converter().node(&nameless).unwrap_err().to_string(),
            "node: metadata.name: missing"
        );
    }

    #[test]
    fn pods_ephemeral_storage_and_extended_resources_of_a_node() {
        let n = node(json!({"status": {"allocatable": {
            "pods": "110", "ephemeral-storage": "1800Gi", "rdma/hca": "1k",
            "hugepages-2Mi": "2Gi", "example.com/foo": "1500m"
        }}}));
        let row = converter().node(&n).unwrap().row;
        assert_eq!(row.max_pods, Some(110));
        assert_eq!(row.ephemeral_bytes, Some(1800 << 30));
        assert_eq!(
            row.extended,
            ExtendedResources::from([
                ("example.com/foo".to_owned(), 1),
                ("hugepages-2Mi".to_owned(), 2 << 30),
                ("rdma/hca".to_owned(), 1000),
            ]),
            "rounded down; GPUs, cpu and memory are not among them"
        );
        // Absent is none, as kube-scheduler reads it.
        let bare = converter().node(&node(json!({}))).unwrap().row;
        assert_eq!((bare.max_pods, bare.ephemeral_bytes), (Some(0), Some(0)));
        assert!(bare.extended.is_empty());
        assert_eq!(
            node_error(json!({"status": {"allocatable": {"rdma/hca": "many"}}})),
            "node n1: status.allocatable[rdma/hca]: \"many\" is not a quantity"
        );
        assert_eq!(
            node_error(json!({"status": {"allocatable": {"pods": "-1"}}})),
            "node n1: status.allocatable[pods]: \"-1\" is negative"
        );
        // A changed allocatable is a change that matters (the cluster is rebuilt).
        let mut converter = converter();
        let before = converter.node(&n).unwrap();
        let fewer = node(json!({"status": {"allocatable": {
            "pods": "110", "ephemeral-storage": "1800Gi", "rdma/hca": "999",
            "hugepages-2Mi": "2Gi", "example.com/foo": "1500m"
        }}}));
        assert_ne!(converter.node(&fewer).unwrap(), before);
    }

    #[test]
    fn unhealthy_gpus_out_of_range_close_the_nodes_gpus() {
        assert_eq!(
            gpu_problem(&node(
                json!({"metadata": {"annotations": {"kant.io/unhealthy-gpus": "3,8"}}})
            )),
            "node n1: metadata.annotations[kant.io/unhealthy-gpus]: GPU 8 is out of range: the \
             node has 8 GPUs"
        );
        assert!(
            gpu_problem(&node(
                json!({"metadata": {"annotations": {"kant.io/unhealthy-gpus": "one"}}})
            ))
            .contains("not a comma-separated list")
        );
    }

    #[test]
    fn devices_are_numbered_by_capacity_and_the_unhealthy_counted() {
        // NVIDIA's device plugin: capacity counts every GPU, allocatable the healthy ones.
        let one_down = json!({"status": {"capacity": {"nvidia.com/gpu": "8"},
                                         "allocatable": {"nvidia.com/gpu": "7"}}});
        let facts = converter().node(&node(one_down.clone())).unwrap();
        assert_eq!(facts.row.gpus, 8);
        assert_eq!((facts.row.unhealthy, facts.unlisted_unhealthy), (0, 1));
        // The annotation says which one; an eight-GPU matrix still describes the node.
        let mut listed = one_down;
        merge(
            &mut listed,
            json!({"metadata": {"annotations": {"kant.io/unhealthy-gpus": "7",
                                                "kant.io/gpu-topology": DGX_H100}}}),
        );
        let facts = converter().node(&node(listed)).unwrap();
        assert_eq!(facts.row.gpus, 8);
        assert_eq!(
            (facts.row.unhealthy, facts.unlisted_unhealthy),
            (0b1000_0000, 0)
        );
        assert_eq!(facts.links.devices(), 8);

        assert_eq!(
            node_error(json!({"status": {"capacity": {"nvidia.com/gpu": "4"}}})),
            "node n1: status.allocatable[nvidia.com/gpu]: 8 GPUs, more than the 4 of \
             status.capacity[nvidia.com/gpu]"
        );
        assert_eq!(
            node_error(json!({"status": {"capacity": {"nvidia.com/gpu": "8.5"}}})),
            "node n1: status.capacity[nvidia.com/gpu]: \"8.5\" is not a whole number of GPUs"
        );
        assert_eq!(
            node_error(json!({"metadata": {"labels": null},
                              "status": {"capacity": {"nvidia.com/gpu": "8"}}})),
            "node n1: metadata.labels[nvidia.com/gpu.product]: missing on a node with 8 GPUs \
             (status.capacity[nvidia.com/gpu]): the GPU model is unknown"
        );
    }

    fn annotated(topology: &str) -> Node {
        node(json!({"metadata": {"annotations": {"kant.io/gpu-topology": topology}}}))
    }

    #[test]
    fn a_named_layout() {
        let facts = converter().node(&annotated("nvlink-pairs")).unwrap();
        assert_eq!(
            *facts.links,
            LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap()
        );
        // One NIC per device pair.
        assert_eq!(facts.nics, ["NIC0", "NIC1", "NIC2", "NIC3"]);
        assert_eq!(
            gpu_problem(&annotated("nvswitch")),
            "node n1: metadata.annotations[kant.io/gpu-topology]: \"nvswitch\" is neither a \
             layout name (nvlink-all, nvlink-pairs, pcie) nor the output of nvidia-smi topo -m"
        );
    }

    #[test]
    fn the_configuration_decides_by_model_when_the_node_says_nothing() {
        let a100 = node(json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100"}}}));
        let facts = converter().node(&a100).unwrap();
        assert_eq!(
            *facts.links,
            LinkMatrix::from_profile(LinkProfile::NvlinkPairs, 8).unwrap()
        );
        let l40 = node(json!({"metadata": {"labels": {"nvidia.com/gpu.product": "L40S"}}}));
        let facts = converter().node(&l40).unwrap();
        assert_eq!(
            *facts.links,
            LinkMatrix::from_profile(LinkProfile::NvlinkAll, 8).unwrap(),
            "links.default"
        );

        let mut config = Config::embedded();
        config.links.default = LinkProfile::Pcie;
        config
            .links
            .topologies
            .insert("H100".into(), DGX_H100.into());
        let mut converter = NodeConverter::new(&config, TopologyKeys::default()).unwrap();
        let h100 = converter.node(&node(json!({}))).unwrap();
        assert_eq!(h100.links.nic(7), 7, "the configured matrix");
        assert_eq!(
            *converter.node(&l40).unwrap().links,
            LinkMatrix::from_profile(LinkProfile::Pcie, 8).unwrap()
        );
        let four = node(json!({"status": {"allocatable": {"nvidia.com/gpu": "4"}}}));
        assert_eq!(
            converter.node(&four).unwrap_err().to_string(),
            "node n1: status.allocatable[nvidia.com/gpu]: 4 GPUs, but the configuration's \
             links.topologies.H100 describes 8"
        );

        config
            .links
            .topologies
            .insert("B200".into(), "GPU0 nonsense".into());
        let e = NodeConverter::new(&config, TopologyKeys::default()).unwrap_err();
        assert!(e.starts_with("links.topologies.B200: "), "{e}");
    }

    /// `nvidia-smi topo -m` of a DGX H100: 8 GPUs on NVSwitches, each with its own NIC on
    /// its PCIe switch, four GPUs per socket.
    const DGX_H100: &str = "\
\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tNIC4\tNIC5\tNIC6\tNIC7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n\
GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tPXB\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n\
GPU1\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n\
GPU2\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tPXB\tNODE\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n\
GPU3\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tNODE\tPXB\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n\
GPU4\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tPXB\tNODE\tNODE\tNODE\t56-111,168-223\t1\t\tN/A\n\
GPU5\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tNODE\tPXB\tNODE\tNODE\t56-111,168-223\t1\t\tN/A\n\
GPU6\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPXB\tNODE\t56-111,168-223\t1\t\tN/A\n\
GPU7\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tPXB\t56-111,168-223\t1\t\tN/A\n\
NIC0\tPXB\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\n\
NIC1\tNODE\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\t X \tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\n\
NIC2\tNODE\tNODE\tPXB\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\t X \tNODE\tSYS\tSYS\tSYS\tSYS\n\
NIC3\tNODE\tNODE\tNODE\tPXB\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\t X \tSYS\tSYS\tSYS\tSYS\n\
NIC4\tSYS\tSYS\tSYS\tSYS\tPXB\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tNODE\tNODE\n\
NIC5\tSYS\tSYS\tSYS\tSYS\tNODE\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\t X \tNODE\tNODE\n\
NIC6\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPXB\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\t X \tNODE\n\
NIC7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tPXB\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\t X \n\
\n\
Legend:\n\
\n\
  X    = Self\n\
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n\
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n\
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n\
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n\
  PIX  = Connection traversing at most a single PCIe bridge\n\
  NV#  = Connection traversing a bonded set of # NVLinks\n\
\n\
NIC Legend:\n\
\n\
  NIC0: mlx5_0\n\
  NIC1: mlx5_1\n\
  NIC2: mlx5_2\n\
  NIC3: mlx5_3\n\
  NIC4: mlx5_4\n\
  NIC5: mlx5_5\n\
  NIC6: mlx5_6\n\
  NIC7: mlx5_7\n";

    const MLX5_NICS: &str = "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7";

    fn dgx(name: &str) -> Node {
        node(json!({"metadata": {"name": name, "annotations": {
            "kant.io/gpu-topology": DGX_H100,
            "kant.io/rdma-nics": MLX5_NICS
        }}}))
    }

    #[test]
    fn a_node_described_by_nvidia_smi_topo() {
        let facts = converter().node(&dgx("dgx-1")).unwrap();
        let links = &facts.links;
        assert_eq!(links.devices(), 8);
        assert_eq!(links.class(0, 7), crate::model::LinkClass::NvLink);
        assert_eq!((links.nic(0), links.nic(5)), (0, 5));
        assert_eq!(facts.nics[5], "mlx5_5");
        let expected = crate::model::parse_topo_matrix("x", DGX_H100).unwrap();
        assert_eq!(**links, expected);
    }

    #[test]
    fn a_topology_of_another_gpu_count_closes_the_nodes_gpus() {
        let four = node(json!({
            "metadata": {"annotations": {"kant.io/gpu-topology": DGX_H100}},
            "status": {"allocatable": {"nvidia.com/gpu": "4"}}
        }));
        assert_eq!(
            gpu_problem(&four),
            "node n1: metadata.annotations[kant.io/gpu-topology]: the topology matrix has 8 \
             GPUs, the node has 4 (status.allocatable[nvidia.com/gpu])"
        );
        let broken = DGX_H100.replace(
            "GPU3\tNV18\tNV18\tNV18\t X ",
            "GPU3\tNV18\tNV18\tNV18\tNV18",
        );
        assert_eq!(
            gpu_problem(&annotated(&broken)),
            "node n1: metadata.annotations[kant.io/gpu-topology]: diagonal cell of GPU3 is \
             \"NV18\", expected \"X\""
        );
    }

    #[test]
    fn a_layout_name_refers_to_one_nic_per_device_pair() {
        let six = node(json!({
            "metadata": {"annotations": {
                "kant.io/gpu-topology": "pcie",
                "kant.io/rdma-nics": "mlx5_0,mlx5_1,mlx5_2"
            }},
            "status": {"allocatable": {"nvidia.com/gpu": "6"}}
        }));
        assert!(converter().node(&six).is_ok());
    }

    /// An HGX board with 8 GPUs and 4 NICs: the layout assumed one NIC per GPU; each
    /// named NIC serves two neighbouring GPUs.
    #[test]
    fn a_layout_with_fewer_nics_named_shares_them_between_neighbours() {
        let four = node(json!({
            "metadata": {"annotations": {"kant.io/rdma-nics": "mlx5_0,mlx5_1,mlx5_2,mlx5_3"}},
        }));
        let facts = converter()
            .node(&four)
            .expect("a node with 4 NICs for 8 GPUs");
        let nic_of = |devices: u32| {
            binding_annotations(&DeviceAlloc::whole(devices), &facts.links, &facts.nics)
                [RDMA_NIC_ANNOTATION]
                .clone()
        };
        assert_eq!(nic_of(0b1), "mlx5_0");
        assert_eq!(nic_of(0b10), "mlx5_0");
        assert_eq!(nic_of(0b1100_0000), "mlx5_3");
        assert_eq!(nic_of(0b1111), "mlx5_0,mlx5_1");
    }

    /// A measured matrix without NIC columns only assumes a NIC per GPU: the NICs named
    /// are shared out, as for a layout.
    #[test]
    fn a_matrix_without_nic_columns_shares_the_nics_named() {
        let matrix = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n\
                      GPU0\t X \tNV4\t0-7\t0\n\
                      GPU1\tNV4\t X \t0-7\t0\n";
        let one = node(json!({"metadata": {"annotations": {
            "kant.io/gpu-topology": matrix,
            "kant.io/rdma-nics": "mlx5_0"
        }}, "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}));
        let facts = converter()
            .node(&one)
            .expect("a node with 1 NIC for 2 GPUs");
        assert_eq!(facts.nics, ["mlx5_0", "mlx5_0"]);
    }

    /// A measured matrix numbers the NICs itself: naming fewer is a mistake.
    #[test]
    fn nic_names_must_cover_the_matrix() {
        let short = node(json!({"metadata": {"annotations": {
            "kant.io/gpu-topology": DGX_H100,
            "kant.io/rdma-nics": "mlx5_0,mlx5_1"
        }}}));
        assert_eq!(
            gpu_problem(&short),
            "node n1: metadata.annotations[kant.io/rdma-nics]: \"mlx5_0,mlx5_1\" names 2 NICs, \
             the node's GPU topology refers to 8 (NIC0 to NIC7)"
        );
        let empty_name = node(json!({"metadata": {"annotations": {"kant.io/rdma-nics": "a,,b"}}}));
        assert!(gpu_problem(&empty_name).contains("empty NIC name"));
        let twice = node(json!({"metadata": {"annotations": {"kant.io/rdma-nics": "a, b,a"}}}));
        assert!(gpu_problem(&twice).contains("\"a, b,a\" names a twice"));
    }

    #[test]
    fn identical_nodes_share_one_matrix() {
        let mut converter = converter();
        let first = converter.node(&dgx("dgx-0")).unwrap();
        let named = converter.node(&annotated("pcie")).unwrap();
        let plain = converter.node(&node(json!({}))).unwrap();
        for i in 1..5000 {
            let name = format!("dgx-{i}");
            let facts = converter.node(&dgx(&name)).unwrap();
            assert!(Arc::ptr_eq(&facts.links, &first.links), "{name}");
        }
        for _ in 0..100 {
            let again = converter.node(&annotated("pcie")).unwrap();
            assert!(Arc::ptr_eq(&again.links, &named.links));
            let again = converter.node(&node(json!({}))).unwrap();
            assert!(Arc::ptr_eq(&again.links, &plain.links));
        }
        assert_eq!(converter.texts.len(), 1);
    }

    #[test]
    fn heartbeats_leave_the_facts_equal() {
        let mut converter = converter();
        let before = converter.node(&dgx("dgx-0")).unwrap();
        let beat = node(json!({
            "metadata": {"name": "dgx-0", "resourceVersion": "99", "annotations": {
                "kant.io/gpu-topology": DGX_H100, "kant.io/rdma-nics": MLX5_NICS,
                "node.alpha.kubernetes.io/ttl": "0"
            }},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": "2024-01-01T00:00:00Z"}]}
        }));
        assert_eq!(converter.node(&beat).unwrap(), before);
        let cordoned = node(json!({
            "metadata": {"name": "dgx-0", "annotations": {
                "kant.io/gpu-topology": DGX_H100, "kant.io/rdma-nics": MLX5_NICS
            }},
            "spec": {"unschedulable": true}
        }));
        assert_ne!(converter.node(&cordoned).unwrap(), before);
    }

    // ------------------------------------------------------------------------------------
    // Bound pods

    fn bound(annotations: Value) -> Pod {
        pod(json!({"metadata": {"annotations": annotations}, "spec": {"nodeName": "n1"}}))
    }

    #[test]
    fn binding_annotations_round_trip() {
        let facts = converter().node(&dgx("dgx-0")).unwrap();
        let alloc = DeviceAlloc::whole(0b1010_0110);
        let annotations = binding_annotations(&alloc, &facts.links, &facts.nics);
        assert_eq!(annotations[GPU_IDS_ANNOTATION], "1,2,5,7");
        assert_eq!(
            annotations[RDMA_NIC_ANNOTATION],
            "mlx5_1,mlx5_2,mlx5_5,mlx5_7"
        );
        let pod = bound(serde_json::to_value(&annotations).unwrap());
        let request = PodRequest::gpus(GpuRequest::Whole(4));
        assert_eq!(bound_devices(&pod, &request, 8), Ok(Some(alloc)));

        // Pairs share a NIC: named once.
        let pairs = converter().node(&annotated("nvlink-pairs")).unwrap();
        let annotations =
            binding_annotations(&DeviceAlloc::whole(0b1111), &pairs.links, &pairs.nics);
        assert_eq!(annotations[RDMA_NIC_ANNOTATION], "NIC0,NIC1");

        // A fraction: the share is the pod's own annotation.
        let share = DeviceAlloc {
            devices: 0b1000,
            milli_each: 250,
        };
        let mut annotations = binding_annotations(&share, &facts.links, &facts.nics);
        assert_eq!(annotations[GPU_IDS_ANNOTATION], "3");
        annotations.insert(GPU_FRACTION_ANNOTATION.into(), "0.25".into());
        let pod = bound(serde_json::to_value(&annotations).unwrap());
        let request = pod_facts(&pod).unwrap().request;
        assert_eq!(bound_devices(&pod, &request, 8), Ok(Some(share)));

        // No GPUs: no annotations.
        assert!(binding_annotations(&DeviceAlloc::default(), &facts.links, &facts.nics).is_empty());
    }

    #[test]
    fn a_bound_pod_holds_what_its_resources_ask_whatever_else_is_wrong() {
        let mut value = containers(json!({"limits": {"nvidia.com/gpu": "4", "cpu": "2",
                                                     "rdma/hca": "1"}}));
        merge(
            &mut value,
            json!({"metadata": {"labels": {"kant.io/workload": "batch"}},
                   "spec": {"nodeName": "n1"}}),
        );
        let mislabelled = pod(value);
        assert!(pod_facts(&mislabelled).is_err());
        assert_eq!(
            bound_request(&mislabelled, true),
            Ok((
                PodRequest {
                    gpu: GpuRequest::Whole(4),
                    cpu_milli: 2_000,
                    memory_bytes: 0,
                    ephemeral_bytes: 0,
                },
                ExtendedResources::from([("rdma/hca".to_owned(), 1)])
            ))
        );
        // A share that does not parse: the device it was given, all of it.
        let share = bound(json!({"kant.io/gpu-fraction": "half"}));
        assert!(pod_facts(&share).is_err());
        assert_eq!(
            bound_request(&share, true).map(|(r, _)| r.gpu),
            Ok(GpuRequest::Whole(1))
        );
        // Another scheduler's pod holds no share of a GPU, whatever it carries.
        assert_eq!(
            bound_request(&share, false).map(|(r, _)| r.gpu),
            Ok(GpuRequest::Whole(0))
        );
    }

    #[test]
    fn pods_placed_by_others_carry_no_devices() {
        let pod = bound(json!({}));
        let request = PodRequest::gpus(GpuRequest::Whole(2));
        assert_eq!(bound_devices(&pod, &request, 8), Ok(None));
    }

    #[test]
    fn malformed_gpu_ids() {
        let request = PodRequest::gpus(GpuRequest::Whole(2));
        let error = |ids: &str| {
            bound_devices(&bound(json!({"kant.io/gpu-ids": ids})), &request, 8)
                .unwrap_err()
                .to_string()
        };
        let field = "pod ml/p: metadata.annotations[kant.io/gpu-ids]";
        assert_eq!(
            error("0,x"),
            format!("{field}: \"0,x\" is not a comma-separated list of GPU indexes (\"x\")")
        );
        assert!(error("0,,1").contains("not a comma-separated list"));
        assert!(error("-1,0").contains("not a comma-separated list"));
        assert_eq!(
            error("1,8"),
            format!("{field}: GPU 8 is out of range: the node has 8 GPUs")
        );
        assert!(error("99999999999999999999,1").contains("out of range"));
        assert_eq!(error("3,3"), format!("{field}: \"3,3\" names GPU 3 twice"));
        assert_eq!(
            error("0,1,2"),
            format!("{field}: \"0,1,2\" names 3 GPUs, the pod asks for 2")
        );
        // Order does not matter; spaces are tolerated.
        let ok = bound_devices(&bound(json!({"kant.io/gpu-ids": " 5, 4"})), &request, 8);
        assert_eq!(ok, Ok(Some(DeviceAlloc::whole(0b11_0000))));
        let fraction = PodRequest::gpus(GpuRequest::Fraction(500));
        assert!(
            bound_devices(&bound(json!({"kant.io/gpu-ids": "0,1"})), &fraction, 8)
                .unwrap_err()
                .to_string()
                .ends_with("names 2 GPUs, the pod asks for 0.5")
        );
    }

    /// `nvidia-smi topo -m` names its NICs itself, in its NIC legend: a node annotated with
    /// the whole output pairs its pods with those names, no `kant.io/rdma-nics` needed.
    #[test]
    fn the_matrix_legends_nic_names_are_used() {
        let facts = converter()
            .node(&node(json!({"metadata": {"annotations": {
                "kant.io/gpu-topology": DGX_H100
            }}})))
            .unwrap();
        assert!(DGX_H100.contains("NIC5: mlx5_5"));
        let nic = binding_annotations(&DeviceAlloc::whole(1 << 5), &facts.links, &facts.nics)
            [RDMA_NIC_ANNOTATION]
            .clone();
        assert_eq!(nic, "mlx5_5");
    }

    /// A layout assuming a NIC per GPU pair, on a node naming one per GPU: each GPU gets
    /// its own, in order (GPU 7 the eighth, on its own socket's side).
    #[test]
    fn more_nics_named_than_a_layout_assumes_go_one_per_gpu() {
        let facts = converter()
            .node(&node(json!({"metadata": {"annotations": {
                "kant.io/gpu-topology": "pcie",
                "kant.io/rdma-nics": MLX5_NICS
            }}})))
            .unwrap();
        let nic_of = |d: u32| {
            binding_annotations(&DeviceAlloc::whole(1 << d), &facts.links, &facts.nics)
                [RDMA_NIC_ANNOTATION]
                .clone()
        };
        let all: Vec<String> = (0..8).map(nic_of).collect();
        let expected: Vec<String> = (0..8).map(|k| format!("mlx5_{k}")).collect();
        assert_eq!(all, expected);
    }
}
