//! The Kubernetes world where answers, watch events and changes cross: bind answers lost
//! or late, pods bound elsewhere, nodes that leave, join or change under running pods,
//! restart adoption in any order, preemption whose victims take time to go or refuse to,
//! gangs that lose members or change their minimum. Each test states what must hold
//! between the world and the API server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kant::kube::convert::GPU_IDS_ANNOTATION as GPU_IDS;
use kant::kube::world::{Input, Output, World};
use kube::runtime::watcher::Event;
use serde_json::json;

mod common;
use common::kube::*;

// ----------------------------------------------------------------------------------------
// Bind answers against watch events

/// The API server applied a binding but its answer was lost (a timeout): the watch shows
/// the pod bound on the planned node before the failed answer arrives. The pod runs
/// there; its devices must stay counted and it must not be bound again.
#[test]
fn a_binding_that_landed_but_whose_answer_was_lost_is_not_requeued() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let p = pod("p", 2, json!({}));
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    // The watch is faster than the client's timeout.
    apply_pod(
        &mut w,
        &landed(p.clone(), &b[0].node, &b[0].annotations, 2),
        T0 + 10,
    );
    answer(
        &mut w,
        &b[0],
        refused(None, "operation timed out"),
        T0 + 5_000,
    );
    w.round(T0 + 5_000);
    assert_eq!(free_gpus(&w), 6, "the pod runs on n1 with two GPUs");
    let out = run_until(&mut w, T0 + 5_000, T0 + 60_000);
    let again = binds(&out);
    assert!(again.is_empty(), "a bound pod is bound again: {again:?}");
    assert_eq!(free_gpus(&w), 6, "the pod runs on n1 with two GPUs");
}

/// Someone else (another replica, a user) bound the pod to another node while our
/// binding was in flight: the watch shows it there, then our binding is refused with 409.
/// The pod is adopted where it is; its old job must not stay queued and bind it again.
#[test]
fn a_pod_bound_elsewhere_during_its_binding_is_not_bound_again() {
    let mut w = on_nodes(2);
    let p = pod("p", 2, json!({}));
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    let elsewhere = if b[0].node == "n1" { "n2" } else { "n1" };
    apply_pod(
        &mut w,
        &landed(p.clone(), elsewhere, &BTreeMap::new(), 2),
        T0 + 10,
    );
    answer(
        &mut w,
        &b[0],
        refused(Some(409), "pod p is already assigned to node"),
        T0 + 20,
    );
    let out = run_until(&mut w, T0 + 20, T0 + 60_000);
    let again = binds(&out);
    assert!(again.is_empty(), "a bound pod is bound again: {again:?}");
    assert_eq!(free_gpus(&w), 14, "only the pod's own two GPUs are used");
}

/// A binding of `p` that timed out and was taken as failed: while `p` backs off, `q` is
/// placed on the devices that binding named, and `p` is planned again on others. Returns
/// `p`, `q` as bound, and `p`'s first and second bindings (the second not yet answered).
fn a_late_binding_on_qs_devices(w: &mut World) -> (Pod, Pod, Bind, Bind) {
    let p = pod("p", 2, json!({}));
    apply_pod(w, &p, T0);
    w.round(T0);
    let first = binds(&w.take_outputs()).remove(0);
    answer(w, &first, refused(None, "operation timed out"), T0 + 1);
    let q = place(w, &pod("q", 2, json!({})), T0 + 2);
    assert_eq!(
        q.metadata.annotations.as_ref().unwrap().get(GPU_IDS),
        first.annotations.get(GPU_IDS)
    );
    let out = run_until(w, T0 + 3, T0 + 60_000);
    let second = binds(&out).remove(0);
    assert_ne!(
        second.annotations.get(GPU_IDS),
        first.annotations.get(GPU_IDS)
    );
    (p, q, first, second)
}

/// `p`'s first binding lands after all, naming the devices it names, and its second
/// binding is refused.
fn the_first_binding_lands(w: &mut World, p: &Pod, first: &Bind, second: &Bind, now: u64) {
    apply_pod(
        w,
        &landed(p.clone(), &first.node, &first.annotations, 3),
        now,
    );
    answer(
        w,
        second,
        refused(Some(409), "pod p is already assigned to node n1"),
        now + 1,
    );
    w.round(now + 1);
}

/// A binding that timed out and was taken as failed lands after all, late, once the pod
/// was planned again on the same node with other devices (the first ones were taken in
/// between). The pod runs on the devices its first binding named: those must be counted
/// as its own, and the devices of the second plan given to the next pod.
#[test]
fn a_late_binding_with_other_devices_counts_the_devices_it_names() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let (p, q, first, second) = a_late_binding_on_qs_devices(&mut w);
    // q leaves; then p's first binding lands, naming q's old devices.
    delete_pod(&mut w, &q, T0 + 60_001);
    the_first_binding_lands(&mut w, &p, &first, &second, T0 + 60_002);
    assert_eq!(free_gpus(&w), 6, "p runs with two GPUs");
    let r = pod("r", 2, json!({}));
    apply_pod(&mut w, &r, T0 + 60_004);
    let out = run_until(&mut w, T0 + 60_004, T0 + 61_000);
    let to_r = binds(&out).remove(0);
    assert_ne!(
        to_r.annotations.get(GPU_IDS),
        first.annotations.get(GPU_IDS),
        "r is given the devices p runs on"
    );
}

/// The same late binding while `q` still runs on the devices it names: both pods run
/// (the kubelet counts GPUs, not device indexes), so `p` must be counted with two GPUs
/// all the same, on devices no one holds, and no pod bound to the GPUs it uses.
#[test]
fn a_late_binding_onto_devices_in_use_still_counts_its_gpus() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let (p, _q, first, second) = a_late_binding_on_qs_devices(&mut w);
    the_first_binding_lands(&mut w, &p, &first, &second, T0 + 60_001);
    assert_eq!(
        free_gpus(&w),
        4,
        "the kubelet sees q's two GPUs and p's two in use"
    );
    apply_pod(&mut w, &pod("r", 6, json!({})), T0 + 60_003);
    let out = run_until(&mut w, T0 + 60_003, T0 + 61_000);
    assert!(binds(&out).is_empty(), "r is given GPUs p uses: {out:?}");
}

// ----------------------------------------------------------------------------------------
// Node changes with pods on them

/// A kubelet or device-plugin restart makes a node report `nvidia.com/gpu: 0` for a
/// moment. Its pods keep running on their devices; once the GPUs are back, the devices
/// must still be counted as theirs.
#[test]
fn a_node_that_briefly_reports_no_gpus_keeps_its_pods_devices() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    place(&mut w, &pod("p", 8, json!({})), T0);
    assert_eq!(free_gpus(&w), 0);
    apply_node(&mut w, &node("n1", 0), T0 + 1);
    w.round(T0 + 1);
    apply_node(&mut w, &node("n1", 8), T0 + 2);
    w.round(T0 + 2);
    assert_eq!(free_gpus(&w), 0, "pod p still holds the eight GPUs of n1");
    apply_pod(&mut w, &pod("q", 8, json!({})), T0 + 3);
    w.round(T0 + 3);
    let b = binds(&w.take_outputs());
    assert!(b.is_empty(), "q is given the GPUs p runs on: {b:?}");
}

/// NVIDIA's device plugin reports a GPU gone bad by lowering the node's allocatable GPUs,
/// not its capacity: the node still has eight devices, and which one is bad is not said.
/// The pods on all eight keep them and none is given to a new pod; once a pod leaves, the
/// node offers what its allocatable leaves free (seven less what the other pod holds).
#[test]
fn a_gpu_gone_unhealthy_leaves_pods_their_devices_and_the_node_its_count() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let a = place(&mut w, &pod("a", 4, json!({})), T0);
    place(&mut w, &pod("b", 4, json!({})), T0);
    let one_down = node_with(
        "n1",
        7,
        json!({"status": {"capacity": {"nvidia.com/gpu": "8"}}}),
    );
    apply_node(&mut w, &one_down, T0 + 1);
    apply_pod(&mut w, &pod("c", 1, json!({})), T0 + 1);
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert!(
        b.is_empty(),
        "c is given a device a running pod holds: {b:?}"
    );
    assert_eq!(free_gpus(&w), 0, "a and b still hold all eight devices");
    delete_pod(&mut w, &a, T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 60_000);
    assert_eq!(binds(&out).len(), 1, "c is bound once a is gone");
    assert_eq!(
        free_gpus(&w),
        2,
        "seven healthy GPUs less b's four and c's one"
    );
}

