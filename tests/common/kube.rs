//! Shared by the tests of the Kubernetes world: JSON object builders and a scheduler
//! running against the in-process API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kant::config::{Config, PluginConfig};
use kant::kube::crd::{PodGroup, Queue};
use kant::kube::world::{ClaimBinding, Input, Output, World, WorldOptions, WriteError};
use kant::kube::{RunOptions, Serving, run_with_config};
use kant::metrics::live::LiveMetrics;
use kant::model::JobId;
use kant_testkit::ApiServer;

use super::rbac::Grants;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A time on the world's clock (Unix milliseconds).
pub const T0: u64 = 1_700_000_000_000;

/// Merges `from` into `into`, as a JSON merge patch does (objects key by key, a null
/// removing its key).
pub fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(&k);
                } else {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Options for one replica that elects no leader, serves on free local ports and writes
/// statuses as fast as the server takes them.
pub fn single_replica(config: Config) -> RunOptions {
    let mut options = RunOptions::new(config);
    options.leader_election = false;
    options.metrics_addr = "127.0.0.1:0".parse().unwrap();
    options.health_addr = "127.0.0.1:0".parse().unwrap();
    options.status_qps = 1_000;
    options
}

/// A scheduler running against `server` until dropped.
pub struct Kant {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), kant::kube::RunError>>,
    pub serving: Serving,
    /// The server, and the first of its requests the scheduler made.
    server: ApiServer,
    first_request: u64,
}

impl Kant {
    pub async fn start(server: &ApiServer, config: Config) -> Kant {
        Self::start_with(server, single_replica(config)).await
    }

    pub async fn start_with(server: &ApiServer, options: RunOptions) -> Kant {
        Self::start_on(server, options, server.config()).await
    }

    /// As [`Kant::start_with`], its client configured by `config`.
    pub async fn start_on(server: &ApiServer, options: RunOptions, config: kube::Config) -> Kant {
        let (stop, stopped) = oneshot::channel::<()>();
        let (tx, rx) = oneshot::channel();
        let first_request = server.requests().last().map_or(0, |r| r.seq + 1);
        let task = tokio::spawn(async move {
            run_with_config(
                config,
                options,
                async {
                    let _ = stopped.await;
                },
                Some(tx),
            )
            .await
        });
        let serving = rx.await.expect("the scheduler starts serving");
        Kant {
            stop: Some(stop),
            task,
            serving,
            server: server.clone(),
            first_request,
        }
    }

    /// How the scheduler ended by itself (within 30 s), as `kant run` would exit.
    pub async fn ended(mut self) -> Result<(), kant::kube::RunError> {
        let result = tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the scheduler ends");
        result.expect("no panic")
    }

    pub fn has_ended(&self) -> bool {
        self.task.is_finished()
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(20), &mut self.task)
            .await
            .expect("the scheduler stops");
        result.expect("no panic").expect("a clean stop");
        let requests = self.server.requests();
        let made: Vec<_> = (requests.into_iter())
            .filter(|r| r.seq >= self.first_request)
            .collect();
        let refused = Grants::of_manifests().refused(&made);
        assert!(
            refused.is_empty(),
            "manifests/rbac.yaml would refuse the scheduler: {refused:?}"
        );
    }
}

/// Polls until `done` holds, failing with `what` after 60 s.
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ----------------------------------------------------------------------------------------
// Objects as the API server shows them

pub fn node_with(name: &str, gpus: u32, extra: Value) -> Node {
    let mut value = json!({
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100",
                                             "kubernetes.io/hostname": name}},
        "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "cpu": "64", "memory": "512Gi", "pods": "110"}}
    });
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

pub fn node(name: &str, gpus: u32) -> Node {
    node_with(name, gpus, json!({}))
}

pub fn pod(name: &str, gpus: u32, extra: Value) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"schedulerName": "kant-scheduler", "containers": [{"name": "c",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
        "status": {"phase": "Pending"}
    });
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

pub fn with_priority(name: &str, gpus: u32, priority: i32) -> Pod {
    pod(name, gpus, json!({"spec": {"priority": priority}}))
}

pub fn member(name: &str, gpus: u32, group: &str, extra: Value) -> Pod {
    let mut p = pod(name, gpus, extra);
    p.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("scheduling.x-k8s.io/pod-group".into(), group.into());
    p
}

