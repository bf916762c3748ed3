//! The Kubernetes world driven directly with Kubernetes objects, no API server: what goes
//! in, what comes out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kant::kube::world::{EventKind, Input, Output, World, WorldOptions};
use kant::kube::{ShardClaim, ShardSeen};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

mod common;
use common::kube::*;

/// The bindings among the outputs: (pod, node, device ids).
fn bindings(outputs: &[Output]) -> Vec<(String, String, String)> {
    binds(outputs)
        .into_iter()
        .map(|b| {
            let ids = b.annotations.get("kant.io/gpu-ids").cloned();
            (b.name, b.node, ids.unwrap_or_default())
        })
        .collect()
}

/// Answers every binding among the outputs the same way.
fn answer_binds(world: &mut kant::kube::world::World, outputs: &[Output], ok: bool) {
    for bind in binds(outputs) {
        let outcome = if ok {
            Ok(())
        } else {
            refused(Some(409), "conflict")
        };
        answer(world, &bind, outcome, T0);
    }
}

fn messages(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::PodCondition {
                target, condition, ..
            } => Some(format!("{}: {}", target.name, condition.message)),
            _ => None,
        })
        .collect()
}

/// The field at `path` of every Queue status written (of the Queue `queue` only, when
/// named), in order.
fn queue_status_fields(outputs: &[Output], queue: Option<&str>, path: &[&str]) -> Vec<Value> {
    (outputs.iter())
        .filter_map(|o| match o {
            Output::QueueStatus { name, status } if queue.is_none_or(|q| q == name) => {
                let mut value = serde_json::to_value(status).unwrap();
                for key in path {
                    value = value[*key].take();
                }
                Some(value)
            }
            _ => None,
        })
        .collect()
}

/// Every Queue status written (of `queue` only, when named) counts no running job at
/// `path`, and one was written.
fn assert_no_running_job(outputs: &[Output], queue: Option<&str>, path: &[&str]) {
    let running = queue_status_fields(outputs, queue, path);
    assert!(!running.is_empty(), "{outputs:?}");
    assert!(running.iter().all(|r| *r == json!(0)), "{running:?}");
}

/// A node without GPUs (its GPU model label dropped) named `name`, with `extra` merged in.
fn cpu_node(name: &str, extra: Value) -> k8s_openapi::api::core::v1::Node {
    let mut no_model = json!({"metadata": {"labels": {"nvidia.com/gpu.product": null}}});
    merge(&mut no_model, extra);
    node_with(name, 0, no_model)
}

#[test]
fn nothing_is_placed_before_every_watch_listed() {
    let mut world = world(&plain());
    world.apply(Input::Node(Box::new(Event::Apply(node("n1", 8)))), T0);
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("p", 1, json!({}))))),
        T0,
    );
    world.round(T0);
    assert!(world.take_outputs().is_empty());
    assert!(!world.synced());
}

#[test]
fn a_lone_pod_is_bound_with_its_devices_and_reported() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("p", 2, json!({}))))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(bindings(&out), [("p".into(), "n1".into(), "0,1".into())]);
    answer_binds(&mut world, &out, true);
    world.round(T0);
    let out = world.take_outputs();
    assert!(out.iter().any(
        |o| matches!(o, Output::Event { reason: "Scheduled", message, .. }
        if message.contains("ml/p to n1 (GPUs 0,1)"))
    ));
    assert_eq!(world.scheduler().state().total().free_gpus, 6);
}

/// A node whose allocatable lists no `pods` takes no pod, and one listing no `cpu` no pod
/// asking for some, as kube-scheduler reads a node a kubelet has not filled in: the
/// kubelet would refuse them.
#[test]
fn a_node_listing_no_pods_or_no_cpu_takes_no_pod_that_needs_them() {
    let without = |name: &str, entry: &str| {
        node_with(name, 8, json!({"status": {"allocatable": {entry: null}}}))
    };
    let mut world = synced(&plain(), &[without("n1", "pods"), without("n2", "cpu")]);
    let requests = json!({"nvidia.com/gpu": "1", "cpu": "1"});
    let asking_cpu = pod(
        "p",
        1,
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": requests}}]}}),
    );
    for pod in [asking_cpu, pod("q", 1, json!({}))] {
        world.apply(Input::Pod(Box::new(Event::Apply(pod))), T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(bindings(&out), [("q".into(), "n2".into(), "0".into())]);
    let told = messages(&out);
    assert!(
        told.len() == 1
            && told[0].contains("Too many pods")
            && told[0].contains("Insufficient cpu"),
        "{told:?}"
    );
}

/// A pod asking for an extended resource goes only to a node whose allocatable lists
/// it; one asking for a resource no node lists is told so, and placed once a node lists it.
#[test]
fn extended_resources_decide_the_node_and_are_held_there() {
    let listing = |name: &str, resources: Value| {
        node_with(name, 8, json!({"status": {"allocatable": resources}}))
    };
    let mut world = synced(
        &plain(),
        &[node("n1", 8), listing("n2", json!({"rdma/hca": "1"}))],
    );
    let asking = |name: &str, resource: &str| {
        let limits = json!({"nvidia.com/gpu": "1", resource: "1"});
        pod(
            name,
            1,
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}),
        )
    };
    world.apply(
        Input::Pod(Box::new(Event::Apply(asking("p", "rdma/hca")))),
        T0,
    );
    world.apply(
        Input::Pod(Box::new(Event::Apply(asking("q", "example.com/foo")))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(bindings(&out), [("p".into(), "n2".into(), "0".into())]);
    assert_eq!(
        messages(&out),
        ["q: no node of the job's pools has 1 example.com/foo allocatable for each pod"]
    );
    answer_binds(&mut world, &out, true);
    // The node's device plugin starts: its allocatable lists the resource.
    let now = T0 + 1_000;
    apply_node(
        &mut world,
        &listing("n1", json!({"example.com/foo": "4"})),
        now,
    );
    world.round(now);
    assert_eq!(
        bindings(&world.take_outputs()),
        [("q".into(), "n1".into(), "0".into())]
    );
    // n2's one rdma/hca is held by p: another pod asking for it waits, also after n2
    // changes (the cluster is rebuilt), and takes it once p is gone.
    world.apply(
        Input::Pod(Box::new(Event::Apply(asking("r", "rdma/hca")))),
        now,
    );
    apply_node(&mut world, &listing("n2", json!({"rdma/hca": "1"})), now);
    world.round(now);
    assert!(bindings(&world.take_outputs()).is_empty());
    world.apply(
        Input::Pod(Box::new(Event::Delete(asking("p", "rdma/hca")))),
        now,
    );
    world.round(now);
    assert_eq!(
        bindings(&world.take_outputs()),
        [("r".into(), "n2".into(), "0".into())]
    );
}

/// MIG's `mixed` strategy with every GPU cut: the node lists `nvidia.com/mig-1g.10gb` and
/// no whole GPU, and keeps its `nvidia.com/gpu.product` label. A pod asking for a slice
/// and naming that model, as NVIDIA's examples write it, goes there (it is no GPU job:
/// the model is a node label its selector enforces), and not to a node of that model
/// without slices.
#[test]
fn a_mig_slice_pod_naming_its_gpu_model_reaches_a_node_cut_into_slices() {
    let mig = node_with(
        "mig1",
        0,
        json!({
            "metadata": {"labels": {"nvidia.com/gpu.product": "H100",
                                     "nvidia.com/mig.strategy": "mixed"}},
            "status": {"capacity": {"nvidia.com/mig-1g.10gb": "56"},
                       "allocatable": {"nvidia.com/mig-1g.10gb": "56"}}
        }),
    );
    let mut world = synced(&plain(), &[node("n1", 8), mig.clone()]);
    let limits = json!({"nvidia.com/mig-1g.10gb": "1"});
    let slice = pod(
        "slice",
        0,
        json!({"spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "H100"},
            "containers": [{"name": "c", "resources": {"limits": limits}}]
        }}),
    );
    apply_pod(&mut world, &slice, T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        bindings(&out),
        [("slice".into(), "mig1".into(), String::new())],
        "{:?}",
        messages(&out)
    );
    // Sharded, the H100 shard places it; the default shard does not tell it that no node
    // carries H100 (a node of slices carries no whole GPU, but the pod asks for none).
    let nodes = [a100_node("a1", 8), mig];
    let mut h100 = sync(world_with(&plain(), h100_shard()), &nodes, &[]);
    apply_pod(&mut h100, &slice, T0);
    h100.round(T0);
    assert_eq!(bindings(&h100.take_outputs()).len(), 1);
    let options = WorldOptions {
        default_shard: true,
        ..shard_of("A100")
    };
    let mut default = sync(world_with(&plain(), options), &nodes, &[]);
    apply_pod(&mut default, &slice, T0);
    let out = run_until(&mut default, T0, T0 + 60_000);
    let told: Vec<&Output> = (out.iter())
        .filter(|o| {
            matches!(
                o,
                Output::Event {
                    reason: "FailedScheduling",
                    ..
                }
            )
        })
        .collect();
    assert!(told.is_empty(), "{told:?}");
}

/// A configuration's links keyed by a short model name (`L40S`) never match a node, whose
/// model is its whole `nvidia.com/gpu.product` value (`NVIDIA-L40S`): the log says so,
/// once, naming both.
#[test]
fn links_keyed_by_part_of_a_carried_model_are_warned_of_once() {
    let log = kant::captured_log::CapturedLog::default();
    tracing::subscriber::with_default(log.subscriber(), || {
        let mut config = plain();
        let links = &mut config.links.by_model;
        links.insert("L40S".into(), kant::model::LinkProfile::Pcie);
        links.insert(
            "NVIDIA-H100-80GB-HBM3".into(),
            kant::model::LinkProfile::NvlinkAll,
        );
        let l40s = |name: &str| {
            let product =
                json!({"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}});
            node_with(name, 4, product)
        };
        let mut world = synced(&config, &[l40s("l1")]);
        world.round(T0);
        // Another model comes: the models are looked at again.
        apply_node(&mut world, &node("n1", 8), T0 + 1);
        world.round(T0 + 1);
    });
    let text = log.text();
    let warning = "links name GPU model L40S, which no node carries; nodes carry NVIDIA-L40S";
    assert_eq!(text.matches(warning).count(), 1, "{text}");
    assert!(!text.contains("NVIDIA-H100-80GB-HBM3"), "{text}");
}

/// Members that come one by one are each told once why they wait: a message counting
/// the members would be written again to every member as each one more comes.
#[test]
fn a_gang_waits_for_its_members_then_binds_whole() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8), node("n3", 8)]);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("train", 3)))),
        T0,
    );
    let member = |name: &str| {
        pod(
            name,
            8,
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "train"}}}),
        )
    };
    world.apply(Input::Pod(Box::new(Event::Apply(member("w0")))), T0);
    world.round(T0);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty());
    assert_eq!(
        messages(&out),
        ["w0: pod group ml/train: fewer than the 3 pods needed to start are waiting"]
    );
    world.apply(Input::Pod(Box::new(Event::Apply(member("w1")))), T0);
    world.round(T0);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty());
    assert_eq!(
        messages(&out),
        ["w1: pod group ml/train: fewer than the 3 pods needed to start are waiting"]
    );
    world.apply(Input::Pod(Box::new(Event::Apply(member("w2")))), T0);
    world.round(T0);
    let out = world.take_outputs();
    let mut nodes: Vec<String> = binds(&out).into_iter().map(|b| b.node).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
}

/// An MPIJob's gang: a launcher without GPUs or a node selector, and GPU workers that
/// select their nodes. The job takes the rules of the member asking for the most GPUs, so
/// no worker lands on a node its own selector rejects; the launcher is told whose rules
/// it follows.
/// An MPI job: the launcher without GPUs goes where its own node selector says (a node
/// without GPUs, outside the job's GPU pools), the workers where theirs do. The launcher
/// also accepts two GPU models where the workers name none: the gang takes the workers'
/// (any), and the launcher is told so.
#[test]
fn a_gangs_members_keep_their_own_node_rules() {
    let pool = |name: &str, gpus: u32, pool: &str| {
        node_with(name, gpus, json!({"metadata": {"labels": {"pool": pool}}}))
    };
    let mut world = synced(
        &plain(),
        &[
            pool("a1", 0, "cpu"),
            pool("a2", 0, "cpu"),
            pool("g1", 8, "gpu"),
            pool("g2", 8, "gpu"),
        ],
    );
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 3)))),
        T0,
    );
    let on_pool = |pool: &str| json!({"spec": {"nodeSelector": {"pool": pool}}});
    let mut launcher = on_pool("cpu");
    merge(
        &mut launcher,
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product",
                "operator": "In", "values": ["H100", "A100"]}]}]}}}}}),
    );
    for p in [
        member("mpi-launcher", 0, "mpi", launcher),
        member("mpi-worker-0", 8, "mpi", on_pool("gpu")),
        member("mpi-worker-1", 8, "mpi", on_pool("gpu")),
    ] {
        world.apply(Input::Pod(Box::new(Event::Apply(p))), T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    let mut placed: Vec<(String, String)> =
        binds(&out).into_iter().map(|b| (b.name, b.node)).collect();
    placed.sort();
    let [(launcher, on), workers @ ..] = &placed[..] else {
        panic!("{placed:?}");
    };
    assert_eq!(launcher, "mpi-launcher");
    assert!(on == "a1" || on == "a2", "the launcher went to {on}");
    let worker_nodes: Vec<&str> = workers.iter().map(|(_, node)| node.as_str()).collect();
    assert_eq!(worker_nodes.len(), 2);
    assert!(
        worker_nodes.iter().all(|n| n.starts_with('g')),
        "{worker_nodes:?}"
    );
    let told: Vec<(&str, &str)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Event {
                target,
                reason: "GpuModelsDiffer",
                message,
                ..
            } => Some((target.name.as_str(), message.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, "mpi-launcher");
    assert_eq!(
        told[0].1,
        "the pods of pod group ml/mpi differ in the GPU models they accept; ml/mpi-worker-0, \
         the member asking for the most GPUs, accepts any, so kant places them all on one \
         model every member's node rules allow"
    );
}

#[test]
fn pods_found_bound_keep_their_devices_across_a_restart() {
    let old = pod(
        "old",
        2,
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "3,4"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut world = world(&plain());
    for input in [
        Input::Node(Box::new(Event::Init)),
        Input::Node(Box::new(Event::InitApply(node("n1", 8)))),
        Input::Node(Box::new(Event::InitDone)),
        Input::Pod(Box::new(Event::Init)),
        Input::Pod(Box::new(Event::InitApply(old))),
        Input::Pod(Box::new(Event::InitApply(pod("new", 6, json!({}))))),
        Input::Pod(Box::new(Event::InitDone)),
    ]
    .into_iter()
    .chain(empty_listings())
    {
        world.apply(input, T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        bindings(&out),
        [("new".into(), "n1".into(), "0,1,2,5,6,7".into())]
    );
}

#[test]
fn a_pod_of_an_unknown_queue_waits_until_the_queue_exists() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let labelled = pod(
        "p",
        1,
        json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}}),
    );
    world.apply(Input::Pod(Box::new(Event::Apply(labelled))), T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        messages(&out),
        ["p: queue team-a does not exist, or cannot be read (the scheduler's log says why)"]
    );
    assert!(binds(&out).is_empty());
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team-a", 8)))), T0);
    // Queue status is refreshed once a second.
    world.round(T0 + 1_000);
    let out = world.take_outputs();
    assert_eq!(binds(&out).len(), 1);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::QueueStatus { name, .. } if name == "team-a"))
    );
}