/// Node ids are positions in the rebuilt cluster spec: a node that goes away shifts the
/// ids of the nodes after it. The world keeps each job's plan with the ids of the spec it
/// was made in, and reads them against the new one.
#[test]
fn a_running_pods_update_after_another_node_left_does_not_panic() {
    let (n1, n2) = (node("n1", 8), node("n2", 8));
    let mut w = synced(&plain(), &[n1.clone(), n2.clone()]);
    let on_n2 = json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "n2"}}});
    let p = place(&mut w, &pod("p", 8, on_n2), T0);
    assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("n2"));
    delete_node(&mut w, &n1, T0 + 1);
    w.round(T0 + 1);
    // The kubelet reports the pod running: an ordinary update.
    apply_pod(&mut w, &running(p, 3), T0 + 2);
    w.round(T0 + 2);
    assert_eq!(free_gpus(&w), 0);
}

/// The same stale ids without a panic: a node whose name sorts first joins, so the
/// running pod's planned node id now names that node. The pod's next update looks like a
/// pod bound elsewhere than planned; once it is deleted its GPUs must come back.
#[test]
fn a_running_pod_keeps_its_accounting_after_a_node_joined_before_it() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let p = place(&mut w, &pod("p", 8, json!({})), T0);
    apply_node(&mut w, &node("a0", 8), T0 + 1);
    w.round(T0 + 1);
    assert_eq!(free_gpus(&w), 8);
    apply_pod(&mut w, &running(p.clone(), 3), T0 + 2);
    w.round(T0 + 2);
    delete_pod(&mut w, &p, T0 + 3);
    w.round(T0 + 3);
    assert_eq!(free_gpus(&w), 16, "p's GPUs are back once it is deleted");
}

// ----------------------------------------------------------------------------------------
// Pods of other schedulers

/// A GPU pod another scheduler placed, as the API server shows it.
fn foreign(name: &str, gpus: u32, extra: serde_json::Value) -> Pod {
    let mut value = json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1"},
                           "status": {"phase": "Running"}});
    merge(&mut value, extra);
    pod(name, gpus, value)
}

/// Another scheduler's running pod is updated (its status, say) now and then: it is the
/// same pod on the same devices, so it stays the same running job, and the world keeps
/// no other.
#[test]
fn an_update_to_another_schedulers_pod_keeps_it_the_same_job() {
    let f = foreign("f", 2, json!({}));
    let mut w = synced_with(&plain(), &[node("n1", 8)], std::slice::from_ref(&f));
    w.round(T0);
    let adopted: Vec<_> = w.scheduler().running().keys().copied().collect();
    assert_eq!(adopted.len(), 1);
    let mut updated = f.clone();
    updated.metadata.resource_version = Some("2".into());
    updated.status.as_mut().unwrap().pod_ip = Some("10.0.0.7".into());
    apply_pod(&mut w, &updated, T0 + 1);
    w.round(T0 + 1);
    let after: Vec<_> = w.scheduler().running().keys().copied().collect();
    assert_eq!(after, adopted, "the pod is released and adopted again");
    assert_eq!(w.job_count(), 1, "a job of no pod is kept");
    assert_eq!(free_gpus(&w), 6);
}

