//! The world driven directly with Kubernetes objects, no API server: what goes in, what
//! comes out.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::config::Config;
use crate::plugins::build_profile;

const T0: u64 = 1_700_000_000_000;

fn node(name: &str, gpus: u32) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100"}},
        "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "cpu": "64", "memory": "512Gi"}}
    }))
    .unwrap()
}

fn pod(name: &str, gpus: u32, extra: serde_json::Value) -> Pod {
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

fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (slot, value) => *slot = value,
    }
}

fn pod_group(name: &str, min_member: i32) -> PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"minMember": min_member}
    }))
    .unwrap()
}

fn queue(name: &str) -> Queue {
    serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"mode": "shared", "quota": {"H100": 8}}
    }))
    .unwrap()
}

fn world_with(profile: &str) -> World {
    let config = Config::embedded();
    let mut profile = config.profile(profile).unwrap().clone();
    profile.queueing = crate::queue::QueueingPolicy::BestEffortFifo;
    let profile = build_profile(&profile, &config).unwrap();
    World::new(
        WorldOptions::default(),
        &config,
        profile,
        Arc::new(LiveMetrics::new()),
    )
    .unwrap()
}

/// A world whose watches all listed: these nodes, no pods, groups or queues.
fn synced(nodes: &[Node]) -> World {
    let mut world = world_with("default");
    world.apply(Input::Node(Box::new(Event::Init)), T0);
    for n in nodes {
        world.apply(Input::Node(Box::new(Event::InitApply(n.clone()))), T0);
    }
    world.apply(Input::Node(Box::new(Event::InitDone)), T0);
    for input in [
        Input::Pod(Box::new(Event::Init)),
        Input::Pod(Box::new(Event::InitDone)),
        Input::PodGroup(Box::new(Event::Init)),
        Input::PodGroup(Box::new(Event::InitDone)),
        Input::Queue(Box::new(Event::Init)),
        Input::Queue(Box::new(Event::InitDone)),
    ] {
        world.apply(input, T0);
    }
    assert!(world.synced());
    world
}

fn binds(outputs: &[Output]) -> Vec<(String, String, String)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Bind {
                target,
                node,
                annotations,
                ..
            } => Some((
                target.name.clone(),
                node.clone(),
                annotations
                    .get("kant.io/gpu-ids")
                    .cloned()
                    .unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

fn answer_binds(world: &mut World, outputs: &[Output], ok: bool) {
    for output in outputs {
        if let Output::Bind { job, pod, .. } = output {
            let outcome = if ok {
                Ok(())
            } else {
                Err(WriteError {
                    code: Some(409),
                    message: "conflict".into(),
                })
            };
            world.apply(
                Input::Bound {
                    job: *job,
                    pod: *pod,
                    outcome,
                    latency: std::time::Duration::from_millis(1),
                },
                T0,
            );
        }
    }
}

fn messages(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::PodStatus {
                target,
                scheduled: Some(c),
                ..
            } => Some(format!("{}: {}", target.name, c.message)),
            _ => None,
        })
        .collect()
}

#[test]
fn nothing_is_placed_before_every_watch_listed() {
    let mut world = world_with("default");
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
    let mut world = synced(&[node("n1", 8)]);
    world.apply(
        Input::Pod(Box::new(Event::Apply(pod("p", 2, json!({}))))),
        T0,
    );
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(binds(&out), [("p".into(), "n1".into(), "0,1".into())]);
    answer_binds(&mut world, &out, true);
    world.round(T0);
    let out = world.take_outputs();
    assert!(out.iter().any(
        |o| matches!(o, Output::Event { reason: "Scheduled", message, .. }
        if message.contains("ml/p to n1 (GPUs 0,1)"))
    ));
    assert_eq!(world.scheduler().state().total().free_gpus, 6);
}

#[test]
fn a_gang_waits_for_its_members_then_binds_whole() {
    let mut world = synced(&[node("n1", 8), node("n2", 8)]);
    world.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("train", 2)))),
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
        ["w0: pod group ml/train: 1 of the 2 pods needed to start are waiting"]
    );
    world.apply(Input::Pod(Box::new(Event::Apply(member("w1")))), T0);
    world.round(T0);
    let out = world.take_outputs();
    let mut nodes: Vec<String> = binds(&out).into_iter().map(|b| b.1).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"]);
}

#[test]
fn pods_found_bound_keep_their_devices_across_a_restart() {
    let bound = pod(
        "old",
        2,
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "3,4"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut world = world_with("default");
    for input in [
        Input::Node(Box::new(Event::Init)),
        Input::Node(Box::new(Event::InitApply(node("n1", 8)))),
        Input::Node(Box::new(Event::InitDone)),
        Input::Pod(Box::new(Event::Init)),
        Input::Pod(Box::new(Event::InitApply(bound))),
        Input::Pod(Box::new(Event::InitApply(pod("new", 6, json!({}))))),
        Input::Pod(Box::new(Event::InitDone)),
        Input::PodGroup(Box::new(Event::Init)),
        Input::PodGroup(Box::new(Event::InitDone)),
        Input::Queue(Box::new(Event::Init)),
        Input::Queue(Box::new(Event::InitDone)),
    ] {
        world.apply(input, T0);
    }
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(
        binds(&out),
        [("new".into(), "n1".into(), "0,1,2,5,6,7".into())]
    );
}

#[test]
fn a_pod_of_an_unknown_queue_waits_until_the_queue_exists() {
    let mut world = synced(&[node("n1", 8)]);
    let labelled = pod(
        "p",
        1,
        json!({"metadata": {"labels": {"kant.io/queue": "team-a"}}}),
    );
    world.apply(Input::Pod(Box::new(Event::Apply(labelled))), T0);
    world.round(T0);
    let out = world.take_outputs();
    assert_eq!(messages(&out), ["p: queue team-a does not exist"]);
    assert!(binds(&out).is_empty());
    world.apply(Input::Queue(Box::new(Event::Apply(queue("team-a")))), T0);
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
    let mut world = synced(&[node("n1", 8)]);
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
    let mut world = synced(&[node("n1", 8)]);
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
    let mut world = synced(&[node("n1", 8)]);
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
    let mut world = synced(&[node("n1", 8), node("n2", 8)]);
    world.apply(Input::Node(Box::new(Event::Init)), T0);
    world.apply(Input::Node(Box::new(Event::InitApply(node("n2", 8)))), T0);
    world.apply(Input::Node(Box::new(Event::InitDone)), T0);
    world.round(T0);
    assert_eq!(world.scheduler().state().spec().nodes.len(), 1);
    assert_eq!(world.scheduler().state().total().free_gpus, 8);
}

#[test]
fn constraints_kant_does_not_enforce_are_told_once() {
    let mut world = synced(&[node("n1", 8)]);
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}});
    world.apply(Input::Pod(Box::new(Event::Apply(pod("p", 1, anti)))), T0);
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
        ["kant does not enforce spec.affinity.podAntiAffinity; the pod is scheduled without it"]
    );
    assert_eq!(binds(&out).len(), 1);
}
