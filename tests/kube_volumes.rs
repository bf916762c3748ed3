//! The Kubernetes world and pods' persistent volumes, driven directly (no API server): a
//! bound volume's node affinity keeps its pods on its nodes, a claim to provision on first
//! use is annotated with the node its pod goes to, and a claim that cannot be used yet
//! keeps its pods waiting, saying why, in kube-scheduler's words.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kant::kube::world::{Input, Output, World};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

mod common;
use common::kube::*;

/// A pod of `gpus` GPUs whose volume uses the claim `claim`.
fn using(name: &str, gpus: u32, claim: &str) -> Pod {
    pod(
        name,
        gpus,
        json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}),
    )
}

/// A claim in the pods' namespace: bound to `volume`, of `class`, with more (annotations,
/// a deletion timestamp) merged in.
fn claim(
    name: &str,
    volume: Option<&str>,
    class: Option<&str>,
    extra: Value,
) -> PersistentVolumeClaim {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    });
    if let Some(volume) = volume {
        value["spec"]["volumeName"] = json!(volume);
    }
    if let Some(class) = class {
        value["spec"]["storageClassName"] = json!(class);
    }
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

/// A volume that only the node `host` can use (a local disk, say).
fn volume_on(name: &str, host: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}
        ]}}}
    }))
    .unwrap()
}

/// A storage class binding `mode`, by `provisioner`, in the `zones` (none: anywhere).
fn class(name: &str, mode: &str, provisioner: &str, zones: &[&str]) -> StorageClass {
    let mut value = json!({
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    });
    if !zones.is_empty() {
        value["allowedTopologies"] = json!([{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": zones}
        ]}]);
    }
    serde_json::from_value(value).unwrap()
}

fn in_zone(name: &str, zone: &str) -> k8s_openapi::api::core::v1::Node {
    node_with(
        name,
        8,
        json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}}),
    )
}

/// Nodes `a1` in zone-a and `b1` in zone-b, and a class of this name provisioning on
/// first use in zone-b only.
fn provisioning_in_zone_b(class_name: &str) -> World {
    let nodes = [in_zone("a1", "zone-a"), in_zone("b1", "zone-b")];
    let mut w = synced(&plain(), &nodes);
    let zonal = class(
        class_name,
        "WaitForFirstConsumer",
        "ebs.csi.aws.com",
        &["zone-b"],
    );
    w.apply(Input::StorageClass(Box::new(Event::Apply(zonal))), T0);
    w
}

fn apply_claim(w: &mut World, claim: &PersistentVolumeClaim, now: u64) {
    w.apply(Input::Claim(Box::new(Event::Apply(claim.clone()))), now);
}

/// What a round at `now` binds nothing and says of the pods that wait.
fn waits_at(w: &mut World, now: u64) -> Vec<(String, String)> {
    w.round(now);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty(), "{out:?}");
    waiting(&out)
}