/// Another scheduler's pod made from a template of ours carries a copied
/// `kant.io/gpu-ids` naming the devices our pod runs on. Only our own bindings name the
/// devices a pod runs on: the other pod is counted on devices no one holds, and once it
/// is gone, our pod's devices are not given to a new pod.
#[test]
fn a_device_list_on_another_schedulers_pod_is_not_trusted() {
    let copied = json!({"metadata": {"annotations": {"kant.io/gpu-ids": "0,1"}}});
    let f = foreign("a-foreign", 2, copied);
    let ours = pod(
        "b-ours",
        2,
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "0,1"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut w = synced_with(&plain(), &[node("n1", 8)], &[f.clone(), ours]);
    w.round(T0);
    assert_eq!(free_gpus(&w), 4, "both pods hold two GPUs each");
    delete_pod(&mut w, &f, T0 + 1);
    apply_pod(&mut w, &pod("new", 2, json!({})), T0 + 1);
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_ne!(
        b[0].annotations[GPU_IDS], "0,1",
        "new is given b-ours's devices"
    );
}

// ----------------------------------------------------------------------------------------
// Restart adoption

/// On start, a pod another scheduler placed (no device annotation: the lowest free
/// devices are assumed) and one of ours whose annotation names devices 0 and 1 share a
/// node. Whatever order they are adopted in, both must be counted.
#[test]
fn restart_counts_annotated_pods_whatever_pod_without_devices_comes_first() {
    let foreign = pod(
        "a-foreign",
        2,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1"},
               "status": {"phase": "Running"}}),
    );
    let ours = pod(
        "b-ours",
        2,
        json!({"metadata": {"annotations": {"kant.io/gpu-ids": "0,1"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let mut w = synced_with(&plain(), &[node("n1", 8)], &[foreign, ours]);
    w.round(T0);
    assert_eq!(free_gpus(&w), 4, "both pods hold two GPUs each");
}

/// On start, pods already bound hold the extended resources they ask for: one another
/// scheduler placed, and one of ours whose scheduling fields no longer parse (counted by
/// its resources). A new pod asking for one goes to the node with one left.
#[test]
fn bound_pods_hold_their_extended_resources_across_a_restart() {
    let asking = |name: &str, node: &str, extra: serde_json::Value| {
        let limits = json!({"nvidia.com/gpu": "1", "rdma/hca": "1"});
        let mut value = json!({"spec": {"containers": [{"name": "c",
                                   "resources": {"limits": limits}}]}});
        merge(&mut value, extra);
        if !node.is_empty() {
            merge(
                &mut value,
                json!({"spec": {"nodeName": node}, "status": {"phase": "Running"}}),
            );
        }
        pod(name, 1, value)
    };
    let hcas = |name: &str| {
        node_with(
            name,
            8,
            json!({"status": {"allocatable": {"rdma/hca": "1"}}}),
        )
    };
    let foreign = asking(
        "a-foreign",
        "n1",
        json!({"spec": {"schedulerName": "default-scheduler"}}),
    );
    let mislabelled = asking(
        "b-ours",
        "n2",
        json!({"metadata": {"labels": {"kant.io/workload": "batch"},
                            "annotations": {"kant.io/gpu-ids": "0"}}}),
    );
    let new = asking("c-new", "", json!({}));
    let mut w = synced_with(
        &plain(),
        &[hcas("n1"), hcas("n2"), hcas("n3")],
        &[foreign, mislabelled, new],
    );
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].node, "n3");
}

/// A running pod whose scheduling fields no longer parse (a `kant.io/workload` Kant does
/// not know) still runs on its devices: on restart it is counted by its resources, and no
/// second pod is bound to them.
#[test]
fn a_bound_pod_with_an_invalid_label_holds_its_gpus_across_a_restart() {
    let mislabelled = pod(
        "old",
        4,
        json!({"metadata": {"labels": {"kant.io/workload": "batch"},
                            "annotations": {"kant.io/gpu-ids": "0,1,2,3"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
    );
    let new = pod("new", 4, json!({}));
    let mut w = synced_with(&plain(), &[node("n1", 8)], &[mislabelled, new]);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].annotations["kant.io/gpu-ids"], "4,5,6,7");
}

/// On restart, a bound pod whose device list is wrong (three GPUs named for a pod of two)
/// is counted on the lowest free devices, and one whose GPU share does not parse holds the
/// whole device it was given: neither is left uncounted.
#[test]
fn bound_pods_with_an_unreadable_device_list_or_share_are_counted() {
    let bound = |name: &str, gpus: u32, annotations: serde_json::Value| {
        pod(
            name,
            gpus,
            json!({"metadata": {"annotations": annotations},
                   "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
        )
    };
    let pods = [
        bound("a-named", 2, json!({"kant.io/gpu-ids": "0,1"})),
        bound("b-miscounted", 2, json!({"kant.io/gpu-ids": "0,1,2"})),
        bound(
            "c-share",
            0,
            json!({"kant.io/gpu-ids": "7", "kant.io/gpu-fraction": "half"}),
        ),
    ];
    let mut w = synced_with(&plain(), &[node("n1", 8)], &pods);
    w.round(T0);
    assert_eq!(
        free_gpus(&w),
        3,
        "two GPUs each for a and b, device 7 for c"
    );
}

// ----------------------------------------------------------------------------------------
// Preemption

/// A victim's pods run until they are gone. Room that preemption freed beyond what the
/// preemptor takes must not go to a third job before then: its pod would be bound onto
/// devices still in use (and fail the kubelet's device admission).
#[test]
fn a_victims_devices_are_not_given_to_another_job_before_it_is_gone() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let victim = place(&mut w, &with_priority("victim", 8, 0), T0);
    apply_pod(&mut w, &running(victim, 3), T0);
    apply_pod(&mut w, &with_priority("high", 4, 100), T0 + 1);
    apply_pod(&mut w, &with_priority("other", 4, 0), T0 + 1);
    // Rounds while the victim's eviction is answered but the pod still terminates.
    let out = run_until(&mut w, T0 + 1, T0 + 3_000);
    let evicted = evictions(&out);
    assert_eq!(evicted.len(), 1, "{out:?}");
    assert_eq!(evicted[0].2, "victim");
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert!(
        bound.is_empty(),
        "bound onto n1 while the victim still runs there: {bound:?}"
    );
}

/// A preemptor waiting for its victims holds a reservation, not running pods. When a
/// job of higher priority takes that room, the waiting pods must go back to their queue:
/// evicting them deletes pods that never ran (a pending pod is always evictable).
#[test]
fn a_preemptor_waiting_for_its_victims_is_requeued_not_evicted() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    apply_pod(&mut w, &running(low, 3), T0);
    apply_pod(&mut w, &with_priority("middle", 8, 50), T0 + 1);
    w.round(T0 + 1);
    let out = w.take_outputs();
    assert_eq!(evictions(&out).len(), 1, "{out:?}");
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 3_000);
    let evicted: Vec<String> = evictions(&out).into_iter().map(|e| e.2).collect();
    assert!(
        !evicted.contains(&"middle".to_string()),
        "the pending pod middle is evicted: {evicted:?}"
    );
}

/// A gang (minMember 2) placed by preemption waits for its victims; one member is
/// deleted meanwhile. When the victims are gone, binding the lone remaining member would
/// start half a gang.
#[test]
fn a_gang_that_lost_a_member_while_awaiting_victims_is_not_bound_partly() {
    let mut w = synced(&preempting(), &[node("n1", 8), node("n2", 8)]);
    let v1 = place(&mut w, &with_priority("v1", 8, 0), T0);
    let v2 = place(&mut w, &with_priority("v2", 8, 0), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    let w0 = member("w0", 8, "g", json!({"spec": {"priority": 100}}));
    let w1 = member("w1", 8, "g", json!({"spec": {"priority": 100}}));
    apply_pod(&mut w, &w0, T0 + 1);
    apply_pod(&mut w, &w1, T0 + 1);
    w.round(T0 + 1);
    let out = w.take_outputs();
    assert_eq!(evictions(&out).len(), 2, "{out:?}");
    assert!(binds(&out).is_empty());
    delete_pod(&mut w, &w1, T0 + 2);
    w.round(T0 + 2);
    delete_pod(&mut w, &v1, T0 + 3);
    delete_pod(&mut w, &v2, T0 + 3);
    let out = run_until(&mut w, T0 + 3, T0 + 3_000);
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert!(
        bound.is_empty(),
        "one member of a 2-pod gang bound: {bound:?}"
    );
}

/// A preemptor waiting for its victim is bound by someone else meanwhile (another
/// replica, say) where it was reserved, on devices it does not name. It runs there once
/// adopted: the job that waited must not be kept beside it.
#[test]
fn a_preemptor_bound_by_someone_else_leaves_no_waiting_job_behind() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    let high = with_priority("high", 8, 100);
    apply_pod(&mut w, &high, T0 + 1);
    w.round(T0 + 1);
    assert_eq!(evictions(&w.take_outputs()).len(), 1);
    apply_pod(&mut w, &landed(high, "n1", &BTreeMap::new(), 2), T0 + 2);
    delete_pod(&mut w, &low, T0 + 3);
    let out = run_until(&mut w, T0 + 3, T0 + 3_000);
    assert!(binds(&out).is_empty(), "{out:?}");
    assert_eq!(w.scheduler().running().len(), 1);
    assert_eq!(
        w.job_count(),
        1,
        "the waiting job is kept beside the running one"
    );
    assert_eq!(free_gpus(&w), 0);
}

/// A preemptor waits for its victim on n1; meanwhile a node whose name sorts first
/// joins, which shifts every node id. The preemptor must be bound where it was reserved
/// (where its victim was), not onto the node that now has the old id.
#[test]
fn a_preemptor_is_bound_where_it_was_reserved_after_a_node_joined() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 1);
    w.round(T0 + 1);
    assert_eq!(evictions(&w.take_outputs()).len(), 1);
    apply_node(&mut w, &node("a0", 8), T0 + 2);
    w.round(T0 + 2);
    w.take_outputs();
    delete_pod(&mut w, &low, T0 + 3);
    w.round(T0 + 3);
    let b = binds(&w.take_outputs());
    let high: Vec<&Bind> = b.iter().filter(|b| b.name == "high").collect();
    assert_eq!(high.len(), 1, "{b:?}");
    assert_eq!(high[0].node, "n1", "bound elsewhere than its reservation");
}

/// A running pod is resized in place (Kubernetes 1.33 does so by default): its node holds
/// its new CPU, so a pod the node no longer has the CPU for goes nowhere, and goes once the
/// resize is undone.
#[test]
fn a_pod_resized_in_place_holds_its_new_cpu() {
    let with_cpu = |name: &str, cpu: &str| {
        pod(
            name,
            1,
            json!({"spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": cpu}}}]}}),
        )
    };
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let a = place(&mut w, &with_cpu("a", "16"), T0);
    let mut resized = running(a.clone(), 3);
    resized.spec = with_cpu("a", "60")
        .spec
        .map(|spec| k8s_openapi::api::core::v1::PodSpec {
            node_name: Some("n1".into()),
            ..spec
        });
    apply_pod(&mut w, &resized, T0 + 1);
    apply_pod(&mut w, &with_cpu("b", "8"), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 5_000);
    assert!(
        binds(&out).is_empty(),
        "b placed beside a pod of 60 CPUs: {out:?}"
    );
    apply_pod(&mut w, &running(a, 4), T0 + 5_001);
    let out = run_until(&mut w, T0 + 5_001, T0 + 10_000);
    assert_eq!(binds(&out).len(), 1, "{out:?}");
}

// ----------------------------------------------------------------------------------------
// Gangs

/// Submits PodGroup `g` of `size` members `w0..` of 8 GPUs each at T0 and runs a round.
fn gang_of(w: &mut World, size: i32) -> Vec<Pod> {
    let members = group_of(w, size, size);
    w.round(T0);
    members
}

/// Submits PodGroup `g` of minMember `min_member` and `pods` members `w0..` of 8 GPUs
/// each at T0.
fn group_of(w: &mut World, min_member: i32, pods: i32) -> Vec<Pod> {
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", min_member)))),
        T0,
    );
    let members: Vec<Pod> = (0..pods)
        .map(|i| member(&format!("w{i}"), 8, "g", json!({})))
        .collect();
    for p in &members {
        apply_pod(w, p, T0);
    }
    members
}

/// A 3-pod gang is being bound; its first pod is deleted before the answers, the other
/// two land. `Scheduler::bound` then stops at the missing pod, so the two running pods
/// stay merely "assumed". When the node of one of them goes away, the whole job is
/// released and requeued as though it never ran: the pod still running on the other node
/// loses its GPUs in the cache, and the job is bound again.
#[test]
fn a_gang_bound_after_losing_a_member_survives_a_node_loss() {
    let nodes = [node("n1", 8), node("n2", 8), node("n3", 8)];
    let mut w = synced(&plain(), &nodes);
    let pods = gang_of(&mut w, 3);
    let mut b = binds(&w.take_outputs());
    b.sort_by_key(|b| b.pod);
    assert_eq!(b.len(), 3);
    let pod_of = |bind: &Bind| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(&bind.name))
            .unwrap()
            .clone()
    };
    // Pod index 0 is deleted while its binding is in flight.
    delete_pod(&mut w, &pod_of(&b[0]), T0 + 1);
    answer(&mut w, &b[0], refused(Some(404), "not found"), T0 + 2);
    bind_ok(&mut w, &pod_of(&b[1]), &b[1], 2, T0 + 2);
    bind_ok(&mut w, &pod_of(&b[2]), &b[2], 2, T0 + 2);
    w.round(T0 + 2);
    w.take_outputs();
    assert_eq!(free_gpus(&w), 8);
    // The node of pod index 2 is removed (its pod is lost with it).
    let gone = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(&b[2].node))
        .unwrap();
    delete_node(&mut w, gone, T0 + 3);
    let out = run_until(&mut w, T0 + 3, T0 + 30_000);
    assert_eq!(
        free_gpus(&w),
        8,
        "the pod on {} still runs on its eight GPUs",
        b[1].node
    );
    let again: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert!(again.is_empty(), "running pods bound again: {again:?}");
}