#[test]
fn a_malformed_pod_is_reported_and_the_rest_schedules() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let bad = pod(
        "bad",
        0,
        json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "1.5"}}}),
    );
    world.apply(Input::Pod(Box::new(Event::Apply(bad))), T0);
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("good", 1, json!({}))))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(binds(&out).len(), 1);
    let reported = messages(&out);
    assert_eq!(reported.len(), 1);
    assert!(reported[0].starts_with("bad: pod ml/bad: "), "{reported:?}");
}

#[test]
fn a_refused_binding_is_retried_after_a_backoff() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("p", 1, json!({}))))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    answer_binds(&mut world, &out, false);
    world.round(T0);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty());
    assert_eq!(world.scheduler().state().total().free_gpus, 8, "released");
    let retry = world.next_wakeup(T0).expect("a retry is due");
    assert!(retry > T0);
    world.round(retry);
    assert_eq!(binds(&world.take_outputs()).len(), 1);
}

#[test]
fn a_deleted_pod_returns_its_gpus() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let p = pod("p", 8, json!({}));
    world.apply(Input::Pod(Box::new(Event::Apply(p.clone()))), T0);
    world.round(T0);
    let out = world.take_outputs();
    answer_binds(&mut world, &out, true);
    world.round(T0);
    assert_eq!(world.scheduler().state().total().free_gpus, 0);
    world.apply(Input::Pod(Box::new(Event::Delete(p))), T0);
    world.round(T0);
    assert_eq!(world.scheduler().state().total().free_gpus, 8);
}

#[test]
fn a_relist_drops_what_vanished_while_the_watch_was_down() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    world.apply(Input::Node(Box::new(Event::Init)), T0);
    world.apply(Input::Node(Box::new(Event::InitApply(node("n2", 8)))), T0);
    world.apply(Input::Node(Box::new(Event::InitDone)), T0);
    world.round(T0);
    assert_eq!(world.scheduler().state().spec().nodes.len(), 1);
    assert_eq!(world.scheduler().state().total().free_gpus, 8);
}

#[test]
fn constraints_kant_does_not_enforce_are_told_once() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let preferred = json!({"spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "namespaceSelector": {"matchLabels": {"team": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}});
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("p", 1, preferred)))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    let warnings: Vec<&String> = out
        .iter()
        .filter_map(|o| match o {
            Output::Event {
                reason: "IgnoredConstraint",
                message,
                ..
            } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        warnings,
        ["kant does not enforce \
             a pod affinity term's namespaceSelector (the term is applied to every \
             namespace); the pod is scheduled without it"]
    );
    assert_eq!(binds(&out).len(), 1);
}

#[test]
fn rules_a_custom_profile_leaves_out_are_told() {
    let mut config = plain();
    for profile in &mut config.profiles {
        profile.plugins.retain(|p| p.name() != "pod-affinity");
    }
    let mut world = synced(&config, &[node("n1", 8)]);
    apply_pod(&mut world, &web_replica("web-0"), T0);
    world.round(T0);
    let out = world.take_outputs();
    let told = out.iter().any(|o| {
        matches!(o, Output::Event { reason: "IgnoredConstraint", message, .. }
            if message.contains("the profile has no pod-affinity plugin"))
    });
    assert!(told, "{out:?}");
    assert_eq!(binds(&out).len(), 1);
}

/// A web replica: labelled `app=web`, kept off nodes that run another.
fn web_replica(name: &str) -> Pod {
    pod(
        name,
        1,
        json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname"}]}}}
        }),
    )
}

#[test]
fn replicas_with_anti_affinity_get_a_node_each() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    for name in ["web-0", "web-1", "web-2"] {
        apply_pod(&mut world, &web_replica(name), T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    let mut nodes: Vec<String> = bindings(&out).into_iter().map(|(_, n, _)| n).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"], "{out:?}");
    assert_eq!(
        messages(&out),
        ["web-2: 0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."]
    );
}

#[test]
fn replicas_with_a_zone_spread_constraint_spread_over_zones() {
    let zoned = |name: &str, zone: &str| {
        node_with(name, 8, json!({"metadata": {"labels": {"zone": zone}}}))
    };
    let nodes = [zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")];
    let mut world = synced(&plain(), &nodes);
    for i in 0..4 {
        let replica = pod(
            &format!("web-{i}"),
            1,
            json!({
                "metadata": {"labels": {"app": "web"}},
                "spec": {"topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}}]}
            }),
        );
        apply_pod(&mut world, &replica, T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    let mut nodes: Vec<String> = bindings(&out).into_iter().map(|(_, n, _)| n).collect();
    nodes.sort();
    let in_zone_b = nodes.iter().filter(|n| *n == "n3").count();
    assert_eq!((nodes.len(), in_zone_b), (4, 2), "{nodes:?}");
}

#[test]
fn a_relabelled_pod_is_seen_by_the_rules_of_pods_placed_after() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let web = pod("web-0", 1, json!({"metadata": {"labels": {"app": "web"}}}));
    let mut bound = place(&mut world, &web, T0);
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    // Taken out of the service: no longer `app=web`.
    bound.metadata.labels = Some([("app".to_owned(), "retired".to_owned())].into());
    bound.metadata.resource_version = Some("10".into());
    apply_pod(&mut world, &bound, T0 + 1);
    // A replica that avoids web pods may now join it on n1, where E-Binpack puts it.
    apply_pod(&mut world, &web_replica("web-1"), T0 + 1);
    world.round(T0 + 1);
    let out = world.take_outputs();
    let nodes: Vec<String> = bindings(&out).into_iter().map(|(_, n, _)| n).collect();
    assert_eq!(nodes, ["n1"], "{out:?}");
}

#[test]
fn pods_found_bound_keep_their_anti_affinity_across_a_restart() {
    // Bound before the scheduler started, with its devices named: the web replica on n1.
    let mut bound = web_replica("web-0");
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    bound
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("kant.io/gpu-ids".into(), "0".into());
    let mut world = synced_with(&plain(), &[node("n1", 8), node("n2", 8)], &[bound]);
    // A pod its anti-affinity selects must avoid n1, where E-Binpack would have put it.
    let web = pod("web-1", 1, json!({"metadata": {"labels": {"app": "web"}}}));
    apply_pod(&mut world, &web, T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        bindings(&out),
        [("web-1".to_owned(), "n2".to_owned(), "0".to_owned())]
    );
}

/// A gang found bound on restart is seen by other pods' rules with the labels of its
/// member asking for the most GPUs, as when it was placed: here its worker's, not its
/// launcher's.
#[test]
fn a_gang_found_bound_is_seen_with_its_largest_members_labels() {
    let bound = |name: &str, gpus: u32, role: &str, annotations: Value| {
        member(
            name,
            gpus,
            "mpi",
            json!({"metadata": {"labels": {"role": role}, "annotations": annotations},
                   "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
        )
    };
    // Binding names no device for the launcher, which has none.
    let gang = [
        bound("mpi-launcher", 0, "launcher", json!({})),
        bound(
            "mpi-worker-0",
            2,
            "worker",
            json!({"kant.io/gpu-ids": "0,1"}),
        ),
    ];
    let mut world = synced_with(&plain(), &[node("n1", 8), node("n2", 8)], &gang);
    // A pod that must keep away from the workers avoids n1, where E-Binpack would put it.
    let shy = pod(
        "shy",
        1,
        json!({"spec": {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"role": "worker"}},
                "topologyKey": "kubernetes.io/hostname"}]}}}}),
    );
    apply_pod(&mut world, &shy, T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        bindings(&out),
        [("shy".to_owned(), "n2".to_owned(), "0".to_owned())]
    );
    assert_eq!(
        world.scheduler().running().len(),
        2,
        "the gang is adopted as one job (preempted whole), beside shy"
    );
}

#[test]
fn a_deleted_queue_takes_its_waiting_pods_out_of_the_queues() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team-a", 8)))), T0);
    place(&mut world, &pod("first", 8, json!({})), T0);
    let waiting = pod(
        "waiting",
        8,
        json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}}),
    );
    apply_pod(&mut world, &waiting, T0);
    world.round(T0);
    world.take_outputs();
    assert_eq!(world.scheduler().pending(), 1);
    world.apply(
        Input::Queue(Box::new(Event::Delete(queue("team-a", 8)))),
        T0 + 1,
    );
    world.round(T0 + 1);
    let out = world.take_outputs();
    assert_eq!(world.scheduler().pending(), 0);
    assert_eq!(
        messages(&out),
        ["waiting: queue team-a does not exist, or cannot be read (the scheduler's log says why)"]
    );
}

/// A Queue whose spec is invalid is no tenant, and its status says why (once: the
/// condition keeps its transition time); made valid, it loses the condition.
#[test]
fn an_invalid_queue_says_why_in_its_status() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let statuses = |world: &mut World| -> Vec<kant::kube::crd::QueueStatus> {
        (world.take_outputs().into_iter())
            .filter_map(|o| match o {
                Output::QueueStatus { status, .. } => Some(status),
                _ => None,
            })
            .collect()
    };
    world.apply(
        Input::Queue(Box::new(Event::Apply(queue("team-a", -1)))),
        T0,
    );
    world.round(T0);
    let written = statuses(&mut world);
    let conditions = written[0].conditions.as_deref().unwrap_or_default();
    assert_eq!(conditions.len(), 1, "{written:?}");
    assert_eq!(
        (conditions[0].type_.as_str(), conditions[0].status.as_str()),
        ("Valid", "False")
    );
    assert_eq!(
        conditions[0].message,
        "queue team-a: quota -1 of H100 is negative"
    );
    world.round(T0 + 5_000);
    assert!(statuses(&mut world).is_empty(), "written again");
    world.apply(
        Input::Queue(Box::new(Event::Apply(queue("team-a", 8)))),
        T0 + 6_000,
    );
    world.round(T0 + 7_000);
    let written = statuses(&mut world);
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].conditions, Some(Vec::new()));
}

/// A Queue deleted and made again (a GitOps resync, `kubectl replace --force`) takes back
/// its running jobs, counted in the default tenant meanwhile: its status shows them, and
/// its quota holds them.
#[test]
fn a_queue_made_again_takes_back_its_running_jobs() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let isolated = |uid: &str| {
        let mut q = queue("team-a", 4);
        q.spec.mode = kant::kube::crd::QueueMode::Isolated;
        q.metadata.uid = Some(uid.into());
        q
    };
    let labelled = |name: &str| {
        let label = json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}});
        pod(name, 4, label)
    };
    world.apply(Input::Queue(Box::new(Event::Apply(isolated("a")))), T0);
    place(&mut world, &labelled("first"), T0);
    world.round(T0 + 1_000);
    world.apply(
        Input::Queue(Box::new(Event::Delete(isolated("a")))),
        T0 + 1_001,
    );
    world.round(T0 + 1_001);
    world.take_outputs();
    // Made again before the next status refresh: the new object gets its status.
    world.apply(
        Input::Queue(Box::new(Event::Apply(isolated("b")))),
        T0 + 1_002,
    );
    world.round(T0 + 2_000);
    let out = world.take_outputs();
    let allocated: Vec<_> = (out.iter())
        .filter_map(|o| match o {
            Output::QueueStatus { name, status } if name == "team-a" => {
                Some(status.allocated.get("H100").cloned().flatten())
            }
            _ => None,
        })
        .collect();
    assert_eq!(allocated, [Some("4".to_string())], "{out:?}");
    apply_pod(&mut world, &labelled("second"), T0 + 3_000);
    world.round(T0 + 3_000);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty(), "past its isolated quota: {out:?}");
}

/// Isolated Queues whose quotas come to add up past their GPU model's GPUs (a node gone)
/// are exported, by how many GPUs, until the GPUs are back.
#[test]
fn isolated_quotas_past_the_gpus_are_exported() {
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let w = world_reporting(&plain(), WorldOptions::default(), metrics.clone());
    let mut world = sync(w, &[node("n1", 8), node("n2", 8)], &[]);
    for name in ["team-a", "team-b"] {
        let mut isolated = queue(name, 8);
        isolated.spec.mode = kant::kube::crd::QueueMode::Isolated;
        world.apply(Input::Queue(Box::new(Event::Apply(isolated))), T0);
    }
    let series = "kant_isolated_quota_excess_gpus{gpu_model=\"H100\"}";
    world.round(T0);
    assert_eq!(metric(&metrics, series), None);
    delete_node(&mut world, &node("n2", 8), T0 + 1_000);
    world.round(T0 + 1_000);
    assert_eq!(metric(&metrics, series), Some(8.0));
    apply_node(&mut world, &node("n2", 8), T0 + 2_000);
    world.round(T0 + 2_000);
    assert_eq!(metric(&metrics, series), None);
}