/// Why each pod waits, as its `PodScheduled` condition says.
fn waiting(outputs: &[Output]) -> Vec<(String, String)> {
    (outputs.iter())
        .filter_map(|o| match o {
            Output::PodCondition {
                target, condition, ..
            } if !condition.status => Some((target.name.clone(), condition.message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_pod_waits_for_its_claim_then_goes_where_its_volume_is() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    assert_eq!(
        waits_at(&mut w, T0),
        [(
            "p".into(),
            "persistentvolumeclaim \"data\" not found".into()
        )]
    );
    w.apply(
        Input::Volume(Box::new(Event::Apply(volume_on("pv-1", "n2")))),
        T0 + 1,
    );
    apply_claim(
        &mut w,
        &claim("data", Some("pv-1"), None, json!({})),
        T0 + 1,
    );
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].node, "n2", "where its volume is");
    assert!(b[0].claims.is_empty(), "a bound claim is not provisioned");
}

#[test]
fn no_node_its_volume_allows_is_a_volume_node_affinity_conflict() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    w.apply(
        Input::Volume(Box::new(Event::Apply(volume_on("pv-1", "gone")))),
        T0,
    );
    apply_claim(&mut w, &claim("data", Some("pv-1"), None, json!({})), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    w.round(T0);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty());
    let why = waiting(&out);
    assert_eq!(why.len(), 1, "{out:?}");
    assert!(
        why[0]
            .1
            .contains("1 node(s) had volume node affinity conflict"),
        "{why:?}"
    );
}

#[test]
fn an_unbound_claim_of_an_immediate_class_keeps_its_pod_waiting_until_bound() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let fast = class("fast", "Immediate", "ebs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(fast))), T0);
    apply_claim(&mut w, &claim("data", None, Some("fast"), json!({})), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    assert_eq!(
        waits_at(&mut w, T0),
        [(
            "p".into(),
            "pod has unbound immediate PersistentVolumeClaims".into()
        )]
    );
    // The volume controller binds it: the pod is placed.
    w.apply(
        Input::Volume(Box::new(Event::Apply(volume_on("pv-1", "n1")))),
        T0 + 1,
    );
    apply_claim(
        &mut w,
        &claim("data", Some("pv-1"), Some("fast"), json!({})),
        T0 + 1,
    );
    w.round(T0 + 1);
    assert_eq!(binds(&w.take_outputs()).len(), 1);
}

/// A claim whose class binds on first use is provisioned where its pod goes, within the
/// class's zones: the binding names it, so that it is annotated with the node first. A
/// second pod of the claim, annotated and not bound yet, follows it to that node.
#[test]
fn a_claim_bound_on_first_use_is_provisioned_for_its_pods_node() {
    let mut w = provisioning_in_zone_b("zonal");
    apply_claim(&mut w, &claim("data", None, Some("zonal"), json!({})), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].node, "b1", "the class provisions in zone-b only");
    assert_eq!(b[0].claims, ["data"]);

    let annotated =
        json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "b1"}}});
    apply_claim(
        &mut w,
        &claim("data", None, Some("zonal"), annotated),
        T0 + 1,
    );
    apply_pod(&mut w, &using("q", 1, "data"), T0 + 1);
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].node, "b1", "where the claim is provisioned");
    assert_eq!(
        b[0].claims,
        ["data"],
        "its binding waits for the volume too"
    );
}

#[test]
fn a_claim_no_pod_can_use_yet_says_why() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    with_local_class(&mut w);
    let deleting = json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:20Z",
                                       "finalizers": ["kubernetes.io/pvc-protection"]}});
    for c in [
        claim("local-data", None, Some("local"), json!({})),
        claim("no-class", None, Some("missing"), json!({})),
        claim("going", Some("pv-1"), None, deleting),
        claim("lost", Some("pv-gone"), None, json!({})),
    ] {
        apply_claim(&mut w, &c, T0);
    }
    for (pod, claim) in [
        ("p-local", "local-data"),
        ("p-class", "no-class"),
        ("p-going", "going"),
        ("p-lost", "lost"),
    ] {
        apply_pod(&mut w, &using(pod, 1, claim), T0);
    }
    w.round(T0);
    let out = w.take_outputs();
    assert!(binds(&out).is_empty());
    let mut why = waiting(&out);
    why.sort();
    let reasons: Vec<&str> = why.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "storageclass.storage.k8s.io \"missing\" not found",
            "persistentvolumeclaim \"going\" is being deleted",
            "persistentvolumeclaim \"local-data\" waits for a persistentvolume of storage class \
             local that fits it: none is available, and the class has no provisioner",
            "persistentvolumeclaim \"lost\" is bound to persistentvolume \"pv-gone\", which \
             does not exist",
        ]
    );
}