/// The pod as the API server shows it once bound: a new resourceVersion, the node, and
/// the binding's annotations.
pub fn landed(mut pod: Pod, node: &str, annotations: &BTreeMap<String, String>, rv: u32) -> Pod {
    pod.metadata.resource_version = Some(rv.to_string());
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(annotations.clone());
    pod.spec.as_mut().unwrap().node_name = Some(node.into());
    pod
}

pub fn running(mut pod: Pod, rv: u32) -> Pod {
    pod.metadata.resource_version = Some(rv.to_string());
    pod.status.as_mut().unwrap().phase = Some("Running".into());
    pod
}

pub fn pod_group(name: &str, min_member: i32) -> PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"minMember": min_member}
    }))
    .unwrap()
}

pub fn queue(name: &str, gpus: i64) -> Queue {
    serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"mode": "shared", "quota": {"H100": gpus}}
    }))
    .unwrap()
}

// ----------------------------------------------------------------------------------------
// A World driven directly (no API server)

pub fn plain() -> Config {
    let mut config = Config::embedded();
    config.queueing.requeue_backoff = 1_000;
    config.queueing.requeue_backoff_max = 8_000;
    config
}

/// The embedded configuration with preemption in the default profile, no minimum runtime.
pub fn preempting() -> Config {
    let mut config = plain();
    config.queueing.min_runtime = 0;
    let profile = config
        .profiles
        .iter_mut()
        .find(|p| p.name == "default")
        .unwrap();
    profile
        .plugins
        .push(PluginConfig::Name("preemption".into()));
    config
}

pub fn world(config: &Config) -> World {
    world_with(config, WorldOptions::default())
}

/// A world taking part in the cluster as `options` say (a shard, say).
pub fn world_with(config: &Config, options: WorldOptions) -> World {
    world_reporting(config, options, Arc::new(LiveMetrics::new()))
}

/// A world that feeds `metrics`.
pub fn world_reporting(config: &Config, options: WorldOptions, metrics: Arc<LiveMetrics>) -> World {
    let mut profile = config.profile("default").unwrap().clone();
    profile.queueing = kant::queue::QueueingPolicy::BestEffortFifo;
    let profile = kant::plugins::build_profile(&profile, config).unwrap();
    World::new(options, config, profile, metrics).unwrap()
}