/// Two nodes of 8 GPUs running PodGroup `g` (two 8-GPU members, bound at T0), and at
/// T0 + 1 an 8-GPU pod of higher priority that preempts the gang: the world, the members
/// and the two evictions asked for.
fn gang_preempted() -> (World, Vec<Pod>, Vec<(kant::model::JobId, u32, String)>) {
    let mut w = synced(&preempting(), &[node("n1", 8), node("n2", 8)]);
    let members = gang_of(&mut w, 2);
    let out = w.take_outputs();
    let b = binds(&out);
    assert_eq!(b.len(), 2, "{out:?}");
    for bind in &b {
        bind_ok(&mut w, &by_name(&members, &bind.name), bind, 2, T0);
    }
    w.round(T0);
    w.take_outputs();
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 1);
    w.round(T0 + 1);
    let out = w.take_outputs();
    let evicted = evictions(&out);
    assert_eq!(evicted.len(), 2, "{out:?}");
    (w, members, evicted)
}

/// A gang (minMember 2) is preempted: both its pods are being evicted. Its controller
/// creates a replacement member at once (a Job replaces terminating pods). The members
/// on their way out must not count as placed: a lone replacement is half a gang and
/// must wait for a second member.
#[test]
fn a_replacement_member_of_a_preempted_gang_waits_for_the_whole_gang() {
    let (mut w, _, _) = gang_preempted();
    // A third node joins, and the controller creates a replacement member.
    apply_node(&mut w, &node("n3", 8), T0 + 2);
    apply_pod(&mut w, &member("w2", 8, "g", json!({})), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 3_000);
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert!(
        !bound.contains(&"w2".to_string()),
        "one pod of a 2-pod gang bound alone: {bound:?}"
    );
}

/// A 2-pod gang is preempted; a disruption budget lets one eviction through and refuses
/// the other, in either order. The member evicted is on its way out: it holds its GPUs
/// until it is gone but is charged to no Queue. The member refused runs on, charged as
/// before. The preemptor, queued again, takes the room the evicted member leaves.
#[test]
fn a_gang_evicted_in_part_is_charged_only_for_the_member_left() {
    for refusal_first in [false, true] {
        let (mut w, members, mut evicted) = gang_preempted();
        if refusal_first {
            evicted.reverse();
        }
        let (gone, kept) = (&evicted[0], &evicted[1]);
        let answers = [
            (
                kept,
                refused(Some(429), "Cannot evict pod: disruption budget"),
            ),
            (gone, Ok(())),
        ];
        for ((job, pod, _), outcome) in answers {
            w.apply(
                Input::Evicted {
                    job: *job,
                    pod: *pod,
                    outcome,
                },
                T0 + 2,
            );
        }
        w.round(T0 + 2);
        w.take_outputs();
        let tenants = w.scheduler().tenants();
        let default = tenants.index(kant::queue::DEFAULT_TENANT).unwrap();
        let pool = kant::model::PoolId(0);
        assert_eq!(
            (tenants.used(default, pool), free_gpus(&w)),
            (8000, 0),
            "(milli-GPUs charged, GPUs free) while the evicted member goes (refusal first: {refusal_first})"
        );
        delete_pod(&mut w, &by_name(&members, &gone.2), T0 + 3);
        w.round(T0 + 3);
        let tenants = w.scheduler().tenants();
        assert_eq!(
            (tenants.used(default, pool), free_gpus(&w)),
            (8000, 8),
            "(milli-GPUs charged, GPUs free) once it is gone (refusal first: {refusal_first})"
        );
        let out = run_until(&mut w, T0 + 3, T0 + 30_000);
        let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
        assert_eq!(bound, ["high"], "{out:?}");
        assert!(evictions(&out).is_empty(), "{out:?}");
    }
}

/// A 2-pod gang is bound in two goes: one binding lands, the other is refused and lands
/// on a retry. It is one gang: a preemptor that needs one node's room evicts both. The
/// same holds for the gang's members made again later (its job restarted).
#[test]
fn a_gang_bound_in_two_goes_is_preempted_whole() {
    for restarted in [false, true] {
        let mut w = synced(&preempting(), &[node("n1", 8), node("n2", 8)]);
        let mut members = gang_of(&mut w, 2);
        let mut t = T0;
        if restarted {
            for bind in &binds(&w.take_outputs()) {
                bind_ok(&mut w, &by_name(&members, &bind.name), bind, 2, t);
            }
            for pod in &members {
                delete_pod(&mut w, pod, t + 1);
            }
            members = ["w2", "w3"].map(|n| member(n, 8, "g", json!({}))).to_vec();
            for pod in &members {
                apply_pod(&mut w, pod, t + 2);
            }
            t += 2;
            w.round(t);
        }
        let b = binds(&w.take_outputs());
        assert_eq!(b.len(), 2);
        bind_ok(&mut w, &by_name(&members, &b[0].name), &b[0], 2, t + 1);
        answer(&mut w, &b[1], refused(Some(500), "etcd timeout"), t + 1);
        let out = run_until(&mut w, t + 1, t + 30_000);
        let again = binds(&out);
        assert_eq!(again.len(), 1, "{out:?}");
        bind_ok(
            &mut w,
            &by_name(&members, &again[0].name),
            &again[0],
            3,
            t + 30_001,
        );
        w.round(t + 30_001);
        w.take_outputs();
        apply_pod(&mut w, &with_priority("high", 8, 100), t + 30_002);
        w.round(t + 30_002);
        let out = w.take_outputs();
        let mut evicted: Vec<String> = evictions(&out).into_iter().map(|e| e.2).collect();
        evicted.sort();
        let names: Vec<String> = members
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(evicted, names, "restarted: {restarted}: {out:?}");
    }
}

fn by_name(pods: &[Pod], name: &str) -> Pod {
    pods.iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap()
        .clone()
}

/// A gang's PodGroup raises `minMember` from 2 to 4 while its two pods are queued (no
/// room yet). When room appears, two pods of a group that now needs four must not start.
#[test]
fn a_queued_gang_follows_a_raised_min_member() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let blocker = place(&mut w, &pod("blocker", 8, json!({})), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    for i in 0..2 {
        apply_pod(&mut w, &member(&format!("w{i}"), 4, "g", json!({})), T0);
    }
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 4)))),
        T0 + 1,
    );
    w.round(T0 + 1);
    delete_pod(&mut w, &blocker, T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 3_000);
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert!(bound.is_empty(), "2 pods of a 4-pod gang bound: {bound:?}");
}

/// A 2-pod gang is being bound; one member is deleted and the other's binding fails.
/// The job goes back to the scheduler's queue whole, with the deleted member's pod still
/// in it: next time it reserves room for a pod that no longer exists and binds the lone
/// survivor (half a gang); that reservation is never released, even once the survivor
/// is gone.
#[test]
fn a_gang_whose_binding_failed_after_a_member_was_deleted_is_not_rebound_partly() {
    let mut w = on_nodes(2);
    let members = gang_of(&mut w, 2);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 2);
    let (gone, kept) = (&b[1], &b[0]);
    delete_pod(&mut w, &by_name(&members, &gone.name), T0 + 1);
    answer(&mut w, gone, refused(Some(404), "not found"), T0 + 2);
    answer(&mut w, kept, refused(Some(500), "etcd timeout"), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 30_000);
    let again = binds(&out);
    for bind in &again {
        bind_ok(&mut w, &by_name(&members, &bind.name), bind, 3, T0 + 30_001);
    }
    delete_pod(&mut w, &by_name(&members, &kept.name), T0 + 30_002);
    w.round(T0 + 30_002);
    let names: Vec<&String> = again.iter().map(|b| &b.name).collect();
    assert!(
        again.is_empty() && free_gpus(&w) == 16,
        "bound alone afterwards: {names:?}; free GPUs once every member is gone: {} of 16",
        free_gpus(&w)
    );
}

// ----------------------------------------------------------------------------------------
// Queues