/// Until the claim shows the node its first pod's binding annotates it with, its other
/// pods follow that node all the same (as kube-scheduler's assume cache keeps it), their
/// bindings waiting for the same volume; once those bindings fail, the claim is free
/// again.
#[test]
fn a_claim_being_annotated_keeps_its_other_pods_to_that_node() {
    let nodes = [in_zone("b1", "zone-b"), in_zone("b2", "zone-b")];
    let mut w = synced(&plain(), &nodes);
    let shared = class("shared", "WaitForFirstConsumer", "efs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(shared))), T0);
    apply_claim(&mut w, &claim("data", None, Some("shared"), json!({})), T0);
    // Seven GPUs on the first node it takes: the next pod would go to the other by itself.
    apply_pod(&mut w, &using("p", 7, "data"), T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first[0].claims, ["data"]);
    apply_pod(&mut w, &using("q", 1, "data"), T0 + 1);
    w.round(T0 + 1);
    let second = binds(&w.take_outputs());
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].node, first[0].node, "q follows p's claim");
    assert_eq!(second[0].claims, ["data"], "and waits for its volume");

    for bind in [&first[0], &second[0]] {
        answer(&mut w, bind, refused(Some(403), "forbidden"), T0 + 2);
    }
    apply_pod(&mut w, &using("r", 7, "data"), T0 + 3);
    w.round(T0 + 3);
    let third = binds(&w.take_outputs());
    assert_eq!(
        third.len(),
        1,
        "r goes where seven GPUs are free: {third:?}"
    );
    assert_eq!(
        third[0].claims,
        ["data"],
        "p's and q's bindings failed: the claim is r's to annotate"
    );
}

/// Two pods of one claim placed in the same round, each alone on a node: the first one's
/// binding annotates the claim with its node, and the second, which would go elsewhere,
/// is not bound there (its volume is provisioned on the first one's node); it waits to go
/// there, as kube-scheduler's assume cache keeps it.
#[test]
fn pods_of_one_claim_placed_in_one_round_go_to_the_node_it_is_provisioned_for() {
    let nodes = [in_zone("a1", "zone-a"), in_zone("b1", "zone-b")];
    let mut w = synced(&plain(), &nodes);
    let zonal = class("zonal", "WaitForFirstConsumer", "ebs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(zonal))), T0);
    apply_claim(&mut w, &claim("data", None, Some("zonal"), json!({})), T0);
    apply_pod(&mut w, &using("p", 7, "data"), T0);
    apply_pod(&mut w, &using("q", 7, "data"), T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1, "one node takes seven GPUs once: {b:?}");
    assert_eq!(b[0].claims, ["data"]);
    let out = run_until(&mut w, T0 + 1, T0 + 20_000);
    assert!(binds(&out).is_empty(), "{:?}", binds(&out));
}

/// A gang member whose claim went away while it waited for the rest of its gang is not
/// bound without it: the gang waits for the claim.
#[test]
fn a_gang_member_whose_claim_went_away_meanwhile_is_not_bound() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    let shared = class("shared", "WaitForFirstConsumer", "efs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(shared))), T0);
    let data = claim("data", None, Some("shared"), json!({}));
    apply_claim(&mut w, &data, T0);
    let volume = json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    apply_pod(&mut w, &member("w0", 4, "g", volume), T0);
    w.round(T0);
    assert!(
        binds(&w.take_outputs()).is_empty(),
        "the gang lacks a member"
    );
    w.apply(Input::Claim(Box::new(Event::Delete(data))), T0 + 1);
    apply_pod(&mut w, &member("w1", 4, "g", json!({})), T0 + 1);
    let out = run_until(&mut w, T0 + 1, T0 + 5_000);
    assert!(binds(&out).is_empty(), "{:?}", binds(&out));
}

/// A pod queued for the node its claim is being provisioned for, where it does not fit,
/// follows the claim once the provisioner gives that node up (it takes the annotation off,
/// to have the volume provisioned elsewhere): it is placed where it fits, and the claim
/// annotated with that node.
#[test]
fn a_queued_pod_follows_its_claim_when_the_node_it_waits_for_is_given_up() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let shared = class("shared", "WaitForFirstConsumer", "efs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(shared))), T0);
    let on_n1 = json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}});
    apply_claim(&mut w, &claim("data", None, Some("shared"), on_n1), T0);
    let big = pod(
        "big",
        8,
        json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}}),
    );
    place(&mut w, &big, T0);
    apply_pod(&mut w, &using("q", 1, "data"), T0 + 1);
    let out = run_until(&mut w, T0 + 1, T0 + 5_000);
    assert!(binds(&out).is_empty(), "n1 is full");

    apply_claim(
        &mut w,
        &claim("data", None, Some("shared"), json!({})),
        T0 + 6_000,
    );
    let b = binds(&run_until(&mut w, T0 + 6_000, T0 + 30_000));
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(
        (b[0].node.as_str(), b[0].claims.clone()),
        ("n2", vec!["data".to_string()])
    );
}