/// The value of one series (`name{labels}`) in the metrics' text, as of their last refresh.
pub fn metric(metrics: &LiveMetrics, series: &str) -> Option<f64> {
    let text = metrics.encode().unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A world whose watches listed these nodes and pods, no groups or queues.
pub fn synced_with(config: &Config, nodes: &[Node], pods: &[Pod]) -> World {
    sync(world(config), nodes, pods)
}

/// `w` once its watches listed these nodes and pods, no groups or queues.
pub fn sync(mut w: World, nodes: &[Node], pods: &[Pod]) -> World {
    w.apply(Input::Node(Box::new(Event::Init)), T0);
    for n in nodes {
        w.apply(Input::Node(Box::new(Event::InitApply(n.clone()))), T0);
    }
    w.apply(Input::Node(Box::new(Event::InitDone)), T0);
    w.apply(Input::Pod(Box::new(Event::Init)), T0);
    for p in pods {
        w.apply(Input::Pod(Box::new(Event::InitApply(p.clone()))), T0);
    }
    w.apply(Input::Pod(Box::new(Event::InitDone)), T0);
    for input in empty_listings() {
        w.apply(input, T0);
    }
    assert!(w.synced());
    w
}

/// The listings of every kind but pods and nodes, empty: PodGroups, Queues and the volume
/// kinds.
pub fn empty_listings() -> Vec<Input> {
    vec![
        Input::PodGroup(Box::new(Event::Init)),
        Input::PodGroup(Box::new(Event::InitDone)),
        Input::Queue(Box::new(Event::Init)),
        Input::Queue(Box::new(Event::InitDone)),
        Input::Claim(Box::new(Event::Init)),
        Input::Claim(Box::new(Event::InitDone)),
        Input::Volume(Box::new(Event::Init)),
        Input::Volume(Box::new(Event::InitDone)),
        Input::StorageClass(Box::new(Event::Init)),
        Input::StorageClass(Box::new(Event::InitDone)),
    ]
}

pub fn synced(config: &Config, nodes: &[Node]) -> World {
    synced_with(config, nodes, &[])
}

pub fn apply_pod(w: &mut World, pod: &Pod, now: u64) {
    w.apply(Input::Pod(Box::new(Event::Apply(pod.clone()))), now);
}

pub fn delete_pod(w: &mut World, pod: &Pod, now: u64) {
    w.apply(Input::Pod(Box::new(Event::Delete(pod.clone()))), now);
}

pub fn apply_node(w: &mut World, node: &Node, now: u64) {
    w.apply(Input::Node(Box::new(Event::Apply(node.clone()))), now);
}

pub fn delete_node(w: &mut World, node: &Node, now: u64) {
    w.apply(Input::Node(Box::new(Event::Delete(node.clone()))), now);
}

#[derive(Debug, Clone)]
pub struct Bind {
    pub job: JobId,
    pub pod: u32,
    pub round: u64,
    pub name: String,
    pub node: String,
    pub annotations: BTreeMap<String, String>,
    /// The claims annotated with the node before the binding, to be provisioned there.
    pub claims: Vec<String>,
    /// The claims bound to existing volumes before the binding: claim and volume.
    pub volumes: Vec<(String, String)>,
}

pub fn binds(outputs: &[Output]) -> Vec<Bind> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Bind {
                job,
                pod,
                round,
                target,
                node,
                annotations,
                claims,
            } => Some(Bind {
                job: *job,
                pod: *pod,
                round: *round,
                name: target.name.clone(),
                node: node.clone(),
                annotations: annotations.clone(),
                claims: (claims.iter())
                    .filter_map(|c| match c {
                        ClaimBinding::Provision { claim } => Some(claim.clone()),
                        ClaimBinding::Volume { .. } => None,
                    })
                    .collect(),
                volumes: (claims.iter())
                    .filter_map(|c| match c {
                        ClaimBinding::Volume { claim, volume } => {
                            Some((claim.clone(), volume.clone()))
                        }
                        ClaimBinding::Provision { .. } => None,
                    })
                    .collect(),
            }),
            _ => None,
        })
        .collect()
}

pub fn evictions(outputs: &[Output]) -> Vec<(JobId, u32, String)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Evict { job, pod, target } => Some((*job, *pod, target.name.clone())),
            _ => None,
        })
        .collect()
}

pub fn answer(w: &mut World, bind: &Bind, outcome: Result<(), WriteError>, now: u64) {
    w.apply(
        Input::Bound {
            job: bind.job,
            pod: bind.pod,
            round: bind.round,
            outcome,
            latency: Duration::from_millis(1),
        },
        now,
    );
}

pub fn refused(code: Option<u16>, message: &str) -> Result<(), WriteError> {
    Err(WriteError {
        code,
        message: message.into(),
    })
}

/// Binds `pod` as the API server would: the binding is accepted and the watch shows it
/// bound (resourceVersion `rv`). Returns the pod as bound.
pub fn bind_ok(w: &mut World, pod: &Pod, bind: &Bind, rv: u32, now: u64) -> Pod {
    answer(w, bind, Ok(()), now);
    let bound = landed(pod.clone(), &bind.node, &bind.annotations, rv);
    apply_pod(w, &bound, now);
    bound
}

/// Submits a pod and binds it where the scheduler puts it; returns the pod as bound.
pub fn place(w: &mut World, pod: &Pod, now: u64) -> Pod {
    apply_pod(w, pod, now);
    w.round(now);
    let out = w.take_outputs();
    let b = binds(&out);
    assert_eq!(b.len(), 1, "{out:?}");
    let bound = bind_ok(w, pod, &b[0], 2, now);
    w.round(now);
    w.take_outputs();
    bound
}

/// Runs rounds at each wake-up the world asks for (and once a second besides) until
/// `until`, collecting the outputs.
pub fn run_until(w: &mut World, from: u64, until: u64) -> Vec<Output> {
    let mut out = Vec::new();
    let mut now = from;
    while now <= until {
        w.round(now);
        out.extend(w.take_outputs());
        let next = w.next_wakeup(now).unwrap_or(u64::MAX).min(now + 1_000);
        now = next.max(now + 1);
    }
    out
}

pub fn free_gpus(w: &World) -> u32 {
    w.scheduler().state().total().free_gpus
}