/// A node annotation that stops parsing (a 1-based device number in
/// `kant.io/unhealthy-gpus`) closes the node's GPUs but keeps what it runs counted: an
/// isolated Queue's job there still holds its quota.
#[test]
fn a_node_whose_gpu_annotation_breaks_keeps_its_pods_counted() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let mut isolated = queue("team-a", 4);
    isolated.spec.mode = kant::kube::crd::QueueMode::Isolated;
    world.apply(Input::Queue(Box::new(Event::Apply(isolated))), T0);
    let labelled = |name: &str| {
        let label = json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}});
        pod(name, 4, label)
    };
    let first = place(&mut world, &labelled("first"), T0);
    let at = first
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let other = if at == "n1" { "n2" } else { "n1" };
    let broken = json!({"metadata": {"annotations": {"kant.io/unhealthy-gpus": "8"}}});
    apply_node(&mut world, &node_with(&at, 8, broken), T0 + 1_000);
    world.round(T0 + 1_000);
    assert_eq!(
        free_gpus(&world),
        8,
        "only the other node's GPUs are offered"
    );
    apply_pod(&mut world, &labelled("second"), T0 + 2_000);
    world.round(T0 + 2_000);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty(), "past its isolated quota: {out:?}");
    // A pod of no Queue goes to the other node.
    apply_pod(&mut world, &pod("third", 4, json!({})), T0 + 3_000);
    world.round(T0 + 3_000);
    let out = world.take_outputs();
    assert_eq!(
        bindings(&out)
            .iter()
            .map(|b| b.1.as_str())
            .collect::<Vec<_>>(),
        [other]
    );
}

/// After a restart, a running pod whose devices are not named is counted on the node's
/// lowest free devices, and on unhealthy ones where the healthy ones are too few: it runs
/// there whatever their health, so nothing else is bound to its GPUs.
#[test]
fn a_pod_found_running_without_device_ids_is_counted_on_unhealthy_devices_too() {
    let unhealthy =
        |devices: &str| json!({"metadata": {"annotations": {"kant.io/unhealthy-gpus": devices}}});
    let running = |node: &str| json!({"spec": {"nodeName": node}, "status": {"phase": "Running"}});
    let mut foreign = running("n1");
    foreign["spec"]["schedulerName"] = json!("default-scheduler");
    let mut fraction = running("n2");
    fraction["metadata"] = json!({"annotations": {"kant.io/gpu-fraction": "0.5"}});
    let nodes = [
        node_with("n1", 8, unhealthy("7")),
        node_with("n2", 1, unhealthy("0")),
    ];
    let pods = [pod("foreign", 8, foreign), pod("fraction", 0, fraction)];
    let mut world = synced_with(&plain(), &nodes, &pods);
    world.round(T0);
    world.take_outputs();
    assert_eq!(world.scheduler().state().total().used_milli, 8_500);
    apply_pod(&mut world, &pod("new", 1, json!({})), T0 + 1_000);
    world.round(T0 + 1_000);
    let out = world.take_outputs();
    assert!(
        binds(&out).is_empty(),
        "bound onto GPUs a running pod holds: {out:?}"
    );
}

/// A launcher whose node selector matches no node of the job's GPU models keeps its gang
/// waiting, and every member says why.
#[test]
fn a_gang_whose_launcher_fits_no_node_waits_and_says_why() {
    let mut world = synced(&plain(), &[node("g1", 8), node("g2", 8)]);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 2)))),
        T0,
    );
    let on_cpu = json!({"spec": {"nodeSelector": {"pool": "cpu"}}});
    for p in [
        member("mpi-launcher", 0, "mpi", on_cpu),
        member("mpi-worker-0", 8, "mpi", json!({})),
    ] {
        world.apply(Input::Pod(Box::new(Event::Apply(p))), T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty());
    let why = "pod group ml/mpi: 0/2 nodes are available: 2 node(s) didn't match Pod's node \
               affinity/selector.";
    assert_eq!(
        messages(&out),
        [
            format!("mpi-launcher: {why}"),
            format!("mpi-worker-0: {why}")
        ]
    );
}

/// A shard of H100 nodes, without `--default-shard`, runs an MPIJob whose workers ask for
/// H100 and whose launcher names no GPU model: the launcher follows its gang into this
/// shard, whatever order they come in, or the gang would never start. A gang of another
/// shard's model is left alone, launcher included.
#[test]
fn a_gangs_launcher_follows_its_workers_shard() {
    let mut world = sync(world_with(&plain(), h100_shard()), &[node("n1", 8)], &[]);
    for group in ["h100", "a100"] {
        world.apply(
            Input::PodGroup(Box::new(Event::Apply(pod_group(group, 2)))),
            T0,
        );
    }
    let launcher = |group: &str| member(&format!("{group}-launcher"), 0, group, json!({}));
    let worker = |group: &str, model: &str| {
        member(
            &format!("{group}-worker"),
            8,
            group,
            json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": model}}}),
        )
    };
    apply_pod(&mut world, &launcher("h100"), T0);
    apply_pod(&mut world, &launcher("a100"), T0);
    world.round(T0);
    let mut out = world.take_outputs();
    apply_pod(&mut world, &worker("h100", "H100"), T0 + 1);
    apply_pod(&mut world, &worker("a100", "A100"), T0 + 1);
    world.round(T0 + 1);
    out.extend(world.take_outputs());
    let bound: Vec<String> = bindings(&out).into_iter().map(|(pod, _, _)| pod).collect();
    assert_eq!(bound, ["h100-launcher", "h100-worker"], "{out:?}");
    let told_a100 = out.iter().any(|o| format!("{o:?}").contains("a100-"));
    assert!(!told_a100, "another shard's pods are written to: {out:?}");
}

/// A pod naming a GPU model no node carries (a misspelt `nvidia.com/gpu.product`) is told
/// which model, quoted, and which models the nodes carry; bound once a node of it joins.
#[test]
fn a_pod_naming_a_model_no_node_carries_is_told_which() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    let misspelt = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "h100 "}}});
    apply_pod(&mut world, &pod("p", 1, misspelt), T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        messages(&out),
        [r#"p: no node carries the job's GPU model "h100 " (nodes carry "H100")"#]
    );
    let lower = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "h100 "}}});
    apply_node(&mut world, &node_with("n2", 8, lower), T0 + 1);
    let out = run_until(&mut world, T0 + 1, T0 + 60_000);
    assert_eq!(
        bindings(&out),
        [("p".into(), "n2".into(), "0".into())],
        "{out:?}"
    );
}

/// A shard's gang whose launcher may only go to CPU-only nodes (a node selector keeps it
/// off the GPU nodes, as MPIJob users often ask) is placed by that shard: every replica
/// uses CPU-only nodes, not only the `--default-shard` one.
#[test]
fn a_shards_gang_takes_its_launcher_to_a_cpu_only_node() {
    let cpu_node = cpu_node("c1", json!({"metadata": {"labels": {"node-role": "cpu"}}}));
    let nodes = [node("n1", 8), cpu_node];
    let mut world = sync(world_with(&plain(), h100_shard()), &nodes, &[]);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 2)))),
        T0,
    );
    let on_cpu = json!({"spec": {"nodeSelector": {"node-role": "cpu"}}});
    let on_h100 = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}});
    apply_pod(&mut world, &member("launcher", 0, "mpi", on_cpu), T0);
    apply_pod(&mut world, &member("worker", 8, "mpi", on_h100), T0);
    world.round(T0);
    let out = world.take_outputs();
    let mut placed: Vec<(String, String)> = bindings(&out)
        .into_iter()
        .map(|(pod, node, _)| (pod, node))
        .collect();
    placed.sort();
    assert_eq!(
        placed,
        [
            ("launcher".into(), "c1".into()),
            ("worker".into(), "n1".into())
        ],
        "{out:?}"
    );
    let events: Vec<&Output> = (out.iter())
        .filter(|o| matches!(o, Output::Event { .. }))
        .collect();
    assert!(
        events.is_empty(),
        "a launcher accepting any GPU model is not overruled: {events:?}"
    );
}

/// A pod of another shard on a CPU-only node (here the `--default-shard` replica's, naming
/// no GPU model) holds what it holds there, but it is not this shard's: it is not among
/// the running jobs this shard counts for its Queue.
#[test]
fn a_pod_of_another_shard_on_a_cpu_only_node_is_not_counted_as_this_shards_job() {
    let cpu_node = cpu_node(
        "c1",
        json!({"metadata": {"labels": {"node-role": "cpu"}}, "status": {"allocatable": {"cpu": "4"}}}),
    );
    let asking_cpu = |cpu: &str| json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]}});
    let mut web = asking_cpu("4");
    merge(
        &mut web,
        json!({"metadata": {"labels": {"kant.io/queue": "team"}},
               "spec": {"nodeName": "c1"}, "status": {"phase": "Running"}}),
    );
    let nodes = [node("n1", 8), cpu_node];
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &nodes,
        &[pod("web", 0, web)],
    );
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team", 8)))), T0);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 2)))),
        T0,
    );
    let mut launcher = asking_cpu("1");
    merge(
        &mut launcher,
        json!({"spec": {"nodeSelector": {"node-role": "cpu"}}}),
    );
    let on_h100 = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}});
    apply_pod(&mut world, &member("launcher", 0, "mpi", launcher), T0);
    apply_pod(&mut world, &member("worker", 8, "mpi", on_h100), T0);
    let out = run_until(&mut world, T0, T0 + 10_000);
    assert!(binds(&out).is_empty(), "c1 is full: {out:?}");
    assert_no_running_job(&out, None, &["shards", "h100", "running"]);
}

/// A node of another shard's GPU model lists no GPU for a moment when its kubelet restarts
/// before the device plugin registers again. It is still that shard's node, not a CPU-only
/// one every shard uses: its GPU pods cannot be counted here (the node lists no GPU), so a
/// launcher of this shard placed there would go beside pods holding all its CPU.
#[test]
fn another_shards_node_listing_no_gpu_for_a_moment_is_left_alone() {
    let asking = |gpus: &str, cpu: &str| {
        json!({"spec": {"containers": [{"name": "c",
            "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": cpu}}}]}})
    };
    let a1 = |gpus: u32| {
        let labels = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100"}}});
        node_with("a1", gpus, labels)
    };
    let h1 = node_with("h1", 8, json!({"status": {"allocatable": {"cpu": "1"}}}));
    let mut runs = asking("8", "64");
    merge(
        &mut runs,
        json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "A100"}, "nodeName": "a1"},
               "status": {"phase": "Running"}}),
    );
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[h1, a1(8)],
        &[pod("a100-job", 8, runs)],
    );
    world.round(T0);
    // a1's kubelet restarts: for a moment it lists no GPU.
    apply_node(&mut world, &a1(0), T0 + 1);
    world.round(T0 + 1);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 2)))),
        T0 + 1,
    );
    let mut worker = asking("8", "1");
    merge(
        &mut worker,
        json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}}),
    );
    apply_pod(
        &mut world,
        &member("launcher", 0, "mpi", asking("0", "1")),
        T0 + 1,
    );
    apply_pod(&mut world, &member("worker", 8, "mpi", worker), T0 + 1);
    let out = run_until(&mut world, T0 + 1, T0 + 10_000);
    let on_a1: Vec<_> = (bindings(&out).into_iter())
        .filter(|(_, node, _)| node == "a1")
        .collect();
    assert!(on_a1.is_empty(), "bound to another shard's node: {on_a1:?}");
}

/// The pods every shard finds on a CPU-only node, another scheduler's or another shard's,
/// are in the `default` tenant but are no shard's jobs: a Queue `default` (configuring that
/// tenant) does not count them among this shard's running jobs, or every shard would add
/// them to its sum.
#[test]
fn pods_found_on_a_cpu_only_node_are_not_running_jobs_of_the_default_queue() {
    let cpu_node = cpu_node("c1", json!({}));
    let running_on_c1 = json!({"spec": {"nodeName": "c1"}, "status": {"phase": "Running"}});
    // The --default-shard replica's pod, naming no GPU model nor Queue.
    let web = pod("web", 0, running_on_c1.clone());
    let mut dns = running_on_c1;
    dns["spec"]["schedulerName"] = json!("default-scheduler");
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[node("n1", 8), cpu_node],
        &[web, pod("dns", 0, dns)],
    );
    world.apply(
        Input::Queue(Box::new(Event::Apply(queue("default", 8)))),
        T0,
    );
    let out = run_until(&mut world, T0, T0 + 10_000);
    assert_no_running_job(&out, Some("default"), &["shards", "h100", "running"]);
}

/// A pod of this scheduler found on a CPU-only node whose scheduling fields no longer parse
/// (relabelled `kant.io/workload`) names no GPU model anyone can read: it is the
/// `--default-shard` replica's, as it was, and not among the running jobs of every other
/// shard too (each would count it in its entry of the Queue's status).
#[test]
fn an_unreadable_pod_on_a_cpu_only_node_is_not_counted_by_every_shard() {
    let cpu_node = cpu_node("c1", json!({}));
    let web = pod(
        "web",
        0,
        json!({"metadata": {"labels": {"kant.io/queue": "team", "kant.io/workload": "batch"}},
               "spec": {"nodeName": "c1"}, "status": {"phase": "Running"}}),
    );
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[node("n1", 8), cpu_node],
        &[web],
    );
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team", 8)))), T0);
    let out = run_until(&mut world, T0, T0 + 10_000);
    assert_no_running_job(&out, None, &["shards", "h100", "running"]);
}

/// A pod found terminating on start (an earlier leader's victim, a pod being deleted)
/// holds its devices until it is gone, charged to no Queue: nor is it among its Queue's
/// running jobs.
#[test]
fn a_pod_found_terminating_is_no_running_job_of_its_queue() {
    let going = pod(
        "going",
        2,
        json!({"metadata": {"labels": {"kant.io/queue": "team"},
                            "annotations": {"kant.io/gpu-ids": "0,1"},
                            "deletionTimestamp": "2023-11-14T22:13:20Z"},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut world = synced_with(&plain(), &[node("n1", 8)], &[going]);
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team", 8)))), T0);
    let out = run_until(&mut world, T0, T0 + 10_000);
    assert_eq!(free_gpus(&world), 6, "it holds its devices");
    assert_no_running_job(&out, Some("team"), &["running"]);
}

/// A pod naming A100 then H100 was placed by the H100 shard while no node carried A100 (an
/// autoscaled A100 group at zero, say). Once a node carries A100, such a pod is the A100
/// shard's to place, but the one found running on an H100 node, after a restart, is still
/// the H100 shard's: only it sees that node. It is charged to its Queue and counted among
/// its running jobs, not left to a shard that cannot see it.
#[test]
fn a_pod_found_on_this_shards_gpu_node_is_this_shards_whatever_models_it_names() {
    let term = json!({"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100", "H100"]}]});
    let runs = pod(
        "runs",
        8,
        json!({"metadata": {"labels": {"kant.io/queue": "team"},
                            "annotations": {"kant.io/gpu-ids": "0,1,2,3,4,5,6,7"}},
               "spec": {"nodeName": "h1", "affinity": {"nodeAffinity":
                   {"requiredDuringSchedulingIgnoredDuringExecution":
                       {"nodeSelectorTerms": [term]}}}},
               "status": {"phase": "Running"}}),
    );
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[node("h1", 8), a100_node("a1", 8)],
        &[runs],
    );
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team", 8)))), T0);
    let out = run_until(&mut world, T0, T0 + 10_000);
    let status = (out.iter().rev())
        .find_map(|o| match o {
            Output::QueueStatus { status, .. } => Some(serde_json::to_value(status).unwrap()),
            _ => None,
        })
        .expect("a Queue status");
    assert_eq!(status["allocated"]["H100"], json!("8"), "{status}");
    assert_eq!(status["shards"]["h100"]["running"], json!(1), "{status}");
}