/// A claim naming its class by the beta annotation (older charts still write it), which
/// Kubernetes reads before `spec.storageClassName`, is of that class.
#[test]
fn a_claim_naming_its_class_by_the_beta_annotation_is_of_that_class() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    let zonal = class("zonal", "WaitForFirstConsumer", "ebs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(zonal))), T0);
    let beta =
        json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "zonal"}}});
    apply_claim(&mut w, &claim("data", None, None, beta), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    w.round(T0);
    let out = w.take_outputs();
    let b = binds(&out);
    assert_eq!(b.len(), 1, "{:?}", waiting(&out));
    assert_eq!(b[0].claims, ["data"]);
}

/// A pod deleted while its binding, which was to annotate its claim, is in flight, and
/// whose claim could not be annotated, leaves the claim free: the next pod of the claim
/// annotates it.
#[test]
fn a_claim_left_unannotated_by_a_pod_deleted_while_binding_is_free() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let shared = class("shared", "WaitForFirstConsumer", "efs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(shared))), T0);
    apply_claim(&mut w, &claim("data", None, Some("shared"), json!({})), T0);
    let p = using("p", 7, "data");
    apply_pod(&mut w, &p, T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first[0].claims, ["data"]);
    delete_pod(&mut w, &p, T0 + 1);
    answer(&mut w, &first[0], refused(Some(503), "unavailable"), T0 + 1);
    apply_pod(&mut w, &using("q", 7, "data"), T0 + 2);
    w.round(T0 + 2);
    let second = binds(&w.take_outputs());
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].claims, ["data"], "the claim was never annotated");
}

/// A pod whose node goes away while its binding, which was to annotate its claim, is in
/// flight is placed again; the claim, which could not be annotated, is its to annotate
/// with its new node.
#[test]
fn a_pod_placed_again_as_its_node_went_away_while_binding_annotates_its_claim() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let shared = class("shared", "WaitForFirstConsumer", "efs.csi.aws.com", &[]);
    w.apply(Input::StorageClass(Box::new(Event::Apply(shared))), T0);
    apply_claim(&mut w, &claim("data", None, Some("shared"), json!({})), T0);
    apply_pod(&mut w, &using("p", 7, "data"), T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first[0].claims, ["data"]);
    delete_node(&mut w, &node(&first[0].node, 8), T0 + 1);
    w.round(T0 + 1);
    w.take_outputs();
    answer(&mut w, &first[0], refused(Some(503), "unavailable"), T0 + 2);
    let b = binds(&run_until(&mut w, T0 + 2, T0 + 30_000));
    assert_eq!(b.len(), 1, "{b:?}");
    assert_ne!(b[0].node, first[0].node);
    assert_eq!(b[0].claims, ["data"], "the claim was never annotated");
}

/// A volume whose node affinity has an empty term: Kubernetes matches no node with it, so
/// its pods go only where its other terms allow.
#[test]
fn an_empty_term_of_a_volumes_node_affinity_matches_no_node() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    let volume = serde_json::from_value(json!({
        "metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {},
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}
        ]}}}
    }))
    .unwrap();
    w.apply(Input::Volume(Box::new(Event::Apply(volume))), T0);
    apply_claim(&mut w, &claim("data", Some("pv-1"), None, json!({})), T0);
    // A pod on n1 first: p would join it there by itself.
    let filler = pod(
        "filler",
        1,
        json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}}),
    );
    place(&mut w, &filler, T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0 + 1);
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].node, "n2");
}

/// A free local volume of class `local` on the node `host`, of `size`, with more merged in.
fn local_volume(name: &str, host: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut value = serde_json::to_value(volume_on(name, host)).unwrap();
    merge(
        &mut value,
        json!({
            "spec": {"capacity": {"storage": size}, "storageClassName": "local",
                     "accessModes": ["ReadWriteOnce"]},
            "status": {"phase": "Available"}
        }),
    );
    merge(&mut value, extra);
    serde_json::from_value(value).unwrap()
}