/// Tenants are numbered by Queue name; a Queue whose name sorts first renumbers them. A
/// victim whose eviction is refused is recorded again from the job the world kept, with
/// the tenant number of its time: it must be charged to its own Queue, not to the new one.
#[test]
fn a_victim_kept_after_a_refused_eviction_is_charged_to_its_own_queue() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    w.apply(Input::Queue(Box::new(Event::Apply(queue("b", 0)))), T0);
    w.round(T0);
    let low = pod(
        "low",
        8,
        json!({"metadata": {"labels": {"kant.io/queue": "b"}}, "spec": {"priority": 0}}),
    );
    let low = place(&mut w, &low, T0);
    apply_pod(&mut w, &running(low, 3), T0);
    w.apply(Input::Queue(Box::new(Event::Apply(queue("a", 0)))), T0 + 1);
    w.round(T0 + 1);
    let tenants = w.scheduler().tenants();
    let pool = kant::model::PoolId(0);
    let (a, b) = (tenants.index("a").unwrap(), tenants.index("b").unwrap());
    assert_eq!((tenants.used(a, pool), tenants.used(b, pool)), (0, 8000));
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 2);
    w.round(T0 + 2);
    let out = w.take_outputs();
    let evicted = evictions(&out);
    assert_eq!(evicted.len(), 1, "{out:?}");
    w.apply(
        Input::Evicted {
            job: evicted[0].0,
            pod: evicted[0].1,
            outcome: refused(
                Some(429),
                "Cannot evict pod as it would violate the pod's disruption budget.",
            ),
        },
        T0 + 3,
    );
    w.round(T0 + 3);
    let tenants = w.scheduler().tenants();
    assert_eq!(
        (tenants.used(a, pool), tenants.used(b, pool)),
        (0, 8000),
        "(queue a, queue b) milli-GPUs in use"
    );
}

/// A preemption counts in the metrics when the victim goes, once, not when it is decided:
/// evictions a disruption budget refuses, again and again, preempt nothing.
#[test]
fn only_evictions_that_land_count_as_preemptions() {
    let metrics = std::sync::Arc::new(kant::metrics::live::LiveMetrics::new());
    let w = world_reporting(&preempting(), Default::default(), metrics.clone());
    let mut w = sync(w, &[node("n1", 8)], &[]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    apply_pod(&mut w, &running(low.clone(), 3), T0);
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 10_000);
    let counted = || {
        (
            metric(&metrics, "kant_preemptions_total{kind=\"priority\"}"),
            metric(
                &metrics,
                "kant_preempted_gpu_seconds_total{kind=\"priority\"}",
            ),
        )
    };
    let mut now = T0 + 10_000;
    let mut refusals = 0;
    while now < T0 + 60_000 {
        w.round(now);
        for (job, pod, _) in evictions(&w.take_outputs()) {
            refusals += 1;
            let outcome = refused(Some(429), "Cannot evict pod: disruption budget");
            w.apply(Input::Evicted { job, pod, outcome }, now + 1);
        }
        now = w
            .next_wakeup(now)
            .map_or(now + 1_000, |t| t.clamp(now + 1, now + 1_000));
    }
    assert!(refusals >= 2, "{refusals} evictions tried");
    w.round(now);
    assert_eq!(
        counted(),
        (Some(0.0), Some(0.0)),
        "after {refusals} refusals"
    );
    // The budget allows it at last: the eviction lands, then the pod goes. One preemption,
    // of a job that ran 8 GPUs for the time up to the eviction.
    let mut landed = None;
    while landed.is_none() {
        now += 1_000;
        w.round(now);
        landed = evictions(&w.take_outputs()).into_iter().next();
    }
    let (job, pod, _) = landed.unwrap();
    w.apply(
        Input::Evicted {
            job,
            pod,
            outcome: Ok(()),
        },
        now,
    );
    delete_pod(&mut w, &running(low, 4), now + 5_000);
    w.round(now + 5_000);
    let ran_s = (now - T0) as f64 / 1000.0;
    assert_eq!(counted(), (Some(1.0), Some(8.0 * ran_s)));
}

// ----------------------------------------------------------------------------------------
// Against the in-process API server

/// A binding answered late, after its job was placed again, is not the current
/// binding's answer: the current one's devices stay reserved.
#[test]
fn a_late_answer_to_a_binding_given_up_is_not_the_current_bindings() {
    let mut w = on_nodes(2);
    let p = pod("p", 8, json!({}));
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first.len(), 1);
    // The reserved node leaves while the binding is in flight; the binding times out and,
    // past the backoff, the pod is placed again on the other node.
    delete_node(&mut w, &node(&first[0].node, 8), T0 + 10);
    answer(
        &mut w,
        &first[0],
        refused(None, "no answer within 30s"),
        T0 + 20,
    );
    let out = run_until(&mut w, T0 + 20, T0 + 5_000);
    let second = binds(&out);
    assert_eq!(second.len(), 1, "{out:?}");
    assert_ne!(second[0].node, first[0].node);
    // The first binding's answer comes again, late (a retry of it landed): the second is
    // still in flight, so its devices stay reserved and another 8-GPU pod finds no room.
    answer(&mut w, &first[0], Ok(()), T0 + 5_001);
    apply_pod(&mut w, &pod("q", 8, json!({})), T0 + 5_002);
    let out = run_until(&mut w, T0 + 5_002, T0 + 5_100);
    assert!(
        binds(&out).is_empty(),
        "q bound beside p's binding in flight: {out:?}"
    );
    bind_ok(&mut w, &p, &second[0], 3, T0 + 5_200);
    assert_eq!(free_gpus(&w), 0);
}

/// A node deleted while a binding to it is in flight keeps the binding's devices, taking
/// no new pod, as kube-scheduler's cache keeps a deleted node's pods: registered again
/// under its name before the answer comes (the API server binds to a node it does not
/// have), it gives those devices to no other pod, and the binding that lands runs there.
/// Once its pods go, a deleted node goes too.
#[test]
fn a_node_deleted_while_a_binding_to_it_is_in_flight_keeps_its_devices() {
    let mut w = on_nodes(1);
    let p = pod("p", 6, json!({}));
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first.len(), 1);
    delete_node(&mut w, &node("n1", 8), T0 + 10);
    apply_pod(&mut w, &pod("q", 1, json!({})), T0 + 10);
    let out = run_until(&mut w, T0 + 10, T0 + 5_000);
    assert!(
        binds(&out).is_empty(),
        "nothing goes to a deleted node: {out:?}"
    );
    // The kubelet registers the node again; p's binding is still in flight.
    apply_node(&mut w, &node("n1", 8), T0 + 5_001);
    apply_pod(&mut w, &pod("r", 4, json!({})), T0 + 5_001);
    let out = run_until(&mut w, T0 + 5_001, T0 + 10_000);
    let q_bind = binds(&out);
    let names: Vec<&str> = q_bind.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["q"], "r does not fit beside p's six GPUs: {out:?}");
    let p_bound = bind_ok(&mut w, &p, &first[0], 3, T0 + 10_001);
    let q_bound = bind_ok(&mut w, &pod("q", 1, json!({})), &q_bind[0], 4, T0 + 10_001);
    w.round(T0 + 10_001);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty(), "p was not placed again: {out:?}");
    assert_eq!(free_gpus(&w), 1, "p's six and q's one are held");

    // Deleted again, with p and q running there: kept while one of them is.
    delete_node(&mut w, &node("n1", 8), T0 + 10_002);
    w.round(T0 + 10_002);
    assert_eq!(free_gpus(&w), 0, "a deleted node takes no new pod");
    delete_pod(&mut w, &p_bound, T0 + 10_003);
    w.round(T0 + 10_003);
    assert!(w.scheduler().state().spec().node_id("n1").is_some());
    delete_pod(&mut w, &q_bound, T0 + 10_004);
    w.round(T0 + 10_004);
    w.round(T0 + 10_005);
    assert_eq!(
        w.scheduler().state().spec().node_id("n1"),
        None,
        "n1 is gone"
    );
}

/// A gang's launcher bound to a CPU-only node that is deleted while the bindings are in
/// flight: the node is kept as any other, so the gang's worker keeps its GPUs until its
/// binding is answered.
#[test]
fn a_cpu_node_deleted_while_a_gangs_launcher_binds_there_keeps_the_gang_whole() {
    let on = |pool: &str| json!({"spec": {"nodeSelector": {"pool": pool}}});
    let labelled = |name: &str, gpus: u32, pool: &str| {
        node_with(name, gpus, json!({"metadata": {"labels": {"pool": pool}}}))
    };
    let cpu = labelled("c1", 0, "cpu");
    let mut w = synced(&plain(), &[cpu.clone(), labelled("n1", 8, "gpu")]);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("mpi", 2)))),
        T0,
    );
    apply_pod(&mut w, &member("launcher", 0, "mpi", on("cpu")), T0);
    apply_pod(&mut w, &member("worker", 8, "mpi", on("gpu")), T0);
    w.round(T0);
    assert_eq!(binds(&w.take_outputs()).len(), 2);
    delete_node(&mut w, &cpu, T0 + 1);
    apply_pod(&mut w, &pod("q", 8, json!({})), T0 + 1);
    let out = run_until(&mut w, T0 + 1, T0 + 30_000);
    assert!(
        binds(&out).is_empty(),
        "q bound onto the worker's GPUs while its binding is in flight: {out:?}"
    );
}