/// Each shard's replica writes only its own figures: the status of the PodGroups whose
/// gangs it schedules, and a Queue's GPUs of its own models (the replica of the other
/// model writes those, and the merge patches of the two must not overwrite each other).
#[test]
fn a_shard_reports_only_its_own_groups_and_gpu_models() {
    let mut world = sync(world_with(&plain(), h100_shard()), &[node("n1", 8)], &[]);
    let team: kant::kube::crd::Queue = serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team"},
        "spec": {"mode": "shared", "quota": {"H100": 8, "A100": 8}}
    }))
    .unwrap();
    world.apply(Input::Queue(Box::new(Event::Apply(team))), T0);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("a100", 1)))),
        T0,
    );
    let on_a100 = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "A100"}}});
    apply_pod(&mut world, &member("a100-worker", 8, "a100", on_a100), T0);
    world.round(T0);
    let out = world.take_outputs();
    let groups: Vec<&Output> = out
        .iter()
        .filter(|o| matches!(o, Output::PodGroupStatus { .. }))
        .collect();
    assert!(
        groups.is_empty(),
        "another shard's group is written: {groups:?}"
    );
    let models: Vec<Vec<&String>> = out
        .iter()
        .filter_map(|o| match o {
            Output::QueueStatus { status, .. } => Some(status.allocated.keys().collect()),
            _ => None,
        })
        .collect();
    assert_eq!(models, [["H100"]]);
}

/// A merge patch removes only the keys it names null. When no node carries a GPU model
/// any more, the Queue's figures for it are named null, or the last ones would stay in its
/// status for ever; another shard's models are left to it.
#[test]
fn a_queue_loses_the_figures_of_a_gpu_model_no_node_carries_any_more() {
    let a100 = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100"}}});
    let a1 = node_with("a1", 8, a100);
    let mut world = sync(world(&plain()), &[node("h1", 8), a1.clone()], &[]);
    let statuses = |outputs: Vec<Output>| -> Vec<kant::kube::crd::QueueStatus> {
        (outputs.into_iter())
            .filter_map(|o| match o {
                Output::QueueStatus { status, .. } => Some(status),
                _ => None,
            })
            .collect()
    };
    let mut team = queue("team", 8);
    world.apply(Input::Queue(Box::new(Event::Apply(team.clone()))), T0);
    world.round(T0);
    let written = statuses(world.take_outputs());
    let models: Vec<Vec<&String>> = written
        .iter()
        .map(|s| s.allocated.keys().collect())
        .collect();
    assert_eq!(models, [["A100", "H100"]]);
    // The Queue now shows them, as the API server would, and also a model of another
    // shard's (this replica owns every model: it names it null too).
    let mut shown = written[0].clone();
    shown.allocated.insert("B200".into(), Some("0".into()));
    team.status = Some(shown);
    world.apply(Input::Queue(Box::new(Event::Apply(team))), T0 + 1);
    delete_node(&mut world, &a1, T0 + 1);
    world.round(T0 + 1_001);
    let written = statuses(world.take_outputs());
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(named_null(&written[0].allocated), ["A100", "B200"]);
    assert_eq!(named_null(&written[0].borrowed), ["A100", "B200"]);
    assert_eq!(written[0].allocated["H100"].as_deref(), Some("0"));
    let patch = serde_json::to_value(&written[0]).unwrap();
    assert_eq!(patch["allocated"]["A100"], Value::Null);
    // Once the Queue shows the patch, without them, there is nothing more to write.
    let mut applied = written[0].clone();
    applied.allocated.retain(|_, v| v.is_some());
    applied.borrowed.retain(|_, v| v.is_some());
    let mut team = queue("team", 8);
    team.status = Some(applied.clone());
    world.apply(
        Input::Queue(Box::new(Event::Apply(team.clone()))),
        T0 + 2_002,
    );
    world.round(T0 + 2_002);
    assert_eq!(statuses(world.take_outputs()), []);
    // Figures put back on the Queue (a late write of another replica's) go again.
    applied.allocated.insert("A100".into(), Some("8".into()));
    applied.allocated.insert("B200".into(), Some("0".into()));
    team.status = Some(applied);
    world.apply(Input::Queue(Box::new(Event::Apply(team))), T0 + 3_003);
    world.round(T0 + 3_003);
    let written = statuses(world.take_outputs());
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(named_null(&written[0].allocated), ["A100", "B200"]);
}

/// A shard's replica names null only the models of its own shard that no node carries:
/// another shard's figures are that shard's to remove. The `--default-shard` replica also
/// names null the models no node carries at all, which a shard removed since may have left.
#[test]
fn a_shard_leaves_another_shards_gone_model_in_the_queue() {
    let a100 = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100"}}});
    let nodes = [node("h1", 8), node_with("a1", 8, a100)];
    for (default_shard, nulled) in [(false, &[][..]), (true, &["B200"][..])] {
        let options = WorldOptions {
            default_shard,
            ..h100_shard()
        };
        let mut world = sync(world_with(&plain(), options), &nodes, &[]);
        let mut team = queue("team", 8);
        team.status = serde_json::from_value(json!(
            {"allocated": {"H100": "0", "A100": "8", "B200": "1"}, "borrowed": {}}))
        .unwrap();
        world.apply(Input::Queue(Box::new(Event::Apply(team))), T0);
        world.round(T0);
        let out = world.take_outputs();
        let nulls: Vec<Vec<&str>> = (out.iter())
            .filter_map(|o| match o {
                Output::QueueStatus { status, .. } => Some(named_null(&status.allocated)),
                _ => None,
            })
            .collect();
        assert_eq!(nulls, [nulled], "{out:?}");
    }
}

/// The models a Queue status's figures name null: removed by the merge patch.
fn named_null(figures: &BTreeMap<String, Option<String>>) -> Vec<&str> {
    (figures.iter())
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k.as_str())
        .collect()
}

/// A replica of the H100 shard, without `--default-shard`.
fn h100_shard() -> WorldOptions {
    shard_of("H100")
}

/// A replica of the shard of `model` (named after it), without `--default-shard`.
fn shard_of(model: &str) -> WorldOptions {
    WorldOptions {
        shard: model.to_lowercase(),
        shard_models: vec![model.into()],
        default_shard: false,
        ..WorldOptions::default()
    }
}

/// Each shard counts a Queue's jobs of its own GPU models under its name, and writes the
/// totals from the other shards' counts as the Queue shows them: whatever order the
/// writes land in, the totals settle on the sum.
#[test]
fn shards_count_a_queues_jobs_apart_and_settle_on_the_sum() {
    let nodes = [node("h1", 8), a100_node("a1", 8)];
    let mut team: serde_json::Value = serde_json::to_value(queue("team", 8)).unwrap();
    merge(&mut team, json!({"spec": {"quota": {"A100": 8}}}));
    let of = |model: &str| {
        let labels = json!({"kant.io/queue": "team"});
        let spec = json!({"nodeSelector": {"nvidia.com/gpu.product": model}});
        move |name: &str| {
            pod(
                name,
                8,
                json!({"metadata": {"labels": labels}, "spec": spec}),
            )
        }
    };
    let mut shards =
        [("H100", vec!["h-run"]), ("A100", vec!["a-run", "a-wait"])].map(|(model, pods)| {
            let mut w = sync(world_with(&plain(), shard_of(model)), &nodes, &[]);
            let team: kant::kube::crd::Queue = serde_json::from_value(team.clone()).unwrap();
            w.apply(Input::Queue(Box::new(Event::Apply(team))), T0);
            for name in pods {
                apply_pod(&mut w, &of(model)(name), T0);
            }
            w
        });
    // The API server's Queue: every status write merged in, each then seen by both.
    let mut now = T0;
    for _ in 0..3 {
        now += 1_000;
        for w in shards.iter_mut() {
            w.round(now);
            for output in w.take_outputs() {
                if let Output::QueueStatus { status, .. } = output {
                    merge(&mut team, json!({"status": status}));
                }
            }
        }
        for w in shards.iter_mut() {
            let seen: kant::kube::crd::Queue = serde_json::from_value(team.clone()).unwrap();
            w.apply(Input::Queue(Box::new(Event::Apply(seen))), now);
        }
    }
    let status = &team["status"];
    assert_eq!(
        (&status["pending"], &status["running"]),
        (&json!(1), &json!(2)),
        "{status}"
    );
    let counts = |shard: &str| {
        let entry = &status["shards"][shard];
        (entry["pending"].clone(), entry["running"].clone())
    };
    assert_eq!(counts("h100"), (json!(0), json!(1)), "{status}");
    assert_eq!(counts("a100"), (json!(1), json!(1)), "{status}");
    assert_eq!(status["allocated"], json!({"H100": "8", "A100": "8"}));

    // The A100 shard is taken away. The H100 shard stamps its entry every 5 minutes
    // though nothing changes; 15 minutes after the A100 entry's last stamp it leaves it
    // out of the totals and removes it.
    let [mut h100, _] = shards;
    let stamped = |team: &Value, shard: &str| team["status"]["shards"][shard]["updatedAt"].clone();
    let mut h100_stamps = vec![stamped(&team, "h100")];
    for minute in 1..=16 {
        now += 60_000;
        h100.round(now);
        for output in h100.take_outputs() {
            if let Output::QueueStatus { status, .. } = output {
                merge(&mut team, json!({"status": status}));
            }
        }
        let seen: kant::kube::crd::Queue = serde_json::from_value(team.clone()).unwrap();
        h100.apply(Input::Queue(Box::new(Event::Apply(seen))), now);
        if stamped(&team, "h100") != *h100_stamps.last().unwrap() {
            h100_stamps.push(stamped(&team, "h100"));
        }
        let status = &team["status"];
        let gone = minute >= 15;
        assert_eq!(
            status["shards"].get("a100").is_none(),
            gone,
            "minute {minute}: {status}"
        );
        let totals = (&status["pending"], &status["running"]);
        let expected = if gone {
            (json!(0), json!(1))
        } else {
            (json!(1), json!(2))
        };
        assert_eq!(
            totals,
            (&expected.0, &expected.1),
            "minute {minute}: {status}"
        );
    }
    assert_eq!(
        h100_stamps.len(),
        4,
        "stamped at 0, 5, 10 and 15 minutes: {h100_stamps:?}"
    );
}

/// A pod that accepts the GPU models of two shards is placed by one: the shard of the
/// first model it names that a node carries.
#[test]
fn a_pod_naming_two_shards_models_is_placed_by_one() {
    let either = |models: [&str; 3]| {
        let term = json!({"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": models}]});
        let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [term]}}});
        pod("either", 4, json!({"spec": {"affinity": affinity}}))
    };
    let nodes = [node("h1", 8), a100_node("a1", 8)];
    // B200 comes first, but no node carries it: A100 is the first that counts.
    for (models, placer) in [
        (["A100", "H100", "B200"], "a1"),
        (["B200", "H100", "A100"], "h1"),
        (["B200", "A100", "H100"], "a1"),
    ] {
        let mut bound = Vec::new();
        for shard in ["H100", "A100"] {
            let mut w = sync(world_with(&plain(), shard_of(shard)), &nodes, &[]);
            apply_pod(&mut w, &either(models), T0);
            w.round(T0);
            bound.extend(binds(&w.take_outputs()).into_iter().map(|b| b.node));
        }
        assert_eq!(bound, [placer], "{models:?}");
    }
    // The first model comes to be carried while the pod waits on the other shard's full
    // node: it changes shards.
    let b200 = node_with(
        "b1",
        8,
        json!({"metadata": {"labels": {"nvidia.com/gpu.product": "B200"}}}),
    );
    let full = running_elsewhere("other", 8, "h1");
    let mut shards = ["H100", "B200"].map(|shard| {
        sync(
            world_with(&plain(), shard_of(shard)),
            &[node("h1", 8)],
            std::slice::from_ref(&full),
        )
    });
    for w in shards.iter_mut() {
        apply_pod(w, &either(["B200", "H100", "A100"]), T0);
        w.round(T0);
        assert!(binds(&w.take_outputs()).is_empty());
    }
    assert_eq!(
        shards[0].scheduler().pending(),
        1,
        "queued on the H100 shard"
    );
    let mut bound = Vec::new();
    for w in shards.iter_mut() {
        apply_node(w, &b200, T0 + 1);
        w.round(T0 + 1);
        bound.extend(binds(&w.take_outputs()).into_iter().map(|b| b.node));
    }
    assert_eq!(bound, ["b1"]);
    assert_eq!(
        shards[0].scheduler().pending(),
        0,
        "withdrawn from the H100 shard"
    );
}

/// What a leader reads on the shards' Leases: a shard (named after its model) configured
/// for `models`, led or not.
fn shards_seen(models: &[&str]) -> Input {
    let seen = |model: &&str| ShardSeen {
        lease: format!("kant-scheduler-{}", model.to_lowercase()),
        claim: ShardClaim {
            scheduler_name: "kant-scheduler".into(),
            gpu_models: vec![model.to_string()],
            default_shard: false,
        },
        leading: false,
        current: true,
    };
    Input::Shards(models.iter().map(seen).collect())
}