fn apply_volume(w: &mut World, volume: PersistentVolume, now: u64) {
    w.apply(Input::Volume(Box::new(Event::Apply(volume))), now);
}

/// `local` binds on first use, to volumes made by hand.
fn with_local_class(w: &mut World) {
    let local = class(
        "local",
        "WaitForFirstConsumer",
        "kubernetes.io/no-provisioner",
        &[],
    );
    w.apply(Input::StorageClass(Box::new(Event::Apply(local))), T0);
}

/// A claim of `local` asking for `size`.
fn local_claim(name: &str, size: &str) -> PersistentVolumeClaim {
    let asks = json!({"spec": {"resources": {"requests": {"storage": size}}}});
    claim(name, None, Some("local"), asks)
}

/// Pre-made local volumes, as kube-scheduler binds them: a claim of a class binding on
/// first use goes where a free volume fits it, and its binding first binds the smallest
/// that fits on its pod's node. That volume is no other claim's meanwhile; once none is
/// left, a claim waits, saying why.
#[test]
fn a_claim_of_local_volumes_is_bound_to_the_smallest_free_one_on_its_pods_node() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    with_local_class(&mut w);
    apply_volume(&mut w, local_volume("pv-big", "n1", "10Gi", json!({})), T0);
    apply_volume(&mut w, local_volume("pv-small", "n1", "2Gi", json!({})), T0);
    apply_volume(&mut w, local_volume("pv-n2", "n2", "1Gi", json!({})), T0);
    for name in ["a", "b", "c"] {
        apply_claim(&mut w, &local_claim(name, "2Gi"), T0);
    }
    // n2's volume is too small: every pod must go to n1.
    apply_pod(&mut w, &using("p", 1, "a"), T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].node, "n1");
    assert_eq!(first[0].volumes, [("a".into(), "pv-small".into())]);
    assert!(first[0].claims.is_empty(), "nothing is provisioned");

    apply_pod(&mut w, &using("q", 1, "b"), T0 + 1);
    w.round(T0 + 1);
    let second = binds(&w.take_outputs());
    assert_eq!(second.len(), 1);
    assert_eq!(
        (second[0].node.as_str(), second[0].volumes.clone()),
        ("n1", vec![("b".to_string(), "pv-big".to_string())]),
        "pv-small is a's"
    );

    apply_pod(&mut w, &using("r", 1, "c"), T0 + 2);
    assert_eq!(
        waits_at(&mut w, T0 + 2),
        [(
            "r".into(),
            "persistentvolumeclaim \"c\" waits for a persistentvolume of storage class local \
             that fits it: none is available, and the class has no provisioner"
                .into()
        )]
    );

    // a's binding failed: pv-small is free again, and c takes it.
    answer(&mut w, &first[0], refused(Some(409), "conflict"), T0 + 3);
    let b = binds(&run_until(&mut w, T0 + 3, T0 + 30_000));
    let c = b.iter().find(|b| b.name == "r").expect("r is bound");
    assert_eq!(c.volumes, [("c".into(), "pv-small".into())]);
}