/// A preemptor waiting for its victims on a node that is then deleted is not bound there
/// once they go: it is placed again, elsewhere.
#[test]
fn a_preemptor_whose_node_is_deleted_is_placed_again() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 1);
    w.round(T0 + 1);
    let out = w.take_outputs();
    assert_eq!(evictions(&out).len(), 1, "{out:?}");
    assert!(binds(&out).is_empty());
    apply_node(&mut w, &node("n2", 8), T0 + 2);
    delete_node(&mut w, &node("n1", 8), T0 + 2);
    delete_pod(&mut w, &low, T0 + 3);
    let out = run_until(&mut w, T0 + 2, T0 + 60_000);
    let placed: Vec<(String, String)> = binds(&out).into_iter().map(|b| (b.name, b.node)).collect();
    assert_eq!(placed, [("high".to_string(), "n2".to_string())]);
}

#[test]
fn a_preemptor_whose_victim_never_goes_is_queued_again_and_placed_elsewhere() {
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    let low = place(&mut w, &with_priority("low", 8, 0), T0);
    apply_pod(&mut w, &running(low.clone(), 3), T0);
    apply_pod(&mut w, &with_priority("high", 8, 100), T0 + 1);
    w.round(T0 + 1);
    let out = w.take_outputs();
    let evicted = evictions(&out);
    assert_eq!(evicted.len(), 1, "{out:?}");
    let (job, pod, _) = evicted[0].clone();
    w.apply(
        Input::Evicted {
            job,
            pod,
            outcome: Ok(()),
        },
        T0 + 2,
    );
    // The victim's node stops answering: its pod stays terminating for good.
    let mut terminating = running(low, 4);
    terminating.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-24T10:00:00Z".parse().unwrap(),
        ));
    apply_pod(&mut w, &terminating, T0 + 2);
    apply_node(&mut w, &node("n2", 8), T0 + 10);
    let out = run_until(&mut w, T0 + 10, T0 + 9 * 60_000);
    assert!(
        binds(&out).is_empty(),
        "waits for its victim a while: {out:?}"
    );
    let out = run_until(&mut w, T0 + 9 * 60_000, T0 + 15 * 60_000);
    let bound: Vec<(String, String)> = binds(&out).into_iter().map(|b| (b.name, b.node)).collect();
    assert_eq!(bound, [("high".to_string(), "n2".to_string())]);
    assert_eq!(free_gpus(&w), 0, "the going victim still holds n1");
    delete_pod(&mut w, &terminating, T0 + 16 * 60_000);
    assert_eq!(free_gpus(&w), 8);
}

/// A new leader starts while an earlier one's preemption is under way: the victim on n1
/// is terminating and the preemptor, pending, is nominated to n1. The preemptor waits for
/// its victim, as kube-scheduler does, rather than evict the job on n2; once the victim
/// is gone it takes n1, and its nomination is cleared. A victim that never goes is waited
/// for only as long as the leader's own preemptions wait.
#[test]
fn a_preemptor_nominated_before_a_restart_waits_for_its_victim() {
    for victim_goes in [true, false] {
        let bound = |name: &str, node: &str, rv: u32| {
            let ids = BTreeMap::from([(GPU_IDS.to_string(), "0,1,2,3,4,5,6,7".to_string())]);
            running(landed(with_priority(name, 8, 0), node, &ids, rv), rv)
        };
        let mut victim = bound("victim", "n1", 3);
        victim.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-24T10:00:00Z".parse().unwrap(),
            ));
        let mut high = with_priority("high", 8, 100);
        high.status.as_mut().unwrap().nominated_node_name = Some("n1".into());
        let other = bound("other", "n2", 4);
        let mut w = synced_with(
            &preempting(),
            &[node("n1", 8), node("n2", 8)],
            &[victim.clone(), other, high],
        );
        let out = run_until(&mut w, T0, T0 + 60_000);
        assert!(evictions(&out).is_empty(), "{out:?}");
        assert!(binds(&out).is_empty(), "{out:?}");
        if victim_goes {
            delete_pod(&mut w, &victim, T0 + 60_001);
            let out = run_until(&mut w, T0 + 60_001, T0 + 70_000);
            let bound: Vec<(String, String)> =
                binds(&out).into_iter().map(|b| (b.name, b.node)).collect();
            assert_eq!(bound, [("high".to_string(), "n1".to_string())]);
            assert!(evictions(&out).is_empty(), "{out:?}");
            assert!(
                out.iter()
                    .any(|o| matches!(o, Output::Nominate { target, node: None } if target.name == "high")),
                "{out:?}"
            );
        } else {
            let out = run_until(&mut w, T0 + 60_001, T0 + 11 * 60_000);
            let evicted: Vec<String> = evictions(&out).into_iter().map(|e| e.2).collect();
            assert_eq!(evicted, ["other"], "after its patience");
        }
    }
}

#[test]
fn a_preemptor_that_goes_leaves_its_victims_holding_what_they_still_run_on() {
    // A gang preempts two jobs, then loses a member before its victims are gone.
    let mut w = synced(&preempting(), &[node("n1", 8), node("n2", 8)]);
    place(&mut w, &with_priority("v1", 8, 0), T0);
    place(&mut w, &with_priority("v2", 8, 0), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    let members = ["w0", "w1"].map(|name| member(name, 8, "g", json!({"spec": {"priority": 100}})));
    for pod in &members {
        apply_pod(&mut w, pod, T0 + 1);
    }
    w.round(T0 + 1);
    assert_eq!(evictions(&w.take_outputs()).len(), 2);
    delete_pod(&mut w, &members[1], T0 + 2);
    w.round(T0 + 2);
    w.take_outputs();
    assert_eq!(free_gpus(&w), 0, "v1 and v2 still run on n1 and n2");

    // A lone preemptor is deleted before its victim is gone: a job arriving then waits.
    let mut w = synced(&preempting(), &[node("n1", 8)]);
    place(&mut w, &with_priority("low", 8, 0), T0);
    let high = with_priority("high", 8, 100);
    apply_pod(&mut w, &high, T0 + 1);
    w.round(T0 + 1);
    assert_eq!(evictions(&w.take_outputs()).len(), 1);
    delete_pod(&mut w, &high, T0 + 2);
    apply_pod(&mut w, &with_priority("other", 8, 0), T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 3_000);
    assert!(
        binds(&out).is_empty(),
        "bound on n1 while low still runs there: {out:?}"
    );
}

/// A synced world of `count` nodes of 8 GPUs, `n1` to `n<count>`.
fn on_nodes(count: usize) -> World {
    let nodes: Vec<_> = (1..=count).map(|i| node(&format!("n{i}"), 8)).collect();
    synced(&plain(), &nodes)
}

/// The pod in this phase, at resourceVersion `rv`.
fn in_phase(mut pod: Pod, phase: &str, rv: u32) -> Pod {
    pod.metadata.resource_version = Some(rv.to_string());
    pod.status.as_mut().unwrap().phase = Some(phase.into());
    pod
}

/// Lands every binding among `out`; the watch then shows each pod Running.
fn bind_all_running(
    w: &mut World,
    pods: &[Pod],
    out: &[kant::kube::world::Output],
    now: u64,
) -> Vec<Pod> {
    binds(out)
        .iter()
        .map(|b| {
            let bound = bind_ok(w, &by_name(pods, &b.name), b, 2, now);
            let running = in_phase(bound, "Running", 3);
            apply_pod(w, &running, now);
            running
        })
        .collect()
}

#[test]
fn a_gang_with_more_pods_than_min_member_starts_with_min_member() {
    // As scheduler-plugins' coscheduling admits them: minMember 4 of five pods, room for
    // four; then the fifth once room frees.
    let mut w = on_nodes(4);
    let members = group_of(&mut w, 4, 5);
    let out = run_until(&mut w, T0, T0 + 10_000);
    assert_eq!(binds(&out).len(), 4);
    let running = bind_all_running(&mut w, &members, &out, T0 + 10_000);
    w.round(T0 + 10_000);
    w.take_outputs();
    delete_pod(&mut w, &running[0], T0 + 11_000);
    let out = run_until(&mut w, T0 + 11_000, T0 + 20_000);
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert_eq!(bound, ["w4"], "the fifth goes on its own");

    // minMember 1 with two pods and room for one: one goes.
    let mut w = synced(&plain(), &[node("n1", 8)]);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("one", 1)))),
        T0,
    );
    for i in 0..2 {
        apply_pod(&mut w, &member(&format!("p{i}"), 8, "one", json!({})), T0);
    }
    let out = run_until(&mut w, T0, T0 + 10_000);
    assert_eq!(binds(&out).len(), 1);
}