/// A pod naming two GPU models whose first has nodes but no shard configured for it (no
/// Lease claims it) goes, once the Leases are read, to the shard of the second, and comes
/// back to the first's once a shard of it appears.
#[test]
fn a_pod_naming_a_model_no_shard_schedules_goes_to_the_shard_of_another_it_names() {
    let term = json!({"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["L40S", "H100"]}]});
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [term]}}});
    let either = pod("either", 4, json!({"spec": {"affinity": affinity}}));
    let l40s = node_with(
        "l1",
        8,
        json!({"metadata": {"labels": {"nvidia.com/gpu.product": "L40S"}}}),
    );
    let mut w = sync(
        world_with(&plain(), h100_shard()),
        &[node("h1", 8), l40s.clone()],
        &[],
    );
    apply_pod(&mut w, &either, T0);
    // Until the Leases are read, the L40S shard, whose nodes exist, is taken to be there.
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    w.apply(shards_seen(&["H100"]), T0 + 1);
    w.round(T0 + 1);
    let bound: Vec<String> = binds(&w.take_outputs())
        .into_iter()
        .map(|b| b.node)
        .collect();
    assert_eq!(bound, ["h1"]);

    // Queued on the H100 shard (its node full), the pod leaves it once an L40S shard's
    // Lease appears, led or not: a shard down for a while keeps its pods.
    let full = running_elsewhere("other", 8, "h1");
    let mut w = sync(
        world_with(&plain(), h100_shard()),
        &[node("h1", 8), l40s],
        &[full],
    );
    w.apply(shards_seen(&["H100"]), T0);
    apply_pod(&mut w, &either, T0);
    w.round(T0);
    assert_eq!(w.scheduler().pending(), 1, "queued on the H100 shard");
    // A Lease of L40S left unrenewed for an hour is a shard removed.
    let Input::Shards(mut stale) = shards_seen(&["H100", "L40S"]) else {
        unreachable!()
    };
    stale[1].current = false;
    w.apply(Input::Shards(stale), T0 + 1);
    w.round(T0 + 1);
    assert_eq!(w.scheduler().pending(), 1, "still queued on the H100 shard");
    w.apply(shards_seen(&["H100", "L40S"]), T0 + 1);
    w.round(T0 + 1);
    assert_eq!(w.scheduler().pending(), 0, "withdrawn from the H100 shard");
    assert!(binds(&w.take_outputs()).is_empty());
}

/// A pod naming only a GPU model no node carries (a misspelt `nvidia.com/gpu.product`) is
/// no shard's, and would wait without a word: the `--default-shard` replica tells it, once,
/// naming the model; a pod of another shard's model is not told.
#[test]
fn a_pod_of_a_gpu_model_no_node_carries_is_told_by_the_default_shard() {
    let naming = |name: &str, model: &str| {
        let selector = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": model}}});
        pod(name, 1, selector)
    };
    let told = |out: &[Output]| -> Vec<(String, String)> {
        (out.iter())
            .filter_map(|o| match o {
                Output::Event {
                    target,
                    reason: "FailedScheduling",
                    message,
                    ..
                } => Some((target.name.clone(), message.clone())),
                _ => None,
            })
            .collect()
    };
    let nodes = [node("h1", 8), a100_node("a1", 8)];
    let default_h100 = WorldOptions {
        default_shard: true,
        ..h100_shard()
    };
    let mut w = sync(world_with(&plain(), default_h100), &nodes, &[]);
    apply_pod(&mut w, &naming("typo", "H100-TYPO"), T0);
    apply_pod(&mut w, &naming("other", "A100"), T0);
    let out = run_until(&mut w, T0, T0 + 60_000);
    let told = told(&out);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, "typo");
    assert!(told[0].1.contains("H100-TYPO"), "{}", told[0].1);
    // Without --default-shard, the pod is left to the replica that has it.
    let mut w = sync(world_with(&plain(), h100_shard()), &nodes, &[]);
    apply_pod(&mut w, &naming("typo", "H100-TYPO"), T0);
    assert!(run_until(&mut w, T0, T0 + 60_000).is_empty());
}

/// An A100 node of `gpus` GPUs: another shard's.
fn a100_node(name: &str, gpus: u32) -> k8s_openapi::api::core::v1::Node {
    let labels = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100"}}});
    node_with(name, gpus, labels)
}

/// A pod of another scheduler, running on `node` with `gpus` GPUs.
fn running_elsewhere(name: &str, gpus: u32, node: &str) -> Pod {
    let spec = json!({"spec": {"schedulerName": "default-scheduler", "nodeName": node},
                      "status": {"phase": "Running"}});
    pod(name, gpus, spec)
}

/// Another scheduler's pod holds what its `nvidia.com/gpu` gives it, and no share of a GPU,
/// whatever `kant.io/gpu-fraction` it carries (copied from a template, say): it is counted,
/// its CPU with it, on a CPU-only node as on a GPU node, whose GPUs all stay free.
#[test]
fn another_schedulers_pod_carrying_a_fraction_holds_no_share_of_a_gpu() {
    for (node, gpus) in [(cpu_node("n1", json!({})), 0), (node("n1", 8), 8)] {
        let carrying = pod(
            "carrying",
            0,
            json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "0.5"}},
                   "spec": {"schedulerName": "default-scheduler", "nodeName": "n1",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "60"}}}]},
                   "status": {"phase": "Running"}}),
        );
        let mut world = synced_with(&plain(), &[node], &[carrying]);
        world.round(T0);
        assert_eq!(free_gpus(&world), gpus);
        // 4 of the node's 64 CPUs are left.
        let wide = json!({"spec": {"containers": [{"name": "c",
                          "resources": {"requests": {"cpu": "10"}}}]}});
        apply_pod(&mut world, &pod("wide", 0, wide), T0 + 1);
        world.round(T0 + 1);
        let out = world.take_outputs();
        assert!(binds(&out).is_empty(), "{out:?}");
    }
}

/// Another scheduler's whole GPUs beside Kant's fraction on one device (Kubernetes sees
/// all 8 free: a fraction asks for none) are counted on the 7 devices left whole, its CPU
/// in full, and on the 8th once the fraction is gone: no whole GPU of the node is given
/// again.
#[test]
fn another_schedulers_gpus_beside_a_fraction_are_counted_on_what_is_free() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    world.round(T0);
    let fraction = json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "0.5"}}});
    let fraction = place(&mut world, &pod("fraction", 0, fraction), T0);
    let beside = beside_a_fraction();
    apply_pod(&mut world, &beside, T0 + 1);
    world.round(T0 + 1);
    world.take_outputs();
    assert_eq!(free_gpus(&world), 0);
    // The fraction gone, its device is the other scheduler's pod's.
    delete_pod(&mut world, &fraction, T0 + 2);
    // 60 of the node's 64 CPUs are left.
    for (name, gpus, cpu) in [("one", 1, "1"), ("wide", 0, "61")] {
        let asks = json!({"spec": {"containers": [{"name": "c", "resources": {
            "limits": {"nvidia.com/gpu": gpus.to_string()}, "requests": {"cpu": cpu}}}]}});
        apply_pod(&mut world, &pod(name, gpus, asks), T0 + 2);
    }
    let out = run_until(&mut world, T0 + 2, T0 + 5_000);
    assert!(binds(&out).is_empty(), "{out:?}");
    assert_eq!(free_gpus(&world), 0);
    // Gone too, it leaves the whole node free.
    delete_pod(&mut world, &beside, T0 + 6_000);
    world.round(T0 + 6_000);
    assert_eq!(binds(&world.take_outputs()).len(), 2);
}

/// Another scheduler's pod of 8 GPUs and 4 CPUs on `n1`, where Kant places fractions.
fn beside_a_fraction() -> Pod {
    let beside = json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1",
                                 "containers": [{"name": "c", "resources": {
                                     "limits": {"nvidia.com/gpu": "8"},
                                     "requests": {"cpu": "4"}}}]},
                        "status": {"phase": "Running"}});
    pod("beside", 8, beside)
}

/// The jobs running, by id.
fn running_ids(world: &World) -> Vec<kant::model::JobId> {
    let mut ids: Vec<_> = world.scheduler().running().keys().copied().collect();
    ids.sort();
    ids
}

/// A pod counted short of its GPUs is adopted again only when room has come back on its
/// node: not for room freed elsewhere, nor at every round.
#[test]
fn a_pod_counted_short_stays_the_job_it_is_until_its_node_has_room() {
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    world.round(T0);
    let fraction = json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "0.5"}}});
    place(&mut world, &pod("fraction", 0, fraction), T0);
    apply_pod(&mut world, &beside_a_fraction(), T0 + 1);
    world.round(T0 + 1);
    assert_eq!(free_gpus(&world), 8);
    let elsewhere = place(&mut world, &pod("elsewhere", 8, json!({})), T0 + 1_000);
    delete_pod(&mut world, &elsewhere, T0 + 1_500);
    let first = running_ids(&world);
    for now in (2..8).map(|i| T0 + i * 1_000) {
        world.round(now);
        world.take_outputs();
        assert_eq!(running_ids(&world), first);
    }
}

/// Devices a refused binding gives back, on a node where another scheduler's pod was
/// counted short meanwhile, are that pod's before anything else is placed: kube-scheduler
/// did not see the binding in flight, and gave them to its pod.
#[test]
fn devices_a_refused_binding_gives_back_go_to_a_pod_counted_short() {
    let mut world = synced(&plain(), &[node("n1", 8)]);
    world.round(T0);
    apply_pod(&mut world, &pod("a", 2, json!({})), T0);
    world.round(T0);
    let bind_a = binds(&world.take_outputs());
    assert_eq!(bind_a.len(), 1);
    apply_pod(&mut world, &beside_a_fraction(), T0 + 1);
    world.round(T0 + 1);
    world.take_outputs();
    assert_eq!(free_gpus(&world), 0);
    answer(
        &mut world,
        &bind_a[0],
        refused(Some(500), "internal error"),
        T0 + 2,
    );
    let fraction = json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "0.5"}}});
    apply_pod(&mut world, &pod("f", 0, fraction), T0 + 2);
    let out = run_until(&mut world, T0 + 2, T0 + 5_000);
    assert!(binds(&out).is_empty(), "{out:?}");
    assert_eq!(free_gpus(&world), 0);
}

/// A pod bound to a node while the node was another shard's (labelled another GPU model,
/// or reporting no GPUs for a moment, and so no model) is counted once the node turns
/// H100.
#[test]
fn a_pod_bound_while_its_node_was_another_shards_is_counted_once_the_node_is_ours() {
    for before in [a100_node("n1", 8), node("n1", 0)] {
        let runs = running_elsewhere("runs", 4, "n1");
        let mut world = sync(world_with(&plain(), h100_shard()), &[before], &[runs]);
        world.round(T0);
        apply_node(&mut world, &node("n1", 8), T0 + 1);
        assert_half_of_n1_is_held(&mut world, T0 + 1);
    }
}

/// Another shard's node deleted, then registered again as H100 (its kubelet re-registers
/// it), still runs its pods: they are counted.
#[test]
fn a_pod_on_another_shards_node_registered_again_as_ours_is_counted() {
    let runs = running_elsewhere("runs", 4, "n1");
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[a100_node("n1", 8)],
        &[runs],
    );
    world.round(T0);
    delete_node(&mut world, &a100_node("n1", 8), T0 + 1);
    world.round(T0 + 1);
    apply_node(&mut world, &node("n1", 8), T0 + 2);
    assert_half_of_n1_is_held(&mut world, T0 + 2);
}

/// The 8-GPU n1 is the only node, and 4 of its GPUs are held: a pod asking for 6 is not
/// bound.
fn assert_half_of_n1_is_held(world: &mut World, now: u64) {
    world.round(now);
    assert_eq!(free_gpus(world), 4);
    apply_pod(world, &pod("wide", 6, json!({})), now + 1);
    world.round(now + 1);
    let out = world.take_outputs();
    assert!(binds(&out).is_empty(), "{out:?}");
}

/// A pod that finished, or was deleted, while its node was another shard's holds nothing
/// once the node turns H100.
#[test]
fn a_pod_gone_while_its_node_was_another_shards_is_not_counted_once_the_node_is_ours() {
    let finished = running_elsewhere("finished", 4, "n1");
    let deleted = running_elsewhere("deleted", 4, "n1");
    let mut world = sync(
        world_with(&plain(), h100_shard()),
        &[a100_node("n1", 8)],
        &[finished.clone(), deleted.clone()],
    );
    world.round(T0);
    let mut succeeded = finished;
    succeeded.metadata.resource_version = Some("2".into());
    succeeded.status.as_mut().unwrap().phase = Some("Succeeded".into());
    apply_pod(&mut world, &succeeded, T0 + 1);
    delete_pod(&mut world, &deleted, T0 + 1);
    apply_node(&mut world, &node("n1", 8), T0 + 2);
    world.round(T0 + 2);
    assert_eq!(free_gpus(&world), 8);
}

/// A world with a 2-member PodGroup `train`, on two nodes of 8 GPUs, feeding `metrics`.
fn gang_world(pods: &[Pod]) -> (World, std::sync::Arc<kant::metrics::live::LiveMetrics>) {
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let w = world_reporting(&plain(), WorldOptions::default(), metrics.clone());
    let mut w = sync(w, &[node("n1", 8), node("n2", 8)], pods);
    let group = Input::PodGroup(Box::new(Event::Apply(pod_group("train", 2))));
    w.apply(group, T0);
    (w, metrics)
}

/// A pod queued on the H100 shard moves to the L40S shard once that shard appears, and
/// runs and ends there: the H100 shard counts it withdrawn once, when it leaves, not
/// again when it is deleted, and no longer as never placed.
#[test]
fn a_job_that_moves_to_another_shard_is_withdrawn_once() {
    let term = json!({"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["L40S", "H100"]}]});
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [term]}}});
    let either = pod("either", 4, json!({"spec": {"affinity": affinity}}));
    let l40s = json!({"metadata": {"labels": {"nvidia.com/gpu.product": "L40S"}}});
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let w = world_reporting(&plain(), h100_shard(), metrics.clone());
    let full = running_elsewhere("other", 8, "h1");
    let mut w = sync(w, &[node("h1", 8), node_with("l1", 8, l40s)], &[full]);
    w.apply(shards_seen(&["H100"]), T0);
    apply_pod(&mut w, &either, T0);
    w.round(T0);
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(1.0));
    w.apply(shards_seen(&["H100", "L40S"]), T0 + 1);
    w.round(T0 + 1);
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(0.0));
    assert_eq!(metric(&metrics, "kant_jobs_withdrawn_total"), Some(1.0));
    let mut done = either.clone();
    done.spec.as_mut().unwrap().node_name = Some("l1".into());
    done.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
    done.metadata.resource_version = Some("3".into());
    apply_pod(&mut w, &done, T0 + 2);
    delete_pod(&mut w, &done, T0 + 3);
    w.round(T0 + 3);
    assert_eq!(metric(&metrics, "kant_jobs_withdrawn_total"), Some(1.0));
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(0.0));
}