/// A volume fits a claim only when it is available, of the claim's class, big enough, of
/// its access modes and volume mode, and labelled as its selector asks; one pre-bound to
/// a claim (its `claimRef` set by hand) is that claim's alone, wherever its node is.
#[test]
fn a_volume_fits_a_claim_only_as_kubernetes_matches_them() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8), node("n3", 8)]);
    with_local_class(&mut w);
    let misfits = [
        ("released", json!({"status": {"phase": "Released"}})),
        ("other-class", json!({"spec": {"storageClassName": "fast"}})),
        ("small", json!({"spec": {"capacity": {"storage": "1Gi"}}})),
        (
            "read-only",
            json!({"spec": {"accessModes": ["ReadOnlyMany"]}}),
        ),
        ("block", json!({"spec": {"volumeMode": "Block"}})),
        (
            "unlabelled",
            json!({"metadata": {"labels": {"disk": "hdd"}}}),
        ),
        (
            "taken",
            json!({"spec": {"claimRef": {"namespace": "ml", "name": "other"}}}),
        ),
        (
            "deleting",
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:20Z",
                                "finalizers": ["kubernetes.io/pv-protection"]}}),
        ),
    ];
    for (name, extra) in misfits {
        apply_volume(&mut w, local_volume(name, "n1", "4Gi", extra), T0);
    }
    let fits = json!({"metadata": {"labels": {"disk": "nvme"}}});
    apply_volume(&mut w, local_volume("fits", "n2", "4Gi", fits.clone()), T0);
    let nvme = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}},
                               "selector": {"matchLabels": {"disk": "nvme"}}}});
    apply_claim(&mut w, &claim("data", None, Some("local"), nvme), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    w.round(T0);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].node.as_str(), b[0].volumes.clone()),
        ("n2", vec![("data".to_string(), "fits".to_string())])
    );

    // Pre-bound by hand to "mine": it goes there, though "fits" would fit it too.
    let pre_bound = json!({"spec": {"claimRef": {"namespace": "ml", "name": "mine"}}});
    apply_volume(
        &mut w,
        local_volume("reserved", "n3", "4Gi", pre_bound),
        T0 + 1,
    );
    apply_volume(&mut w, local_volume("fits-2", "n2", "4Gi", fits), T0 + 1);
    apply_claim(&mut w, &local_claim("mine", "2Gi"), T0 + 1);
    apply_pod(&mut w, &using("q", 1, "mine"), T0 + 1);
    w.round(T0 + 1);
    let b = binds(&w.take_outputs());
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].node.as_str(), b[0].volumes.clone()),
        ("n3", vec![("mine".to_string(), "reserved".to_string())])
    );
}

/// A class with a provisioner binds a claim to an existing volume where one fits on the
/// pod's node, and provisions a new one elsewhere, as kube-scheduler does.
#[test]
fn a_provisioning_class_uses_a_fitting_volume_before_provisioning_one() {
    let mut w = provisioning_in_zone_b("local");
    // A volume left on a1, outside the zones the class provisions in.
    apply_volume(&mut w, local_volume("pv-a1", "a1", "4Gi", json!({})), T0);
    apply_claim(&mut w, &local_claim("old", "2Gi"), T0);
    apply_claim(&mut w, &local_claim("new", "2Gi"), T0);
    // Seven GPUs each: one pod per node.
    apply_pod(&mut w, &using("p", 7, "old"), T0);
    apply_pod(&mut w, &using("q", 7, "new"), T0);
    w.round(T0);
    let mut b = binds(&w.take_outputs());
    b.sort_by(|x, y| x.node.cmp(&y.node));
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!(b[0].node, "a1", "where the volume is");
    assert_eq!(b[0].volumes.len(), 1);
    assert!(b[0].claims.is_empty());
    assert_eq!(b[1].node, "b1", "where the class provisions");
    assert_eq!(b[1].claims.len(), 1);
    assert!(b[1].volumes.is_empty());
}

/// A pod whose volumes use the claims named.
fn using_all(name: &str, gpus: u32, claims: &[&str]) -> Pod {
    let volumes: Vec<Value> = (claims.iter())
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    pod(name, gpus, json!({"spec": {"volumes": volumes}}))
}

/// A pod bound: its name, its node, and the volumes bound to its claims (claim, volume).
type BoundWithVolumes = (String, String, Vec<(String, String)>);

/// The pods bound among `outputs`, by name.
fn bound_with_volumes(outputs: &[Output]) -> Vec<BoundWithVolumes> {
    let mut b: Vec<_> = (binds(outputs).into_iter())
        .map(|b| (b.name, b.node, b.volumes))
        .collect();
    b.sort();
    b
}

/// Asserts that `pod` alone is bound among `outputs`: on `node`, with these volumes bound
/// to its claims (claim, volume).
fn assert_bound(outputs: &[Output], pod: &str, node: &str, volumes: &[(&str, &str)]) {
    let volumes = (volumes.iter())
        .map(|&(claim, volume)| (claim.to_string(), volume.to_string()))
        .collect();
    let expected = (pod.to_string(), node.to_string(), volumes);
    assert_eq!(bound_with_volumes(outputs), [expected]);
}