#[test]
fn a_replacement_member_of_a_deleted_gang_waits_for_the_whole_gang() {
    // The running gang's pods are being deleted (a job restarted): a new member does not
    // count them as placed.
    let mut w = on_nodes(4);
    let members = gang_of(&mut w, 2);
    let out = w.take_outputs();
    let running = bind_all_running(&mut w, &members, &out, T0);
    w.round(T0);
    w.take_outputs();
    for pod in running {
        let mut terminating = in_phase(pod, "Running", 5);
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-24T10:00:00Z".parse().unwrap(),
            ));
        apply_pod(&mut w, &terminating, T0 + 1_000);
    }
    apply_pod(&mut w, &member("w0-new", 8, "g", json!({})), T0 + 1_000);
    let out = run_until(&mut w, T0 + 1_000, T0 + 5_000);
    assert!(
        binds(&out).is_empty(),
        "one pod of a 2-pod gang bound alone"
    );
}

#[test]
fn a_member_relabelled_into_another_gang_does_not_take_its_old_gang_along() {
    let mut w = on_nodes(2);
    let blockers = [
        place(&mut w, &pod("x1", 8, json!({})), T0),
        place(&mut w, &pod("x2", 8, json!({})), T0),
    ];
    for g in ["a", "b"] {
        w.apply(Input::PodGroup(Box::new(Event::Apply(pod_group(g, 2)))), T0);
    }
    let members = [
        member("a0", 4, "a", json!({})),
        member("a1", 4, "a", json!({})),
        member("b0", 4, "b", json!({})),
    ];
    for p in &members {
        apply_pod(&mut w, p, T0);
    }
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    let moved = member("a1", 4, "b", json!({"metadata": {"resourceVersion": "7"}}));
    apply_pod(&mut w, &moved, T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    for b in &blockers {
        delete_pod(&mut w, b, T0 + 2);
    }
    let out = run_until(&mut w, T0 + 2, T0 + 5_000);
    let mut bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    bound.sort();
    assert_eq!(bound, ["a1", "b0"], "a0 is gang a's only pod now");
}

/// Each PodGroup status among `out`: its name, phase and running count.
fn group_statuses(out: &[kant::kube::world::Output]) -> Vec<(String, String, Option<i32>)> {
    out.iter()
        .filter_map(|o| match o {
            kant::kube::world::Output::PodGroupStatus { name, status, .. } => Some((
                name.clone(),
                status
                    .phase
                    .as_ref()
                    .map_or_else(String::new, |p| p.as_str().to_owned()),
                status.running,
            )),
            _ => None,
        })
        .collect()
}

fn last_phase(out: &[kant::kube::world::Output]) -> Option<String> {
    group_statuses(out).pop().map(|(_, phase, _)| phase)
}

#[test]
fn a_pod_group_phase_follows_scheduler_plugins_controller() {
    // Running while its minMember run or succeeded, one of them done.
    let mut w = on_nodes(2);
    let members = gang_of(&mut w, 2);
    let out = w.take_outputs();
    let running = bind_all_running(&mut w, &members, &out, T0);
    let out = run_until(&mut w, T0, T0 + 3_000);
    assert_eq!(last_phase(&out).as_deref(), Some("Running"));
    apply_pod(
        &mut w,
        &in_phase(running[0].clone(), "Succeeded", 4),
        T0 + 4_000,
    );
    let out = run_until(&mut w, T0 + 4_000, T0 + 7_000);
    assert_eq!(last_phase(&out).as_deref(), Some("Running"));
    // Once every pod is gone: Pending, nothing counted, written once.
    for pod in &running {
        delete_pod(&mut w, pod, T0 + 8_000);
    }
    let out = run_until(&mut w, T0 + 8_000, T0 + 12_000);
    assert_eq!(
        group_statuses(&out),
        [("g".to_string(), "Pending".to_string(), Some(0))]
    );

    // Finished once minMember succeeded, though another failed.
    let mut w = on_nodes(3);
    let members = group_of(&mut w, 2, 3);
    // The gang of two, then the third on its own.
    let out = run_until(&mut w, T0, T0 + 3_000);
    let mut running = bind_all_running(&mut w, &members, &out, T0 + 3_000);
    let out = run_until(&mut w, T0 + 3_000, T0 + 4_000);
    running.extend(bind_all_running(&mut w, &members, &out, T0 + 4_000));
    assert_eq!(running.len(), 3);
    for (pod, phase) in running.iter().zip(["Succeeded", "Succeeded", "Failed"]) {
        apply_pod(&mut w, &in_phase(pod.clone(), phase, 4), T0 + 4_000);
    }
    let out = run_until(&mut w, T0 + 4_000, T0 + 7_000);
    assert_eq!(last_phase(&out).as_deref(), Some("Finished"));
}

#[test]
fn a_pod_group_made_again_while_its_pods_run_gets_a_status() {
    let mut w = on_nodes(2);
    let members = gang_of(&mut w, 2);
    let out = w.take_outputs();
    bind_all_running(&mut w, &members, &out, T0);
    let out = run_until(&mut w, T0, T0 + 3_000);
    let written = out
        .iter()
        .rev()
        .find_map(|o| match o {
            kant::kube::world::Output::PodGroupStatus { status, .. } => Some(status.clone()),
            _ => None,
        })
        .expect("a status is written");
    let mut with_status = pod_group("g", 2);
    with_status.status = Some(written);
    let event = |e| Input::PodGroup(Box::new(e));
    w.apply(event(Event::Apply(with_status.clone())), T0 + 3_500);
    w.apply(event(Event::Delete(with_status)), T0 + 4_000);
    let mut again = pod_group("g", 2);
    again.metadata.uid = Some("uid-pg-g-again".into());
    w.apply(event(Event::Apply(again)), T0 + 4_000);
    let out = run_until(&mut w, T0 + 4_000, T0 + 8_000);
    assert_eq!(last_phase(&out).as_deref(), Some("Running"));
}

#[test]
fn a_queued_lone_pod_labelled_into_a_group_joins_its_gang() {
    // Queued alone (no room), then labelled into a PodGroup of minMember 2 whose other
    // member comes: the two are one gang, and room for one starts neither.
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let blocker = place(&mut w, &pod("blocker", 8, json!({})), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    apply_pod(&mut w, &pod("a", 8, json!({})), T0);
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    let relabelled = member("a", 8, "g", json!({"metadata": {"resourceVersion": "7"}}));
    apply_pod(&mut w, &relabelled, T0 + 1);
    apply_pod(&mut w, &member("b", 8, "g", json!({})), T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    delete_pod(&mut w, &blocker, T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 10_000);
    assert!(
        binds(&out).is_empty(),
        "one pod of a 2-pod gang started alone"
    );
}

#[test]
fn an_extra_member_waits_until_its_gang_is_bound_not_merely_binding() {
    // minMember 3 of four pods: the gang of three is being bound while the fourth's own
    // status comes back through the watch; then every binding of the gang is refused.
    // The fourth must not start alone on a node the gang needs.
    let mut w = on_nodes(3);
    let members = group_of(&mut w, 3, 4);
    w.round(T0);
    let gang = binds(&w.take_outputs());
    assert_eq!(gang.len(), 3);
    let extra = members
        .iter()
        .find(|p| {
            !gang
                .iter()
                .any(|b| Some(&b.name) == p.metadata.name.as_ref())
        })
        .unwrap();
    let extra_name = extra.metadata.name.clone().unwrap();
    let mut told = extra.clone();
    told.metadata.resource_version = Some("5".into());
    told.status.as_mut().unwrap().conditions = Some(vec![
        serde_json::from_value(json!({
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable"
        }))
        .unwrap(),
    ]);
    apply_pod(&mut w, &told, T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    for b in &gang {
        answer(
            &mut w,
            b,
            refused(Some(500), "etcdserver: request timed out"),
            T0 + 2,
        );
    }
    let out = run_until(&mut w, T0 + 2, T0 + 60_000);
    let bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    assert_eq!(
        bound.len(),
        3,
        "the gang of three is bound again: {bound:?}"
    );
    assert!(!bound.contains(&extra_name), "{bound:?}");
}

#[test]
fn a_queued_gang_follows_a_lowered_min_member() {
    // Queued (room for one of two), then minMember lowered from 2 to 1: one member starts.
    let mut w = on_nodes(2);
    place(&mut w, &pod("blocker", 8, json!({})), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    for i in 0..2 {
        apply_pod(&mut w, &member(&format!("w{i}"), 8, "g", json!({})), T0);
    }
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    let mut lowered = pod_group("g", 1);
    lowered.metadata.resource_version = Some("9".into());
    w.apply(Input::PodGroup(Box::new(Event::Apply(lowered))), T0 + 1);
    let out = run_until(&mut w, T0 + 1, T0 + 10_000);
    assert_eq!(binds(&out).len(), 1);
}

#[test]
fn a_finished_pod_group_stays_finished_when_its_pods_go_before_the_watch_shows_it() {
    let mut w = on_nodes(2);
    let members = gang_of(&mut w, 2);
    let out = w.take_outputs();
    let running = bind_all_running(&mut w, &members, &out, T0);
    run_until(&mut w, T0, T0 + 3_000);
    for pod in &running {
        apply_pod(&mut w, &in_phase(pod.clone(), "Succeeded", 4), T0 + 4_000);
    }
    let out = run_until(&mut w, T0 + 4_000, T0 + 5_000);
    assert_eq!(last_phase(&out).as_deref(), Some("Finished"));
    for pod in &running {
        delete_pod(&mut w, &in_phase(pod.clone(), "Succeeded", 4), T0 + 5_100);
    }
    let out = run_until(&mut w, T0 + 5_100, T0 + 9_000);
    assert_eq!(group_statuses(&out), []);
}

#[test]
fn an_extra_member_goes_when_the_watch_shows_its_gang_bound_before_the_answers() {
    let mut w = on_nodes(3);
    let members = group_of(&mut w, 2, 3);
    w.round(T0);
    let gang = binds(&w.take_outputs());
    assert_eq!(gang.len(), 2);
    for b in &gang {
        let bound = landed(by_name(&members, &b.name), &b.node, &b.annotations, 2);
        apply_pod(&mut w, &bound, T0 + 1);
    }
    w.round(T0 + 1);
    w.take_outputs();
    for b in &gang {
        answer(&mut w, b, Ok(()), T0 + 2);
    }
    let out = run_until(&mut w, T0 + 2, T0 + 60_000);
    assert_eq!(
        binds(&out).len(),
        1,
        "the third member goes once the gang is bound"
    );
}

#[test]
fn members_queued_on_their_own_form_the_gang_again_once_it_is_gone() {
    // minMember 2 of four pods on two nodes: the gang runs, the other two queue on their
    // own; then the gang's pods go: the two form a gang, bound together.
    let mut w = on_nodes(2);
    let members = group_of(&mut w, 2, 4);
    let out = run_until(&mut w, T0, T0 + 3_000);
    assert_eq!(binds(&out).len(), 2);
    let running = bind_all_running(&mut w, &members, &out, T0 + 3_000);
    let out = run_until(&mut w, T0 + 3_000, T0 + 6_000);
    assert!(binds(&out).is_empty());
    for pod in &running {
        delete_pod(&mut w, pod, T0 + 7_000);
    }
    let out = run_until(&mut w, T0 + 7_000, T0 + 20_000);
    let mut bound: Vec<String> = binds(&out).into_iter().map(|b| b.name).collect();
    bound.sort();
    assert_eq!(bound, ["w2", "w3"]);
}

#[test]
fn a_queued_gang_that_turned_another_shards_is_withdrawn() {
    // A member asking for more GPUs, of another shard's model, makes the gang that
    // shard's: the pods this shard queued are not bound here.
    let shard = kant::kube::world::WorldOptions {
        shard_models: vec!["H100".into()],
        default_shard: false,
        ..kant::kube::world::WorldOptions::default()
    };
    let mut w = sync(world_with(&plain(), shard), &[node("n1", 8)], &[]);
    let on = |model: &str| json!({"spec": {"nodeSelector": {"nvidia.com/gpu.product": model}}});
    let blocker = place(&mut w, &pod("blocker", 8, on("H100")), T0);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    for i in 0..2 {
        apply_pod(&mut w, &member(&format!("a{i}"), 4, "g", on("H100")), T0);
    }
    w.round(T0);
    assert!(binds(&w.take_outputs()).is_empty());
    apply_pod(&mut w, &member("b", 8, "g", on("A100")), T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    delete_pod(&mut w, &blocker, T0 + 2);
    let out = run_until(&mut w, T0 + 2, T0 + 5_000);
    assert!(binds(&out).is_empty(), "another shard's gang bound here");
}

#[test]
fn a_gang_requeued_after_its_bindings_failed_follows_a_min_member_lowered_meanwhile() {
    let mut w = on_nodes(2);
    gang_of(&mut w, 2);
    let gang = binds(&w.take_outputs());
    assert_eq!(gang.len(), 2);
    let mut lowered = pod_group("g", 1);
    lowered.metadata.resource_version = Some("9".into());
    w.apply(Input::PodGroup(Box::new(Event::Apply(lowered))), T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    for b in &gang {
        answer(
            &mut w,
            b,
            refused(Some(500), "etcdserver: request timed out"),
            T0 + 2,
        );
    }
    let out = run_until(&mut w, T0 + 2, T0 + 60_000);
    assert_eq!(
        binds(&out).len(),
        1,
        "a gang of one, the other member after it"
    );
}

/// A preemptor whose first attempt was refused tries again with other victims; a late
/// answer about a victim of the first attempt (its eviction timed out) leaves the current
/// wait alone.
#[test]
fn a_late_eviction_answer_of_an_earlier_attempt_leaves_the_current_wait_alone() {
    let mut w = synced(
        &preempting(),
        &[node("n1", 8), node("n2", 8), node("n3", 8)],
    );
    let v3 = place(&mut w, &with_priority("v3", 8, 0), T0);
    let v1 = place(&mut w, &with_priority("v1", 8, 0), T0 + 1_000);
    let v2 = place(&mut w, &with_priority("v2", 8, 0), T0 + 2_000);
    for (p, t) in [(&v1, T0 + 1_000), (&v2, T0 + 2_000), (&v3, T0)] {
        apply_pod(&mut w, &running(p.clone(), 3), t);
    }
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("h", 2)))),
        T0,
    );
    for name in ["h0", "h1"] {
        let high = member(name, 8, "h", json!({"spec": {"priority": 100}}));
        apply_pod(&mut w, &high, T0 + 3_000);
    }
    w.round(T0 + 3_000);
    let first = evictions(&w.take_outputs());
    let of = |name: &str| first.iter().find(|e| e.2 == name).unwrap().clone();
    let (v1_eviction, v2_eviction) = (of("v1"), of("v2"));
    let refusal = |job, pod, why| Input::Evicted {
        job,
        pod,
        outcome: refused(why, "refused"),
    };
    w.apply(refusal(v1_eviction.0, v1_eviction.1, Some(429)), T0 + 3_100);
    let second = evictions(&run_until(&mut w, T0 + 3_100, T0 + 10_000));
    assert!(!second.is_empty(), "the preemptor tries again");
    w.apply(refusal(v2_eviction.0, v2_eviction.1, None), T0 + 33_100);
    w.round(T0 + 33_100);
    let out = w.take_outputs();
    let given_up = out
        .iter()
        .any(|o| matches!(o, Output::Nominate { node: None, .. }));
    assert!(!given_up, "the wait for {second:?} was given up: {out:?}");
}

/// After a restart (or a change of leader), a victim of the earlier leader still
/// terminating holds its devices as on its way out: it is no victim again, and the job
/// that needs its room takes it once it is gone.
#[test]
fn a_victim_still_terminating_after_a_restart_is_not_evicted_again() {
    let low = pod(
        "low",
        8,
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:20:00Z",
                            "annotations": {"kant.io/gpu-ids": "0,1,2,3,4,5,6,7"}},
               "spec": {"nodeName": "n1", "priority": 0},
               "status": {"phase": "Running", "startTime": "2023-11-14T20:00:00Z"}}),
    );
    let high = pod(
        "high",
        8,
        json!({"spec": {"priority": 100}, "status": {"nominatedNodeName": "n1"}}),
    );
    let mut w = synced_with(&preempting(), &[node("n1", 8)], &[low.clone(), high]);
    let out = run_until(&mut w, T0, T0 + 5_000);
    assert!(evictions(&out).is_empty(), "{out:?}");
    assert!(binds(&out).is_empty(), "{out:?}");
    delete_pod(&mut w, &low, T0 + 6_000);
    let out = run_until(&mut w, T0 + 6_000, T0 + 10_000);
    let bound: Vec<(String, String)> = binds(&out).into_iter().map(|b| (b.name, b.node)).collect();
    assert_eq!(bound, [("high".to_string(), "n1".to_string())]);
}