/// A job deleted while it waits no longer counts as never placed (an alert on
/// `kant_jobs_never_placed > 0` would fire for good after the first cancelled pod).
#[test]
fn a_job_deleted_before_it_was_placed_no_longer_counts_as_never_placed() {
    let (mut w, metrics) = gang_world(&[]);
    let big = pod("big", 16, json!({}));
    apply_pod(&mut w, &big, T0);
    w.round(T0);
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(1.0));
    delete_pod(&mut w, &big, T0 + 1_000);
    w.round(T0 + 1_000);
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(0.0));
    assert_eq!(metric(&metrics, "kant_jobs_withdrawn_total"), Some(1.0));
    assert_eq!(metric(&metrics, "kant_jobs_submitted_total"), Some(1.0));
}

/// The members of PodGroup `train` found at a restart: w0 bound on all of n1's GPUs, w1
/// waiting (the last leader stood down between their bindings).
fn half_bound_gang() -> (Pod, Pod) {
    let w0 = member(
        "w0",
        8,
        "train",
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "0,1,2,3,4,5,6,7"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    (w0, member("w1", 8, "train", json!({})))
}

#[test]
fn a_gang_found_part_bound_at_restart_is_not_counted_as_a_new_job() {
    let (w0, w1) = half_bound_gang();
    let (mut w, metrics) = gang_world(&[w0, w1.clone()]);
    w.round(T0);
    let out = w.take_outputs();
    let bound = binds(&out);
    assert_eq!(bound.len(), 1);
    bind_ok(&mut w, &w1, &bound[0], 2, T0 + 1_000);
    w.round(T0 + 2_000);
    w.round(T0 + 4_000);
    // Submitted and placed before the restart: neither is counted again, so the gang is
    // not left "never placed".
    assert_eq!(metric(&metrics, "kant_jobs_submitted_total"), Some(0.0));
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(0.0));
}

/// A gang found half bound at a restart (the last leader stood down between its two
/// bindings) is completed, then a pod of higher priority needs one node's GPUs: the gang
/// goes whole, not the half found bound alone.
#[test]
fn a_gang_found_part_bound_at_restart_is_preempted_whole_once_complete() {
    let (w0, w1) = half_bound_gang();
    let mut w = sync(
        world(&preempting()),
        &[node("n1", 8), node("n2", 8)],
        &[w0, w1.clone()],
    );
    let group = Input::PodGroup(Box::new(Event::Apply(pod_group("train", 2))));
    w.apply(group, T0);
    w.round(T0);
    let bound = binds(&w.take_outputs());
    assert_eq!(bound.len(), 1, "the other half is bound");
    bind_ok(&mut w, &w1, &bound[0], 2, T0 + 1);
    w.round(T0 + 2);
    w.take_outputs();
    assert_eq!(evicted_for_a_node(&mut w, T0 + 3), ["w0", "w1"]);
}

/// The pods evicted, by name, sorted, for a pod of priority 100 that needs a whole node of
/// 8 GPUs, submitted at `now`.
fn evicted_for_a_node(w: &mut World, now: u64) -> Vec<String> {
    apply_pod(w, &with_priority("high", 8, 100), now);
    w.round(now);
    let mut evicted: Vec<String> = (evictions(&w.take_outputs()).into_iter())
        .map(|(_, _, name)| name)
        .collect();
    evicted.sort();
    evicted
}

/// Members of the gang's PodGroup that kant did not place, or found on their way out,
/// are not merged into it once it binds: another scheduler's pod is never kant's victim,
/// and one terminating holds its devices as no one's job until it is gone.
#[test]
fn a_gang_is_not_merged_with_pods_of_its_group_it_does_not_run() {
    let foreign = json!({"spec": {"nodeName": "n1", "schedulerName": "default-scheduler"}});
    let terminating = json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:20Z"},
                             "spec": {"nodeName": "n1"}});
    for (extra, min_member) in [(foreign, 3), (terminating, 2)] {
        let mut found = json!({"metadata": {"annotations": {"kant.io/gpu-ids": "0,1,2,3,4,5,6,7"}},
                               "status": {"phase": "Running"}});
        merge(&mut found, extra);
        let f = member("f", 8, "train", found);
        let pods = ["w0", "w1"].map(|name| member(name, 8, "train", json!({})));
        let mut w = sync(
            world(&preempting()),
            &[node("n1", 8), node("n2", 8), node("n3", 8)],
            &[f, pods[0].clone(), pods[1].clone()],
        );
        let group = pod_group("train", min_member);
        w.apply(Input::PodGroup(Box::new(Event::Apply(group))), T0);
        w.round(T0);
        let bound = binds(&w.take_outputs());
        assert_eq!(bound.len(), 2);
        for b in &bound {
            let pod = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&b.name));
            bind_ok(&mut w, pod.unwrap(), b, 2, T0 + 1);
        }
        w.round(T0 + 2);
        w.take_outputs();
        let evicted = evicted_for_a_node(&mut w, T0 + 3);
        assert_eq!(evicted, ["w0", "w1"], "min member {min_member}");
    }
}

#[test]
fn a_gang_whose_pods_are_made_again_for_its_pod_group_stays_one_job() {
    let (mut w, metrics) = gang_world(&[]);
    let gang = |suffix: &str| {
        ["w0", "w1"].map(|name| {
            member(
                name,
                8,
                "train",
                json!({"metadata": {"uid": format!("{name}-{suffix}")}}),
            )
        })
    };
    let run = |w: &mut World, pods: &[Pod], now: u64| {
        for pod in pods {
            apply_pod(w, pod, now);
        }
        w.round(now);
        let out = w.take_outputs();
        let bound: Vec<Pod> = binds(&out)
            .iter()
            .map(|b| {
                let pod = pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(&b.name));
                bind_ok(w, pod.unwrap(), b, 2, now)
            })
            .collect();
        assert_eq!(bound.len(), 2);
        w.round(now);
        bound
    };
    let first = run(&mut w, &gang("a"), T0);
    // Preempted, say: its pods are deleted, and its operator makes them again.
    for pod in &first {
        delete_pod(&mut w, pod, T0 + 5_000);
    }
    w.round(T0 + 5_000);
    run(&mut w, &gang("b"), T0 + 6_000);
    w.round(T0 + 8_000);
    assert_eq!(metric(&metrics, "kant_jobs_submitted_total"), Some(1.0));
    assert_eq!(metric(&metrics, "kant_jobs_placed_total"), Some(1.0));
    assert_eq!(
        metric(&metrics, "kant_job_wait_seconds_count{size=\"9-64\"}"),
        Some(1.0)
    );
    // Its PodGroup deleted with no pod left: a gang made again under its name is new.
    for pod in &gang("b") {
        delete_pod(&mut w, pod, T0 + 9_000);
    }
    let deleted = Input::PodGroup(Box::new(Event::Delete(pod_group("train", 2))));
    w.apply(deleted, T0 + 9_000);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("train", 2)))),
        T0 + 9_000,
    );
    run(&mut w, &gang("c"), T0 + 10_000);
    w.round(T0 + 12_000);
    assert_eq!(metric(&metrics, "kant_jobs_submitted_total"), Some(2.0));
}

/// A world of the embedded default profile as configured (backfill, with backfill
/// preemption), its heads overdue after a minute, no minimum runtime.
fn backfilling_world(
    nodes: &[k8s_openapi::api::core::v1::Node],
) -> (World, std::sync::Arc<kant::metrics::live::LiveMetrics>) {
    let mut config = plain();
    config.queueing.backfill_threshold = 60_000;
    config.queueing.min_runtime = 0;
    let profile = config.profile("default").unwrap().clone();
    let profile = kant::plugins::build_profile(&profile, &config).unwrap();
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let world = World::new(WorldOptions::default(), &config, profile, metrics.clone());
    (sync(world.unwrap(), nodes, &[]), metrics)
}

/// Submits `pod` at `now` and binds it where it is placed, if it is.
fn bind_if_placed(w: &mut World, pod: &Pod, now: u64) -> Option<Pod> {
    apply_pod(w, pod, now);
    w.round(now);
    let bound = binds(&w.take_outputs());
    let bound = bound.first().map(|b| bind_ok(w, pod, b, 2, now));
    w.round(now);
    w.take_outputs();
    bound
}

/// A job evicted as backfilled comes back as new pods, which its controller makes: a
/// lone pod's ReplicaSet, or an operator for the PodGroup the pod names (of `minMember`
/// 1, a sibling member running elsewhere). Those form a new job, which a later head,
/// blocked as it goes past, does not evict as backfilled again, as in the simulator:
/// also when it comes apart and forms again while it waits. A pod of another controller
/// in its place is evicted.
#[test]
fn a_backfill_victim_made_again_by_its_controller_is_not_evicted_as_backfilled_again() {
    // Each pod created `s` seconds after T0, as it is submitted: the queue orders by it.
    let created = |s: u32| {
        let (m, s) = (13 + (20 + s) / 60, (20 + s) % 60);
        json!({"metadata": {"creationTimestamp": format!("2023-11-14T22:{m}:{s:02}Z")}})
    };
    let owned_by = |owner: &'static str| {
        move |name: &str, s: u32| {
            let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                               "uid": owner, "controller": true});
            let mut extra = created(s);
            merge(
                &mut extra,
                json!({"metadata": {"ownerReferences": [owner]}}),
            );
            pod(name, 4, extra)
        }
    };
    let grouped = |name: &str, s: u32| member(name, 4, "web", created(s));
    let web = owned_by("rs-web");
    let other = owned_by("rs-other");
    for (how, sibling, returning, evicted_again) in [
        (
            "its controller",
            &web as &dyn Fn(&str, u32) -> Pod,
            &web as &dyn Fn(&str, u32) -> Pod,
            false,
        ),
        ("its PodGroup", &grouped, &grouped, false),
        ("another controller", &web, &other, true),
    ] {
        let (mut w, metrics) = backfilling_world(&[node("n0", 4)]);
        w.apply(
            Input::PodGroup(Box::new(Event::Apply(pod_group("web", 1)))),
            T0,
        );
        place(&mut w, &sibling("sibling", 0), T0);
        apply_node(&mut w, &node("n1", 8), T0);
        // A head of 8 GPUs blocks behind a job of 4; the victim, of 4, goes past it.
        let first = place(&mut w, &pod("first", 4, created(0)), T0);
        assert!(bind_if_placed(&mut w, &pod("head", 8, created(1)), T0 + 1_000).is_none());
        let victim = bind_if_placed(&mut w, &sibling("victim", 2), T0 + 2_000).unwrap();
        delete_pod(&mut w, &first, T0 + 3_000);
        let out = run_until(&mut w, T0 + 3_000, T0 + 70_000);
        let evicted = evictions(&out);
        assert_eq!(
            evicted.len(),
            1,
            "{how}: the overdue head evicts the victim"
        );
        let (job, pod_index, name) = evicted[0].clone();
        assert_eq!(name, "victim");
        let outcome = Ok(());
        w.apply(
            Input::Evicted {
                job,
                pod: pod_index,
                outcome,
            },
            T0 + 70_001,
        );
        delete_pod(&mut w, &victim, T0 + 70_002);
        w.round(T0 + 70_002);
        let head = binds(&w.take_outputs());
        assert_eq!(head.len(), 1, "{how}: the head goes where the victim was");
        bind_ok(
            &mut w,
            &pod("head", 8, created(1)),
            &head[0],
            2,
            T0 + 70_003,
        );

        // A second head blocks; the victim, made again under a new uid, waits behind it,
        // and forms again (a label added). On a second node, half taken, it goes past
        // the head.
        let second = pod("second", 4, created(80));
        apply_pod(&mut w, &second, T0 + 80_000);
        apply_pod(&mut w, &pod("head-2", 8, created(81)), T0 + 81_000);
        let mut back = returning("victim-2", 82);
        back.metadata.uid = Some("uid-victim-again".into());
        apply_pod(&mut w, &back, T0 + 82_000);
        w.round(T0 + 82_000);
        back.metadata.resource_version = Some("3".into());
        back.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("app".into(), "web".into());
        apply_pod(&mut w, &back, T0 + 82_500);
        w.round(T0 + 82_500);
        assert_eq!(binds(&w.take_outputs()).len(), 0);
        apply_node(&mut w, &node("n2", 8), T0 + 83_000);
        w.round(T0 + 83_000);
        let placed = binds(&w.take_outputs());
        let mut names: Vec<&str> = placed.iter().map(|b| b.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["second", "victim-2"], "{how}");
        for bind in &placed {
            let pod = if bind.name == "second" {
                &second
            } else {
                &back
            };
            bind_ok(&mut w, pod, bind, 4, T0 + 83_001);
        }
        delete_pod(&mut w, &second, T0 + 84_000);
        let out = run_until(&mut w, T0 + 84_000, T0 + 200_000);
        let evicted: Vec<String> = evictions(&out).into_iter().map(|(_, _, n)| n).collect();
        let expected: &[&str] = if evicted_again { &["victim-2"] } else { &[] };
        assert_eq!(evicted, expected, "{how}");
        // Owed at each eviction and as the returned job forms again; taken as it forms.
        let returns = |outcome: &str| {
            metric(
                &metrics,
                &format!("kant_backfill_returns_total{{outcome=\"{outcome}\"}}"),
            )
        };
        let taken = (!evicted_again).then_some(2.0);
        assert_eq!(
            (returns("owed"), returns("taken")),
            (Some(2.0), taken),
            "{how}"
        );
    }
}