/// Node `n1` with one free local volume, `n1-a`, and claims `a` and `b` of its class.
fn one_volume_two_claims() -> World {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    with_local_class(&mut w);
    apply_volume(&mut w, local_volume("n1-a", "n1", "2Gi", json!({})), T0);
    for name in ["a", "b"] {
        apply_claim(&mut w, &local_claim(name, "1Gi"), T0);
    }
    w
}

/// A pod of two claims of local volumes, where one node has one volume and the other
/// two: a node counts for each claim alone, so the pod may be placed where one volume is
/// left for two claims. Its binding is not sent, it is told why, and it is placed again,
/// kept off that node, where both claims find a volume.
#[test]
fn a_pod_of_two_local_claims_goes_where_two_volumes_are() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    with_local_class(&mut w);
    apply_volume(&mut w, local_volume("n1-a", "n1", "2Gi", json!({})), T0);
    apply_volume(&mut w, local_volume("n2-a", "n2", "2Gi", json!({})), T0);
    apply_volume(&mut w, local_volume("n2-b", "n2", "2Gi", json!({})), T0);
    // A pod on n1 first: p, packed, would go beside it.
    let filler = pod(
        "filler",
        1,
        json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}}),
    );
    place(&mut w, &filler, T0);
    for name in ["a", "b"] {
        apply_claim(&mut w, &local_claim(name, "1Gi"), T0);
    }
    apply_pod(&mut w, &using_all("p", 1, &["a", "b"]), T0 + 1);
    let out = run_until(&mut w, T0 + 1, T0 + 60_000);
    let told = (out.iter()).any(|o| {
        matches!(o, Output::Event { message, .. }
            if message.contains("node n1 has no persistentvolume left to bind it to"))
    });
    assert!(told, "{out:?}");
    assert_bound(&out, "p", "n2", &[("a", "n2-a"), ("b", "n2-b")]);
}

/// A gang whose two members each have a claim of local volumes, one volume on each node:
/// packed on one node at first, it is placed again with the member that found no volume
/// kept off that node, and both are bound, each with its node's volume.
#[test]
fn a_gang_of_local_claims_spreads_to_the_nodes_of_its_volumes() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    with_local_class(&mut w);
    w.apply(
        Input::PodGroup(Box::new(Event::Apply(pod_group("g", 2)))),
        T0,
    );
    for n in ["n1", "n2"] {
        apply_volume(
            &mut w,
            local_volume(&format!("{n}-disk"), n, "2Gi", json!({})),
            T0,
        );
    }
    for (member_name, claim_name) in [("w0", "c0"), ("w1", "c1")] {
        apply_claim(&mut w, &local_claim(claim_name, "1Gi"), T0);
        let volume = json!({"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim_name}}]}});
        apply_pod(&mut w, &member(member_name, 2, "g", volume), T0);
    }
    let out = run_until(&mut w, T0, T0 + 60_000);
    let bound = bound_with_volumes(&out);
    assert_eq!(bound.len(), 2, "{out:?}");
    assert_ne!(bound[0].1, bound[1].1, "one member per node: {bound:?}");
    for (_, node, volumes) in &bound {
        assert_eq!(volumes.len(), 1);
        assert_eq!(volumes[0].1, format!("{node}-disk"));
    }
}

/// A volume pre-bound to a claim that it cannot hold (too small) is not chosen for it, as
/// `FindMatchingVolume` skips it: the claim takes a free volume that fits.
#[test]
fn a_volume_pre_bound_to_a_claim_it_cannot_hold_is_passed_over() {
    let mut w = synced(&plain(), &[node("n1", 8), node("n2", 8)]);
    with_local_class(&mut w);
    let pre_bound = json!({"spec": {"claimRef": {"namespace": "ml", "name": "data"}}});
    apply_volume(&mut w, local_volume("tiny", "n1", "1Gi", pre_bound), T0);
    apply_volume(&mut w, local_volume("fits", "n2", "4Gi", json!({})), T0);
    apply_claim(&mut w, &local_claim("data", "2Gi"), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    w.round(T0);
    assert_bound(&w.take_outputs(), "p", "n2", &[("data", "fits")]);
}

/// The claims' and volumes' watches are apart: a claim may show itself bound to the volume
/// its pod's binding bound before the volume shows its claim. Until the volume does, it is
/// still this claim's, given to no other.
#[test]
fn a_volume_bound_is_no_other_claims_before_its_watch_shows_it() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    with_local_class(&mut w);
    apply_volume(&mut w, local_volume("pv", "n1", "2Gi", json!({})), T0);
    apply_claim(&mut w, &local_claim("a", "1Gi"), T0);
    apply_claim(&mut w, &local_claim("b", "1Gi"), T0);
    apply_pod(&mut w, &using("p", 1, "a"), T0);
    w.round(T0);
    let first = binds(&w.take_outputs());
    assert_eq!(first[0].volumes, [("a".into(), "pv".into())]);
    // The claim's watch shows it bound; the volume's has not shown its claim yet.
    let bound = local_claim("a", "1Gi");
    let mut bound = serde_json::to_value(bound).unwrap();
    bound["spec"]["volumeName"] = json!("pv");
    apply_claim(&mut w, &serde_json::from_value(bound).unwrap(), T0 + 1);
    apply_pod(&mut w, &using("q", 1, "b"), T0 + 1);
    let why = waits_at(&mut w, T0 + 1);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].1.contains("none is available"), "{why:?}");
}