/// A victim of priority preemption comes back as a new pod its ReplicaSet makes: the live
/// metrics count its wait to run again from the eviction's decision to the new pod's
/// binding, under its kind, as the simulator counts a victim's. Its return is not exempt
/// from backfill eviction, and a pod of no controller evicted brings nothing back.
#[test]
fn a_priority_victims_wait_to_run_again_is_measured_from_its_eviction() {
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let w = world_reporting(&preempting(), WorldOptions::default(), metrics.clone());
    let mut w = sync(w, &[node("n1", 8), node("n2", 8)], &[]);
    let owned = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
        "kind": "ReplicaSet", "name": "rs-low", "uid": "rs-low", "controller": true}]},
        "spec": {"priority": 0}});
    let low = place(&mut w, &pod("low", 8, owned.clone()), T0);
    let lone = place(&mut w, &with_priority("lone", 8, 0), T0);
    let mut highs = Vec::new();
    let mut low_evicted_at = 0;
    for (i, at) in [(0, T0 + 10_000), (1, T0 + 20_000)] {
        apply_pod(&mut w, &with_priority(&format!("high-{i}"), 8, 100), at);
        w.round(at);
        let out = w.take_outputs();
        let evicted = evictions(&out);
        assert_eq!(evicted.len(), 1, "{out:?}");
        let (job, pod, name) = evicted[0].clone();
        w.apply(
            Input::Evicted {
                job,
                pod,
                outcome: Ok(()),
            },
            at + 1,
        );
        if name == "low" {
            low_evicted_at = at;
        }
        delete_pod(&mut w, if name == "low" { &low } else { &lone }, at + 2);
        w.round(at + 2);
        let out = w.take_outputs();
        let bound = binds(&out);
        assert_eq!(bound.len(), 1, "{out:?}");
        let high = with_priority(&format!("high-{i}"), 8, 100);
        highs.push(bind_ok(&mut w, &high, &bound[0], 2, at + 3));
    }
    // The ReplicaSet makes the victim again; it waits until a high pod goes.
    let again = pod("low-again", 8, owned);
    apply_pod(&mut w, &again, T0 + 30_000);
    w.round(T0 + 30_000);
    assert!(binds(&w.take_outputs()).is_empty());
    delete_pod(&mut w, &highs[0], T0 + 100_000);
    w.round(T0 + 100_000);
    let out = w.take_outputs();
    let bound = binds(&out);
    assert_eq!(bound.len(), 1, "{out:?}");
    bind_ok(&mut w, &again, &bound[0], 2, T0 + 100_001);
    let series = |kind: &str, part: &str| {
        metric(
            &metrics,
            &format!("kant_victim_wait_again_seconds_{part}{{kind=\"{kind}\"}}"),
        )
    };
    assert_eq!(
        series("priority", "count"),
        Some(1.0),
        "the lone pod never comes back"
    );
    assert_eq!(
        series("priority", "sum"),
        Some((T0 + 100_001 - low_evicted_at) as f64 / 1000.0)
    );
    for kind in ["quota-reclaim", "backfill"] {
        assert_eq!(series(kind, "count"), Some(0.0), "{kind}");
    }
    assert_eq!(
        metric(&metrics, "kant_backfill_returns_total{outcome=\"owed\"}"),
        None,
        "a priority victim's return is not exempt from backfill eviction"
    );
    assert!(!w.scheduler().is_exempt_from_backfill_eviction(bound[0].job));
}

#[test]
fn a_gang_bound_in_two_goes_is_running_and_placed_once_whole() {
    let (mut w, metrics) = gang_world(&[]);
    let pods = ["w0", "w1"].map(|name| member(name, 8, "train", json!({})));
    for pod in &pods {
        apply_pod(&mut w, pod, T0);
    }
    w.round(T0);
    let out = w.take_outputs();
    let bound = binds(&out);
    assert_eq!(bound.len(), 2);
    let pod_of = |name: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    };
    bind_ok(
        &mut w,
        pod_of(&bound[0].name).unwrap(),
        &bound[0],
        2,
        T0 + 10,
    );
    answer(&mut w, &bound[1], refused(Some(409), "conflict"), T0 + 10);
    w.round(T0 + 10);
    // One member runs, the other waits out its backoff: the gang is not whole.
    assert_eq!(metric(&metrics, "kant_gpus_running_milli"), Some(0.0));
    let out = run_until(&mut w, T0 + 10, T0 + 20_000);
    let rebound = binds(&out);
    assert_eq!(rebound.len(), 1);
    bind_ok(
        &mut w,
        pod_of(&rebound[0].name).unwrap(),
        &rebound[0],
        3,
        T0 + 20_000,
    );
    w.round(T0 + 21_000);
    w.round(T0 + 23_000);
    assert_eq!(metric(&metrics, "kant_gpus_running_milli"), Some(16_000.0));
    // One wait, for the whole 16-GPU gang, over its two nodes.
    assert_eq!(
        metric(&metrics, "kant_job_wait_seconds_count{size=\"9-64\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&metrics, "kant_job_wait_seconds_count{size=\"2-8\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(&metrics, "kant_jtted_node_deviation{size=\"9-64\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&metrics, "kant_jobs_never_placed"), Some(0.0));
}

/// A pod's Queue is deleted while its binding is in flight, and the binding fails: the
/// pod waits for its Queue again, as a pod naming a Queue that does not exist does, rather
/// than be bound under the default tenant, which took the job in meanwhile.
#[test]
fn a_job_whose_queue_went_during_its_binding_waits_for_it_again() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    w.apply(Input::Queue(Box::new(Event::Apply(queue("team-a", 8)))), T0);
    let p = pod(
        "p",
        2,
        json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}}),
    );
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    w.apply(
        Input::Queue(Box::new(Event::Delete(queue("team-a", 8)))),
        T0 + 1,
    );
    w.round(T0 + 1);
    w.take_outputs();
    answer(&mut w, &b[0], refused(Some(500), "internal error"), T0 + 20);
    let out = run_until(&mut w, T0 + 20, T0 + 600_000);
    assert!(binds(&out).is_empty(), "bound without its Queue: {out:?}");
    w.apply(
        Input::Queue(Box::new(Event::Apply(queue("team-a", 8)))),
        T0 + 600_001,
    );
    let out = run_until(&mut w, T0 + 600_001, T0 + 610_000);
    assert_eq!(binds(&out).len(), 1, "{out:?}");
}

#[test]
fn a_gang_member_of_another_queue_is_told_whose_queue_is_charged() {
    let (mut w, _) = gang_world(&[]);
    for name in ["team-a", "team-b"] {
        w.apply(Input::Queue(Box::new(Event::Apply(queue(name, 8)))), T0);
    }
    let in_queue = |name: &str, gpus, queue: &str| {
        member(
            name,
            gpus,
            "train",
            json!({"metadata": {"labels": {"kant.io/queue": queue}}}),
        )
    };
    apply_pod(&mut w, &in_queue("w0", 8, "team-a"), T0);
    apply_pod(&mut w, &in_queue("w1", 4, "team-b"), T0);
    w.round(T0 + 1_000);
    let out = w.take_outputs();
    assert_eq!(binds(&out).len(), 2);
    let told: Vec<(&str, &str)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Event {
                target,
                reason: "QueueDiffers",
                message,
                ..
            } => Some((target.name.as_str(), message.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, "w1");
    assert!(told[0].1.contains("Queue of ml/w0"), "{}", told[0].1);
}

/// A PodGroup with a negative `minMember` is read as one of 1 (each member on its own,
/// as coscheduling reads it), and told so on the PodGroup, once per value.
#[test]
fn a_negative_min_member_is_read_as_one_and_told_on_the_pod_group() {
    let (mut w, _) = gang_world(&[]);
    let negative = |min| Input::PodGroup(Box::new(Event::Apply(pod_group("train", min))));
    w.apply(negative(-2), T0);
    apply_pod(&mut w, &member("w0", 8, "train", json!({})), T0);
    w.round(T0);
    let told = |out: &[Output]| -> Vec<(EventKind, String, String)> {
        (out.iter())
            .filter_map(|o| match o {
                Output::Event {
                    target,
                    reason: "InvalidMinMember",
                    message,
                    ..
                } => Some((target.kind, target.to_string(), message.clone())),
                _ => None,
            })
            .collect()
    };
    let out = w.take_outputs();
    assert_eq!(bindings(&out).len(), 1, "a member alone is a gang of 1");
    assert_eq!(
        told(&out),
        [(
            EventKind::PodGroup,
            "PodGroup ml/train".into(),
            "spec.minMember is -2, below 1: kant reads it as 1, each member scheduled on its \
             own"
            .into()
        )]
    );
    apply_pod(&mut w, &member("w1", 8, "train", json!({})), T0 + 1);
    w.round(T0 + 1);
    assert!(told(&w.take_outputs()).is_empty(), "told once");
    w.apply(negative(-3), T0 + 2);
    apply_pod(&mut w, &member("w2", 1, "train", json!({})), T0 + 2);
    w.round(T0 + 2);
    assert_eq!(told(&w.take_outputs()).len(), 1, "a new value is told");
}

/// A gang short of members because one is malformed tells the others that members are
/// held back, whichever came first (in words that stay the same as members come and go).
#[test]
fn a_gang_stalled_by_a_malformed_member_says_members_are_held() {
    let malformed = member(
        "w1",
        1,
        "train",
        json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "1.5"}}}),
    );
    for malformed_first in [false, true] {
        let (mut w, _) = gang_world(&[]);
        let good = member("w0", 8, "train", json!({}));
        let arrivals = if malformed_first {
            [&malformed, &good]
        } else {
            [&good, &malformed]
        };
        for (i, pod) in arrivals.into_iter().enumerate() {
            apply_pod(&mut w, pod, T0 + i as u64);
            w.round(T0 + i as u64);
        }
        let out = run_until(&mut w, T0 + 2, T0 + 1_000);
        let w0: Vec<String> = (messages(&out).into_iter())
            .filter(|m| m.starts_with("w0: "))
            .collect();
        assert_eq!(
            w0.last().expect("w0 told why it waits"),
            "w0: pod group ml/train: fewer than the 2 pods needed to start are waiting; other \
             members are held back (scheduling gates, a malformed pod, an unknown Queue or a \
             volume): their own conditions say why",
        );
    }
}

/// Gang members that set another topology need or workload kind than the template member
/// are told that the template's apply (or that it sets none); a member naming a priority
/// class below another member's, that the gang's (the highest) applies. A launcher setting
/// none of these is not told.
#[test]
fn gang_members_differing_in_topology_workload_or_priority_are_told() {
    let (mut w, _) = gang_world(&[]);
    let group = Input::PodGroup(Box::new(Event::Apply(pod_group("train", 4))));
    w.apply(group, T0);
    let asking = |name: &str, gpus, topology: &str, workload: Option<&str>, class, priority| {
        let labels = match workload {
            Some(workload) => json!({"kant.io/workload": workload}),
            None => json!({}),
        };
        let extra = json!({"metadata": {"labels": labels,
                                        "annotations": {"kant.io/topology": topology}},
                           "spec": {"priority": priority, "priorityClassName": class}});
        member(name, gpus, "train", extra)
    };
    let w0 = asking("w0", 8, "preferred:leaf", Some("train"), "high", 100);
    let w1 = asking("w1", 4, "preferred:spine", Some("inference"), "low", 0);
    // The template sets a workload, w2 none; w2 sets another topology need.
    let w2 = asking("w2", 2, "preferred:hbd", None, "high", 100);
    for pod in [&w0, &w1, &w2] {
        apply_pod(&mut w, pod, T0);
    }
    apply_pod(&mut w, &member("launcher", 0, "train", json!({})), T0);
    w.round(T0 + 1_000);
    let out = w.take_outputs();
    assert_eq!(binds(&out).len(), 4);
    let mut told: Vec<(&str, &str, &str)> = (out.iter())
        .filter_map(|o| match o {
            Output::Event {
                target,
                reason,
                message,
                ..
            } if reason.ends_with("Differs") => {
                Some((target.name.as_str(), *reason, message.as_str()))
            }
            _ => None,
        })
        .collect();
    told.sort();
    let reasons: Vec<(&str, &str)> = told.iter().map(|(n, r, _)| (*n, *r)).collect();
    assert_eq!(
        reasons,
        [
            ("w1", "PriorityDiffers"),
            ("w1", "TopologyDiffers"),
            ("w1", "WorkloadDiffers"),
            ("w2", "TopologyDiffers"),
        ]
    );
    assert_eq!(
        told[0].2,
        "the pods of pod group ml/train differ in priority; kant schedules them all, and \
         preempts for them, at the highest, 100 of ml/w0"
    );
    assert_eq!(
        told[1].2,
        "the pods of pod group ml/train differ in their kant.io/topology; kant places them all \
         by the topology need of ml/w0, the member asking for the most GPUs"
    );
    assert_eq!(
        told[2].2,
        "the pods of pod group ml/train differ in their kant.io/workload; kant schedules them \
         all as the workload of ml/w0, the member asking for the most GPUs"
    );
}

/// A kubelet restarting before its device plugin registers again lists no GPU on its node
/// for a moment. A binding in flight there keeps its devices meanwhile, on every replica
/// (the node's GPU model is unknown while it lists none): dropped, they were given to the
/// next pod, and the first binding landed on the same GPUs.
#[test]
fn a_binding_in_flight_keeps_its_devices_across_its_nodes_capacity_blip() {
    for options in [WorldOptions::default(), h100_shard()] {
        let mut world = sync(world_with(&plain(), options), &[node("n1", 8)], &[]);
        let h100 = json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}});
        let first = pod("first", 8, h100.clone());
        apply_pod(&mut world, &first, T0);
        world.round(T0);
        let sent = binds(&world.take_outputs());
        assert_eq!(sent.len(), 1);
        apply_node(&mut world, &node("n1", 0), T0 + 10);
        world.round(T0 + 10);
        world.take_outputs();
        apply_node(&mut world, &node("n1", 8), T0 + 20);
        apply_pod(&mut world, &pod("second", 4, h100), T0 + 20);
        let out = run_until(&mut world, T0 + 20, T0 + 30_000);
        assert!(
            binds(&out).is_empty(),
            "the first pod's devices were given again: {:?}",
            bindings(&out)
        );
        // The first binding lands: the node is full, and stays so.
        bind_ok(&mut world, &first, &sent[0], 5, T0 + 30_001);
        let out = run_until(&mut world, T0 + 30_001, T0 + 60_000);
        assert!(binds(&out).is_empty(), "{:?}", bindings(&out));
        assert_eq!(free_gpus(&world), 0);
    }
}

/// A node that comes to list fewer GPUs keeps the devices its pods hold beyond them, and
/// offers what its listing leaves free; once those pods are gone it has what it lists.
/// GPU feature discovery drops its labels for a minute when it restarts
/// (NVIDIA/k8s-device-plugin#796): a node then lists GPUs of no model, an invalid
/// description. The node is kept on its last valid facts while pods are placed there: a
/// binding in flight keeps its devices, a running pod its tenant's quota, and no new pod
/// lands there until the label is back.
#[test]
fn a_node_invalid_for_a_moment_keeps_what_its_pods_hold() {
    let without_product = |name: &str| {
        node_with(
            name,
            8,
            json!({"metadata": {"labels": {"nvidia.com/gpu.product": null}}}),
        )
    };
    let mut world = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let mut isolated = queue("team-a", 12);
    isolated.spec.mode = kant::kube::crd::QueueMode::Isolated;
    world.apply(Input::Queue(Box::new(Event::Apply(isolated))), T0);
    let labelled = |name: &str, gpus: u32| {
        let label = json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}});
        pod(name, gpus, label)
    };
    let first = labelled("first", 8);
    apply_pod(&mut world, &first, T0);
    world.round(T0);
    let sent = binds(&world.take_outputs());
    assert_eq!(sent.len(), 1);
    let at = sent[0].node.clone();
    let other = if at == "n1" { "n2" } else { "n1" };
    apply_node(&mut world, &without_product(&at), T0 + 10);
    world.round(T0 + 10);
    world.take_outputs();
    assert_eq!(world.scheduler().state().total().used_milli, 8_000);
    // Within its quota of 12, team-a has 4 GPUs left; the other node takes them.
    apply_pod(&mut world, &labelled("second", 8), T0 + 20);
    apply_pod(&mut world, &labelled("third", 4), T0 + 20);
    let out = run_until(&mut world, T0 + 20, T0 + 1_000);
    let placed: Vec<(String, String)> = (bindings(&out).into_iter())
        .map(|(pod, node, _)| (pod, node))
        .collect();
    assert_eq!(placed, [("third".into(), other.into())]);
    // The label comes back; the first binding lands: its node is full.
    apply_node(&mut world, &node(&at, 8), T0 + 60_000);
    bind_ok(&mut world, &first, &sent[0], 5, T0 + 60_001);
    let out = run_until(&mut world, T0 + 60_001, T0 + 90_000);
    assert!(binds(&out).is_empty(), "{:?}", bindings(&out));
    assert_eq!(world.scheduler().state().total().used_milli, 12_000);
}

/// The events on nodes in `out`: (node, reason, message).
fn node_events(out: &[Output]) -> Vec<(String, &'static str, String)> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Event {
                target,
                reason,
                message,
                ..
            } if target.kind == EventKind::Node => {
                Some((target.name.clone(), *reason, message.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A node Kant refuses is told with a Warning event on the node, once per reason, by the
/// leader (a standby keeps it to tell once it leads) of the shard of the model its label
/// names (else the default shard), and a pod that finds no node counts it among the nodes,
/// as kube-scheduler would.
#[test]
fn a_refused_node_is_told_on_the_node_and_counted_in_a_pods_reason() {
    let unlabelled = |name: &str| {
        let unlabel = json!({"metadata": {"labels": {"nvidia.com/gpu.product": null}}});
        node_with(name, 8, unlabel)
    };
    let bad_layout = |name: &str, stamp: &str| {
        let layout = json!({"metadata": {
            "annotations": {"kant.io/gpu-topology": "nvlink-rings"},
            "labels": {"nvidia.com/gfd.timestamp": stamp}}});
        node_with(name, 8, layout)
    };
    let nodes = [node("n1", 8), unlabelled("n2"), bad_layout("n3", "1")];
    // Synced while a standby: nothing is written until a round, as leader.
    let mut w = synced(&plain(), &nodes);
    assert!(node_events(&w.take_outputs()).is_empty());
    w.round(T0);
    let told = node_events(&w.take_outputs());
    let reasons: Vec<(&str, &str)> = (told.iter()).map(|(n, r, _)| (n.as_str(), *r)).collect();
    assert_eq!(
        reasons,
        [("n2", "InvalidNode"), ("n3", "InvalidGpuAnnotation")],
        "{told:?}"
    );
    assert!(
        told[0].2.contains("nvidia.com/gpu.product"),
        "{}",
        told[0].2
    );
    assert!(told[1].2.contains("nvlink-rings"), "{}", told[1].2);
    // Listed again unchanged (a heartbeat), or with a label of no concern changed, they
    // are not told again.
    apply_node(&mut w, &unlabelled("n2"), T0 + 1);
    apply_node(&mut w, &bad_layout("n3", "2"), T0 + 1);
    w.round(T0 + 1);
    assert!(node_events(&w.take_outputs()).is_empty());
    // Taking the lead again (it lost it meanwhile), it tells them again: the leader
    // between may not have.
    w.took_the_lead(false);
    w.round(T0 + 1);
    assert_eq!(node_events(&w.take_outputs()).len(), 2);
    // n1 is the one node with GPUs to give: the second pod waits, and says why.
    apply_pod(&mut w, &pod("first", 8, json!({})), T0 + 2);
    apply_pod(&mut w, &pod("second", 8, json!({})), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 2_000);
    assert_eq!(bindings(&out).len(), 1);
    let waiting = messages(&out);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(
        waiting[0].ends_with(
            ": 0/3 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) had an \
             invalid description (see the node's events)."
        ),
        "{waiting:?}"
    );
    // Fixed, then broken again the same way: told again. Deleted and created anew under
    // its name (a new uid), as a relist shows it: told again.
    apply_node(&mut w, &node("n2", 8), T0 + 3_000);
    w.round(T0 + 3_000);
    apply_node(&mut w, &unlabelled("n2"), T0 + 3_001);
    let mut anew = bad_layout("n3", "3");
    anew.metadata.uid = Some("uid-n3-again".into());
    apply_node(&mut w, &anew, T0 + 3_001);
    w.round(T0 + 3_001);
    let told: Vec<String> = (node_events(&w.take_outputs()).into_iter())
        .map(|(n, _, _)| n)
        .collect();
    assert_eq!(told, ["n2", "n3"]);
    // Of the shards, the H100 one tells of the node labelled H100, and the default one
    // of the node labelled none.
    let shards = [
        (h100_shard(), vec!["n3"]),
        (shard_of("A100"), vec![]),
        (
            WorldOptions {
                default_shard: true,
                ..shard_of("A100")
            },
            vec!["n2"],
        ),
    ];
    for (options, expected) in shards {
        let mut w = sync(world_with(&plain(), options.clone()), &nodes, &[]);
        w.round(T0);
        let told: Vec<String> = (node_events(&w.take_outputs()).into_iter())
            .map(|(n, _, _)| n)
            .collect();
        assert_eq!(told, expected, "{options:?}");
    }
}

/// A node with a spine label and no leaf label is usable, in no leaf group, and told
/// why its spine counts for nothing (a trace refuses such a node).
#[test]
fn a_spine_without_a_leaf_is_told_on_a_usable_node() {
    let spine_alone = node_with(
        "n1",
        8,
        json!({"metadata": {"labels": {"kant.io/spine": "s1"}}}),
    );
    let mut w = synced(&plain(), &[spine_alone]);
    apply_pod(&mut w, &pod("p", 8, json!({})), T0);
    w.round(T0);
    let out = w.take_outputs();
    assert_eq!(bindings(&out).len(), 1);
    let told = node_events(&out);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!((told[0].0.as_str(), told[0].1), ("n1", "IneffectiveLabel"));
    assert!(
        told[0].2.contains(
            "node n1: metadata.labels[kant.io/spine]: set without metadata.labels[kant.io/leaf]"
        ),
        "{}",
        told[0].2
    );
}

/// A node invalid with no pod placed there leaves the cluster, and comes back usable once
/// its description is valid again.
#[test]
fn a_node_invalid_without_pods_leaves_and_comes_back() {
    let without_product = node_with(
        "n1",
        8,
        json!({"metadata": {"labels": {"nvidia.com/gpu.product": null}}}),
    );
    let mut world = synced(&plain(), &[node("n1", 8)]);
    apply_node(&mut world, &without_product, T0);
    world.round(T0);
    world.round(T0 + 1);
    assert_eq!(world.scheduler().state().spec().nodes.len(), 0);
    apply_node(&mut world, &node("n1", 8), T0 + 2);
    apply_pod(&mut world, &pod("p", 8, json!({})), T0 + 2);
    world.round(T0 + 2);
    assert_eq!(bindings(&world.take_outputs()).len(), 1);
}

#[test]
fn a_node_listing_fewer_gpus_keeps_those_its_pods_hold_until_they_go() {
    let held = pod(
        "held",
        2,
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "6,7"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut world = synced_with(&plain(), &[node("n1", 8)], std::slice::from_ref(&held));
    world.round(T0);
    assert_eq!(free_gpus(&world), 6);
    apply_node(&mut world, &node("n1", 6), T0 + 1_000);
    world.round(T0 + 1_000);
    let state = world.scheduler().state();
    assert_eq!(
        state
            .spec()
            .node(state.spec().node_id("n1").unwrap())
            .gpus(),
        8
    );
    assert_eq!(free_gpus(&world), 4, "six listed, two of them held");
    delete_pod(&mut world, &held, T0 + 2_000);
    world.round(T0 + 2_000);
    let state = world.scheduler().state();
    assert_eq!(
        state
            .spec()
            .node(state.spec().node_id("n1").unwrap())
            .gpus(),
        6
    );
    assert_eq!(free_gpus(&world), 6);
}

/// A node tainted `dedicated=ml:NoSchedule`.
fn tainted(name: &str) -> k8s_openapi::api::core::v1::Node {
    node_with(
        name,
        8,
        json!({"spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}}),
    )
}

/// A queued pod that waits on a taint gets a toleration (one may be added to a pending
/// pod): it is placed, as kube-scheduler places a pod whose update makes it fit.
#[test]
fn a_toleration_added_to_a_queued_pod_is_seen() {
    let mut world = synced(&plain(), &[tainted("n1")]);
    apply_pod(&mut world, &pod("p", 1, json!({})), T0);
    world.round(T0);
    assert!(binds(&world.take_outputs()).is_empty());
    let mut tolerating = pod(
        "p",
        1,
        json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}),
    );
    tolerating.metadata.resource_version = Some("2".into());
    apply_pod(&mut world, &tolerating, T0 + 1000);
    let out = run_until(&mut world, T0 + 1000, T0 + 600_000);
    assert_eq!(binds(&out).len(), 1, "{out:#?}");
}

/// A queued pod updated so that it no longer reads is told why.
#[test]
fn a_queued_pod_made_malformed_is_told_why() {
    let mut world = synced(&plain(), &[tainted("n1")]);
    apply_pod(&mut world, &pod("p", 1, json!({})), T0);
    world.round(T0);
    world.take_outputs();
    let mut bad = pod(
        "p",
        1,
        json!({"metadata": {"annotations": {"kant.io/topology": "bogus"}}}),
    );
    bad.metadata.resource_version = Some("2".into());
    apply_pod(&mut world, &bad, T0 + 1000);
    let out = run_until(&mut world, T0 + 1000, T0 + 60_000);
    let told = out.iter().any(|o| {
        matches!(o, Output::PodCondition { condition, .. }
            if condition.message.contains("kant.io/topology"))
    });
    assert!(told, "{out:#?}");
}

/// A gang member whose binding was refused waits out its backoff: an update to it (a
/// label a controller adds, say) does not end the wait.
#[test]
fn a_pod_update_does_not_end_a_gang_members_backoff() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("train", 2)))),
        T0,
    );
    let w0 = member("w0", 8, "train", json!({}));
    let w1 = member("w1", 8, "train", json!({}));
    apply_pod(&mut w, &w0, T0);
    apply_pod(&mut w, &w1, T0);
    w.round(T0);
    let sent = binds(&w.take_outputs());
    assert_eq!(sent.len(), 2);
    for bind in &sent {
        match bind.name.as_str() {
            "w0" => drop(bind_ok(&mut w, &w0, bind, 2, T0)),
            _ => answer(&mut w, bind, refused(Some(500), "boom"), T0),
        }
    }
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    let mut touched = member(
        "w1",
        8,
        "train",
        json!({"metadata": {"labels": {"x": "y"}}}),
    );
    touched.metadata.resource_version = Some("3".into());
    apply_pod(&mut w, &touched, T0 + 10);
    w.round(T0 + 10);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty(), "bound again at once: {out:#?}");
}

/// What makes a pod of `gpus` GPUs ask for host port 23456, as a `hostNetwork` worker
/// does (the API server defaults its host ports to its container ports).
fn asks_host_port(gpus: u32) -> Value {
    json!({"spec": {"hostNetwork": true, "containers": [{"name": "c",
        "ports": [{"containerPort": 23456, "hostPort": 23456, "protocol": "TCP"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

fn nodes_bound(w: &mut World) -> Vec<String> {
    binds(&w.take_outputs())
        .into_iter()
        .map(|b| b.node)
        .collect()
}

/// Two pods asking for one host port never share a node, as kube-scheduler's `NodePorts`
/// keeps them apart (the kubelet would refuse the second): not two lone pods, not two
/// members of a gang, not a pod beside one another scheduler bound there.
#[test]
fn pods_asking_for_one_host_port_take_different_nodes() {
    let nodes = [node("n1", 8), node("n2", 8)];
    let mut w = synced(&plain(), &nodes);
    apply_pod(&mut w, &pod("a", 4, asks_host_port(4)), T0);
    apply_pod(&mut w, &pod("b", 4, asks_host_port(4)), T0);
    w.round(T0);
    let placed = nodes_bound(&mut w);
    assert_eq!(placed.len(), 2);
    assert_ne!(placed[0], placed[1]);

    let mut w = synced(&plain(), &nodes);
    let group = pod_group("train", 2);
    w.apply(Input::PodGroup(Box::new(Event::Apply(group))), T0);
    apply_pod(&mut w, &member("w0", 4, "train", asks_host_port(4)), T0);
    apply_pod(&mut w, &member("w1", 4, "train", asks_host_port(4)), T0);
    w.round(T0);
    let placed = nodes_bound(&mut w);
    assert_eq!(placed.len(), 2);
    assert_ne!(placed[0], placed[1]);

    // Another scheduler's pod holds the port on n1: ours goes to n2, though n1 is fuller.
    let mut theirs = asks_host_port(4);
    common::kube::merge(
        &mut theirs,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1"},
               "status": {"phase": "Running"}}),
    );
    let mut w = synced_with(&plain(), &nodes, &[pod("theirs", 4, theirs)]);
    apply_pod(&mut w, &pod("ours", 4, asks_host_port(4)), T0);
    w.round(T0);
    assert_eq!(nodes_bound(&mut w), ["n2"]);
}

/// A pod asking for devices through dynamic resource allocation (`spec.resourceClaims`)
/// is told it cannot be scheduled here: bound with its claims never allocated, it would
/// never start.
#[test]
fn a_pod_with_resource_claims_is_told_dra_is_not_supported() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let dra = json!({"spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}});
    apply_pod(&mut w, &pod("dra", 0, dra), T0);
    w.round(T0);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty());
    let told = out.iter().any(|o| {
        matches!(o, Output::PodCondition { condition, .. }
            if condition.message.contains("spec.resourceClaims"))
    });
    assert!(told, "{out:#?}");
}