/// A claim kept off a node because one pod's other claim took the last volume there is
/// kept off it for that pod alone: another pod of the claim may go there.
#[test]
fn a_claim_kept_off_a_node_for_one_pod_is_not_kept_off_it_for_others() {
    let mut w = one_volume_two_claims();
    let p = using_all("p", 1, &["a", "b"]);
    apply_pod(&mut w, &p, T0);
    let out = run_until(&mut w, T0, T0 + 30_000);
    assert!(binds(&out).is_empty(), "one volume for two claims: {out:?}");
    delete_pod(&mut w, &p, T0 + 30_001);
    apply_pod(&mut w, &using("q", 1, "b"), T0 + 30_001);
    let out = run_until(&mut w, T0 + 30_001, T0 + 60_000);
    assert_bound(&out, "q", "n1", &[("b", "n1-a")]);
}

/// A claim is kept off a node for a minute, not for good: a pod that can only go there
/// (its other claims' volumes are there, or they came to be meanwhile) is tried there
/// again once the minute ends, though nothing changed.
#[test]
fn a_claim_is_kept_off_a_node_for_a_minute_only() {
    let mut w = one_volume_two_claims();
    apply_pod(&mut w, &using_all("p", 1, &["a", "b"]), T0);
    let out = run_until(&mut w, T0, T0 + 150_000);
    let tries = (out.iter())
        .filter(|o| {
            matches!(o, Output::Event { message, .. }
                if message.contains("node n1 has no persistentvolume left to bind it to"))
        })
        .count();
    assert!(
        (2..=4).contains(&tries),
        "tried once, then again after each minute: {tries}"
    );
}

/// A volume that another claim takes is no longer this claim's to take, and one freed
/// again (released and made available) is, as the volumes' watch shows them.
#[test]
fn a_volume_taken_and_freed_again_is_followed() {
    let mut w = synced(&plain(), &[node("n1", 8)]);
    with_local_class(&mut w);
    let taken = json!({"spec": {"claimRef": {"namespace": "ml", "name": "other"}},
                       "status": {"phase": "Bound"}});
    apply_volume(&mut w, local_volume("pv", "n1", "2Gi", json!({})), T0);
    apply_volume(&mut w, local_volume("pv", "n1", "2Gi", taken), T0);
    apply_claim(&mut w, &local_claim("data", "1Gi"), T0);
    apply_pod(&mut w, &using("p", 1, "data"), T0);
    let why = waits_at(&mut w, T0);
    assert!(why[0].1.contains("none is available"), "{why:?}");
    apply_volume(&mut w, local_volume("pv", "n1", "2Gi", json!({})), T0 + 1);
    w.round(T0 + 1);
    assert_bound(&w.take_outputs(), "p", "n1", &[("data", "pv")]);
}
