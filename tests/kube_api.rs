//! `kant run` against an API server inside the test process: the real kube-rs client does
//! lists, watches (with bookmarks, drops and 410 Gone), bindings, status patches, events,
//! evictions and leases over HTTP, exactly as against a real cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kant::config::Config;
use kant::kube::crd::{PodGroup, Queue};
use kant::kube::{RunError, RunOptions};
use kant_testkit::ApiServer;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

mod common;
use common::kube::{Kant, eventually, merge, preempting, single_replica};

const GPU_IDS: &str = "kant.io/gpu-ids";

fn node(name: &str, gpus: u32) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100",
                                             "kant.io/leaf": format!("leaf-{}", &name[..name.len().min(6)])}},
        "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "cpu": "128", "memory": "1Ti", "pods": "110"}}
    }))
    .expect("a valid node")
}

fn pod(name: &str, extra: Value) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulerName": "kant-scheduler",
                 "containers": [{"name": "main", "image": "trainer"}]}
    });
    merge(&mut value, extra);
    serde_json::from_value(value).expect("a valid pod")
}

fn gpu_pod(name: &str, gpus: u32) -> Pod {
    pod(
        name,
        json!({"spec": {"containers": [{"name": "main", "image": "trainer",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}),
    )
}

fn bound_pods(server: &ApiServer) -> Vec<Pod> {
    server
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .collect()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Checks that no whole device is given twice and no shared device past one GPU; returns
/// the milli-GPUs assigned per (node, device).
fn assert_devices_valid(pods: &[Pod]) -> HashMap<(String, u32), u32> {
    let mut used: HashMap<(String, u32), u32> = HashMap::new();
    for pod in pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        let Some(ids) = annotation(pod, GPU_IDS) else {
            continue;
        };
        let milli = annotation(pod, "kant.io/gpu-fraction").map_or(1000, |f| {
            (f.parse::<f64>().unwrap() * 1000.0).round() as u32
        });
        for id in ids.split(',') {
            let device: u32 = id.parse().expect("numeric device id");
            *used.entry((node.clone(), device)).or_default() += milli;
        }
    }
    for ((node, device), milli) in &used {
        assert!(
            *milli <= 1000,
            "device {device} of {node} holds {milli} milli-GPUs"
        );
    }
    used
}

fn scheduled_condition(pod: &Pod) -> Option<(String, String)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    Some((c.status.clone(), c.message.clone().unwrap_or_default()))
}

/// Whether pod `name` (in `ml`) is told it waits, why containing `why`.
fn told_waits(server: &ApiServer, name: &str, why: &str) -> bool {
    server
        .get::<Pod>(Some("ml"), name)
        .and_then(|p| scheduled_condition(&p))
        .is_some_and(|(status, message)| status == "False" && message.contains(why))
}

fn binding_count(server: &ApiServer) -> u64 {
    server.request_count("create", "pods/binding")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_pods_on_a_hundred_nodes_are_bound_once_with_valid_devices() {
    let server = ApiServer::start().await;
    for i in 0..100 {
        server.create(&node(&format!("node-{i:03}"), 8));
    }
    let kant = Kant::start(&server, Config::embedded()).await;
    // 700 whole GPUs and 300 quarters: 775 of the 800 GPUs.
    for i in 0..1000 {
        let p = if i % 10 < 7 {
            gpu_pod(&format!("p-{i:04}"), 1)
        } else {
            pod(
                &format!("p-{i:04}"),
                json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "0.25"}}}),
            )
        };
        server.create(&p);
    }
    eventually("every pod is bound", || bound_pods(&server).len() == 1000).await;
    let pods = bound_pods(&server);
    let used = assert_devices_valid(&pods);
    assert_eq!(used.values().map(|&m| u64::from(m)).sum::<u64>(), 775_000);
    let bindings = server.bindings();
    let distinct: HashSet<_> = bindings.iter().map(|(ns, p, _)| (ns, p)).collect();
    assert_eq!(bindings.len(), 1000, "each pod bound exactly once");
    assert_eq!(distinct.len(), 1000);
    assert_eq!(binding_count(&server), 1000, "no binding was retried");
    for p in &pods {
        assert_eq!(
            scheduled_condition(p).map(|c| c.0).as_deref(),
            Some("True"),
            "{:?}",
            p.metadata.name
        );
    }
    kant.stop().await;
}

/// A pod whose claim binds on first use, over HTTP: the claim is annotated with the node
/// chosen for the pod (in the class's zone), which the class's provisioner waits for, and
/// the pod is bound once the claim is (this test plays the provisioner). A provisioner
/// that gives the node up (the annotation taken off) has the pod placed again. A pod whose
/// claim does not exist waits and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_a_claim_bound_on_first_use_is_bound_once_its_volume_is_provisioned() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::api::storage::v1::StorageClass;
    const SELECTED: &str = "volume.kubernetes.io/selected-node";
    let server = ApiServer::start().await;
    for (name, zone) in [("node-a", "zone-a"), ("node-b", "zone-b")] {
        let mut n = node(name, 8);
        (n.metadata.labels.get_or_insert_with(BTreeMap::new))
            .insert("topology.kubernetes.io/zone".into(), zone.into());
        server.create(&n);
    }
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "zonal"}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": ["zone-b"]}]}]
    }))
    .unwrap();
    server.create(&class);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "ml"},
        "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}}
    }))
    .unwrap();
    server.create(&claim);
    let kant = Kant::start(&server, common::kube::plain()).await;
    let using = |name: &str, claim: &str| {
        let mut p = gpu_pod(name, 1);
        let volume = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        p.spec.as_mut().unwrap().volumes = serde_json::from_value(volume).unwrap();
        p
    };
    server.create(&using("p", "data"));
    server.create(&using("q", "absent"));
    let data = || {
        server
            .get::<PersistentVolumeClaim>(Some("ml"), "data")
            .unwrap()
    };
    let selected = |c: &PersistentVolumeClaim| {
        (c.metadata.annotations.as_ref()).and_then(|a| a.get(SELECTED).cloned())
    };
    eventually("the claim is annotated", || selected(&data()).is_some()).await;
    assert_eq!(selected(&data()).as_deref(), Some("node-b"));
    // The provisioner gives the node up: the pod is placed again, the claim annotated anew.
    let mut given_up = data();
    given_up
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(SELECTED);
    server.update(&given_up);
    eventually("the claim is annotated again", || {
        selected(&data()).is_some()
    })
    .await;
    assert!(
        bound_pods(&server).is_empty(),
        "bound before its volume exists"
    );
    // The provisioner makes the volume and the claim is bound: so is the pod.
    let mut provisioned = data();
    provisioned.spec.as_mut().unwrap().volume_name = Some("pv-data".into());
    server.update(&provisioned);
    eventually("p is bound", || bound_pods(&server).len() == 1).await;
    let bound = bound_pods(&server);
    assert_eq!(
        bound[0].spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-b")
    );
    eventually("q says why it waits", || {
        told_waits(&server, "q", "persistentvolumeclaim \"absent\" not found")
    })
    .await;
    kant.stop().await;
}

/// A pod whose claim is to be bound on first use to a volume made by hand (a local
/// disk), over HTTP: the volume on a node the pod can go to is bound to the claim (its
/// `claimRef` names the claim and its uid), as kube-scheduler binds it, and the pod is
/// bound once the volume controller (played by this test) has bound the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_a_claim_of_local_volumes_is_bound_once_a_volume_on_its_node_is() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;
    let server = ApiServer::start().await;
    for name in ["node-a", "node-b"] {
        let mut n = node(name, 8);
        (n.metadata.labels.get_or_insert_with(BTreeMap::new))
            .insert("kubernetes.io/hostname".into(), name.into());
        server.create(&n);
    }
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"
    }))
    .unwrap();
    server.create(&class);
    for (name, host, claim_ref) in [
        (
            "pv-a",
            "node-a",
            json!({"namespace": "ml", "name": "someone-else"}),
        ),
        ("pv-b", "node-b", json!(null)),
    ] {
        let volume: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "claimRef": claim_ref,
                     "local": {"path": "/mnt/disks/ssd1"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
            "status": {"phase": "Available"}
        }))
        .unwrap();
        server.create(&volume);
    }
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "scratch", "namespace": "ml"},
        "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "50Gi"}}}
    }))
    .unwrap();
    let claim = server.create(&claim);
    // The volume's first write finds it changed (another writer's): read, judged and
    // written again, it is not the binding's failure.
    server.fail_next("patch", "persistentvolumes", None, Some("pv-b"), 1, 409);
    let kant = Kant::start(&server, common::kube::plain()).await;
    let mut p = gpu_pod("p", 1);
    let volume = json!([{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}]);
    p.spec.as_mut().unwrap().volumes = serde_json::from_value(volume).unwrap();
    server.create(&p);
    let pv_b = || server.get::<PersistentVolume>(None, "pv-b").unwrap();
    let claim_ref = |v: &PersistentVolume| v.spec.as_ref().and_then(|s| s.claim_ref.clone());
    eventually("pv-b is bound to the claim", || {
        claim_ref(&pv_b()).is_some()
    })
    .await;
    let bound_to = claim_ref(&pv_b()).unwrap();
    assert_eq!(
        (bound_to.namespace, bound_to.name, bound_to.uid),
        (
            Some("ml".into()),
            Some("scratch".into()),
            claim.metadata.uid
        )
    );
    let annotations = pv_b().metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("pv.kubernetes.io/bound-by-controller")
            .map(String::as_str),
        Some("yes")
    );
    // A read of the volume while the binding waits fails for a moment (a 500, which the
    // client does not retry by itself): it is read again.
    server.fail_next("get", "persistentvolumes", None, Some("pv-b"), 1, 500);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(bound_pods(&server).is_empty(), "bound before its claim is");
    // The volume controller finishes: the claim names the volume.
    let mut finished = server
        .get::<PersistentVolumeClaim>(Some("ml"), "scratch")
        .unwrap();
    finished.spec.as_mut().unwrap().volume_name = Some("pv-b".into());
    server.update(&finished);
    eventually("p is bound", || bound_pods(&server).len() == 1).await;
    let bound = bound_pods(&server);
    assert_eq!(
        bound[0].spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-b"),
        "where its volume is"
    );
    assert_eq!(server.request_count("patch", "persistentvolumes"), 2);
    let notes: Vec<String> = (server
        .list::<k8s_openapi::api::events::v1::Event>()
        .into_iter())
    .filter_map(|e| e.note)
    .collect();
    assert!(
        !notes.iter().any(|n| n.contains("binding rejected")),
        "{notes:?}"
    );
    kant.stop().await;
}

/// The `FailedScheduling` events of a pod: each Event's note and how often it occurred.
fn failed_scheduling_events(server: &ApiServer) -> Vec<(String, i32)> {
    (server
        .list::<k8s_openapi::api::events::v1::Event>()
        .into_iter())
    .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
    .map(|e| {
        let count = e.series.map_or(1, |s| s.count);
        (e.note.unwrap_or_default(), count)
    })
    .collect()
}

/// One node of 8 GPUs, cordoned, with 4 of them taken by another scheduler's pod: a pod
/// asking for 8 is unschedulable while it is cordoned, short of GPUs once it is not.
fn cordoned_half_full_node(server: &ApiServer) {
    let mut cordoned = node("node-0", 8);
    cordoned.spec.get_or_insert_default().unschedulable = Some(true);
    server.create(&cordoned);
    let mut other = gpu_pod("other", 4);
    let spec = other.spec.as_mut().unwrap();
    spec.scheduler_name = Some("default-scheduler".into());
    spec.node_name = Some("node-0".into());
    server.create(&other);
}

fn cordon(server: &ApiServer, unschedulable: bool) {
    let mut node = server.get::<Node>(None, "node-0").unwrap();
    node.spec.get_or_insert_default().unschedulable = Some(unschedulable);
    server.update(&node);
}

/// Whether a `FailedScheduling` Event's note says `says`, counted `count` times.
fn told(says: &'static str, count: i32) -> impl Fn(&(String, i32)) -> bool {
    move |(note, n)| note.contains(says) && *n == count
}

/// A pod told a new reason why it waits gets a new Event (the API server keeps an Event's
/// note as written), so that `kubectl describe` shows the reason of now; told an earlier
/// reason again, that reason's Event counts it in its series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_new_reason_to_wait_is_a_new_event_and_an_old_one_again_counts_in_its_series() {
    let server = ApiServer::start().await;
    cordoned_half_full_node(&server);
    let mut options = single_replica(Config::embedded());
    options.world.diagnose_every_ms = 200;
    let kant = Kant::start_with(&server, options).await;
    server.create(&gpu_pod("big", 8));
    let events = || failed_scheduling_events(&server);
    eventually("told why", || {
        events().len() == 1 && events().iter().any(told("unschedulable", 1))
    })
    .await;
    cordon(&server, false);
    eventually("told the new reason", || {
        events().len() == 2 && events().iter().any(told("Insufficient", 1))
    })
    .await;
    cordon(&server, true);
    eventually("told the first reason again", || {
        events().len() == 2 && events().iter().any(told("unschedulable", 2))
    })
    .await;
    kant.stop().await;
}

/// A node Kant refuses gets a Warning Event on it, in `default` as kubelet writes node
/// events, naming the node by its uid, so that `kubectl describe node` shows why; one
/// refused before the replica led is told once it leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_node_is_told_with_an_event_on_it() {
    let server = ApiServer::start().await;
    let mut unlabelled = node("node-0", 8);
    unlabelled.metadata.labels = None;
    server.create(&unlabelled);
    let uid = (server.get::<Node>(None, "node-0").unwrap().metadata.uid).expect("a uid");
    let mut options = single_replica(Config::embedded());
    options.leader_election = true;
    let kant = Kant::start_with(&server, options).await;
    let on_node = || {
        (server
            .list::<k8s_openapi::api::events::v1::Event>()
            .into_iter())
        .filter(|e| e.reason.as_deref() == Some("InvalidNode"))
        .collect::<Vec<_>>()
    };
    eventually("the node told", || !on_node().is_empty()).await;
    let event = on_node().remove(0);
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let regarding = event.regarding.expect("regarding");
    assert_eq!(
        (regarding.kind.as_deref(), regarding.api_version.as_deref()),
        (Some("Node"), Some("v1"))
    );
    assert_eq!(
        (regarding.name.as_deref(), regarding.uid.as_deref()),
        (Some("node-0"), Some(uid.as_str()))
    );
    assert_eq!(regarding.namespace, None);
    assert!(event.note.unwrap_or_default().contains("node-0"));
    kant.stop().await;
}

/// An Event created whose answer never came (the writer gave up waiting) is counted at
/// the pod's next telling of that reason, not created a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_created_unanswered_counts_its_repeat_rather_than_being_created_again() {
    let server = ApiServer::start().await;
    cordoned_half_full_node(&server);
    server.lose_next_answers("create", "events", None, None, 1, None);
    let mut options = single_replica(Config::embedded());
    options.world.diagnose_every_ms = 200;
    options.api_timeout = Duration::from_secs(1);
    let kant = Kant::start_with(&server, options).await;
    server.create(&gpu_pod("big", 8));
    let events = || failed_scheduling_events(&server);
    eventually("told why, unanswered", || {
        events().len() == 1 && events().iter().any(told("unschedulable", 1))
    })
    .await;
    // Past the writer's wait for the answer: it gave up on the create.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cordon(&server, false);
    eventually("told the new reason", || {
        events().iter().any(told("Insufficient", 1))
    })
    .await;
    cordon(&server, true);
    eventually("told the first reason again", || {
        events().iter().any(told("unschedulable", 2))
    })
    .await;
    assert_eq!(events().len(), 2, "{:?}", events());
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_all_or_nothing() {
    let server = ApiServer::start().await;
    for i in 0..3 {
        server.create(&node(&format!("node-{i}"), 8));
    }
    let kant = Kant::start(&server, Config::embedded()).await;
    let group: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "ml"}, "spec": {"minMember": 4}
    }))
    .unwrap();
    server.create(&group);
    for i in 0..4 {
        let mut p = gpu_pod(&format!("llm-{i}"), 8);
        p.metadata.labels = Some(BTreeMap::from([(
            "scheduling.x-k8s.io/pod-group".to_string(),
            "llm".to_string(),
        )]));
        server.create(&p);
    }
    // Four 8-GPU pods, three nodes: nothing is bound, and each pod says why.
    eventually("the gang reports why it waits", || {
        server.list::<Pod>().iter().all(|p| {
            scheduled_condition(p)
                .is_some_and(|(s, m)| s == "False" && m.contains("pod group ml/llm"))
        })
    })
    .await;
    assert_eq!(binding_count(&server), 0);
    // The PodGroup's next status writes fail (an API server restarting, say): they are
    // written again until one lands.
    server.fail_next("patch", "podgroups/status", Some("ml"), Some("llm"), 3, 500);
    server.create(&node("node-3", 8));
    eventually("the whole gang is bound", || bound_pods(&server).len() == 4).await;
    let nodes: HashSet<String> = bound_pods(&server)
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 4);
    eventually("the PodGroup status counts the gang", || {
        server
            .get::<PodGroup>(Some("ml"), "llm")
            .and_then(|g| g.status)
            .and_then(|s| s.scheduled)
            == Some(4)
    })
    .await;
    kant.stop().await;
}

/// After a 410 Gone the pod watcher lists again. A list whose connection goes silent (an
/// API server gone behind a load balancer mid-list) is cut by the client's read timeout
/// (75 s in `kant run`; 2 s here) and made again, rather than freezing this replica's view
/// of the pods for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_that_never_answers_is_made_again() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let options = single_replica(Config::embedded());
    let mut client = server.config();
    client.read_timeout = Some(Duration::from_secs(2));
    client.reset_reader_on_write = true;
    let kant = Kant::start_on(&server, options, client).await;
    server.create(&gpu_pod("before", 1));
    eventually("the first pod is bound", || bound_pods(&server).len() == 1).await;
    // The next pod list is never answered; history is compacted and the watches cut, so
    // the pod watcher's resume gets 410 Gone and it lists again.
    server.hang_next("list", "pods", None, None, 1);
    server.compact();
    server.drop_watches();
    server.create(&gpu_pod("after", 1));
    eventually("a pod created after the silent list is bound", || {
        bound_pods(&server).len() == 2
    })
    .await;
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_and_a_410_lose_nothing_and_bind_nothing_twice() {
    let server = ApiServer::start().await;
    for i in 0..20 {
        server.create(&node(&format!("node-{i:02}"), 8));
    }
    let kant = Kant::start(&server, Config::embedded()).await;
    for i in 0..40 {
        server.create(&gpu_pod(&format!("a-{i:02}"), 1));
    }
    eventually("the first pods are bound", || {
        bound_pods(&server).len() == 40
    })
    .await;
    // The watches drop; history is compacted, so resuming from the last resourceVersion
    // gets 410 Gone and the watchers relist. Meanwhile pods come and one goes.
    server.drop_watches();
    server.compact();
    for i in 0..40 {
        server.create(&gpu_pod(&format!("b-{i:02}"), 2));
    }
    server.delete::<Pod>(Some("ml"), "a-00");
    eventually("the later pods are bound", || {
        bound_pods(&server).len() == 79
    })
    .await;
    assert_eq!(server.bindings().len(), 80);
    let distinct: HashSet<_> = server.bindings().into_iter().map(|(_, p, _)| p).collect();
    assert_eq!(distinct.len(), 80, "no pod bound twice");
    assert_devices_valid(&bound_pods(&server));
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_on_bind_is_requeued_and_bound() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    server.create(&node("node-1", 8));
    let mut config = Config::embedded();
    config.queueing.requeue_backoff = 100;
    let kant = Kant::start(&server, config).await;
    server.fail_next_bindings("ml", "p", 1, 409);
    server.create(&gpu_pod("p", 8));
    eventually("the pod is bound after the conflict", || {
        bound_pods(&server).len() == 1
    })
    .await;
    assert_eq!(binding_count(&server), 2, "one refused, one accepted");
    assert_eq!(server.bindings().len(), 1);
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_recovers_every_device_assignment() {
    let server = ApiServer::start().await;
    for i in 0..4 {
        server.create(&node(&format!("node-{i}"), 8));
    }
    let kant = Kant::start(&server, Config::embedded()).await;
    for i in 0..12 {
        server.create(&gpu_pod(&format!("first-{i:02}"), 2));
    }
    eventually("the first pods are bound", || {
        bound_pods(&server).len() == 12
    })
    .await;
    kant.stop().await;
    // A new scheduler knows nothing but what the API server holds.
    let kant = Kant::start(&server, Config::embedded()).await;
    for i in 0..8 {
        server.create(&gpu_pod(&format!("second-{i:02}"), 1));
    }
    eventually("the second pods are bound", || {
        bound_pods(&server).len() == 20
    })
    .await;
    let used = assert_devices_valid(&bound_pods(&server));
    assert_eq!(used.len(), 32, "every device of the four nodes, none twice");
    // The cluster is full: one more GPU waits.
    server.create(&gpu_pod("one-more", 1));
    eventually("the extra pod says it waits", || {
        told_waits(&server, "one-more", "Insufficient nvidia.com/gpu")
    })
    .await;
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_pods_are_reported_on_the_pod_while_the_rest_schedules() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start(&server, Config::embedded()).await;
    server.create(&pod(
        "bad-quantity",
        json!({"spec": {"containers": [{"name": "main", "image": "x",
            "resources": {"requests": {"cpu": "lots"}}}]}}),
    ));
    server.create(&pod(
        "unknown-queue",
        json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
    ));
    server.create(&pod(
        "bad-fraction",
        json!({"metadata": {"annotations": {"kant.io/gpu-fraction": "1.5"}}}),
    ));
    server.create(&gpu_pod("good", 1));
    eventually("the good pod is bound", || bound_pods(&server).len() == 1).await;
    let reason = |name: &str| {
        server
            .get::<Pod>(Some("ml"), name)
            .and_then(|p| scheduled_condition(&p))
    };
    eventually("each bad pod says what is wrong", || {
        let ok = |name: &str, words: &str| {
            reason(name).is_some_and(|(s, m)| s == "False" && m.contains(words))
        };
        ok("bad-quantity", "cpu")
            && ok("unknown-queue", "queue nope does not exist")
            && ok("bad-fraction", "kant.io/gpu-fraction")
    })
    .await;
    // Creating the queue lets its pod in.
    let queue: Queue = serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": "nope"}, "spec": {"quota": {"H100": 4}}
    }))
    .unwrap();
    server.create(&queue);
    eventually("the queued pod is bound", || bound_pods(&server).len() == 2).await;
    eventually("the queue's status shows its GPU", || {
        server
            .get::<Queue>(None, "nope")
            .and_then(|q| q.status)
            .is_some_and(|s| s.allocated.get("H100").cloned().flatten().as_deref() == Some("0"))
    })
    .await;
    kant.stop().await;
}

fn with_priority(mut pod: Pod, priority: i32, app: &str) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    spec.priority = Some(priority);
    pod.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
    pod
}

/// Kant preempting on the server's one node of 8 GPUs, where a pod `low` of priority 0
/// is bound and running.
async fn low_pod_running(server: &ApiServer) -> Kant {
    server.create(&node("node-0", 8));
    let kant = Kant::start(server, preempting()).await;
    server.create(&with_priority(gpu_pod("low", 8), 0, "low"));
    eventually("the low pod is bound", || bound_pods(server).len() == 1).await;
    server.set_pod_phase("ml", "low", "Running");
    kant
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_evicts_through_the_eviction_api_and_budgets_hold() {
    let server = ApiServer::start().await;
    let kant = low_pod_running(&server).await;
    // A budget that allows no disruption: the eviction is refused and the low pod stays.
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "keep-low", "namespace": "ml"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "low"}}}
    }))
    .unwrap();
    server.create(&budget);
    server.create(&with_priority(gpu_pod("high", 8), 100, "high"));
    eventually("the refused eviction is reported on the preemptor", || {
        server.request_count("create", "pods/eviction") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        server.get::<Pod>(Some("ml"), "low").is_some(),
        "the budget held"
    );
    assert_eq!(binding_count(&server), 1, "the preemptor was never bound");
    // Without the budget the low pod is evicted and the preemptor bound where it was.
    server.delete::<PodDisruptionBudget>(Some("ml"), "keep-low");
    eventually("the preemptor is bound", || {
        server
            .get::<Pod>(Some("ml"), "high")
            .and_then(|p| p.spec?.node_name)
            .is_some()
    })
    .await;
    assert!(server.get::<Pod>(Some("ml"), "low").is_none(), "evicted");
    kant.stop().await;
}

/// A 409 to an eviction may leave the victim untouched (a PodDisruptionBudget whose
/// update kept conflicting, many evictions under one budget at once): it is a refusal,
/// and the eviction is sent again, not taken for one that landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_answered_409_with_the_victim_untouched_is_sent_again() {
    let server = ApiServer::start().await;
    let kant = low_pod_running(&server).await;
    server.fail_next("create", "pods/eviction", Some("ml"), Some("low"), 1, 409);
    server.create(&with_priority(gpu_pod("high", 8), 100, "high"));
    eventually("the preemptor is bound", || {
        node_of(&server, "high").is_some()
    })
    .await;
    assert_eq!(server.request_count("create", "pods/eviction"), 2);
    assert!(server.get::<Pod>(Some("ml"), "low").is_none(), "evicted");
    kant.stop().await;
}

/// An evicted pod is not gone at once on a real cluster: it terminates, holding its
/// devices, until its kubelet is done with it. Its preemptor is bound only once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemptor_is_bound_only_once_its_victim_has_terminated() {
    let server = ApiServer::start().await;
    server.set_termination_delay(Duration::from_secs(2));
    let kant = low_pod_running(&server).await;
    server.create(&with_priority(gpu_pod("high", 8), 100, "high"));
    eventually("the low pod terminates", || {
        server
            .get::<Pod>(Some("ml"), "low")
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    while server.get::<Pod>(Some("ml"), "low").is_some() {
        assert_eq!(
            node_of(&server, "high"),
            None,
            "bound while its victim terminates"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eventually("the preemptor is bound", || {
        node_of(&server, "high").as_deref() == Some("node-0")
    })
    .await;
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_probes_are_served_and_a_lease_is_taken() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let mut options = RunOptions::new(Config::embedded());
    options.metrics_addr = "127.0.0.1:0".parse().unwrap();
    options.health_addr = "127.0.0.1:0".parse().unwrap();
    options.identity = "replica-a".into();
    options.lease_namespace = "kube-system".into();
    let kant = Kant::start_with(&server, options).await;
    server.create(&gpu_pod("p", 2));
    eventually("the leader binds the pod", || {
        bound_pods(&server).len() == 1
    })
    .await;
    let lease = shard_lease(&server).expect("the shard's lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-a")
    );
    let metrics = http_get(kant.serving.metrics, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    for series in [
        "kant_gpus_allocated_milli 2000",
        "kant_bind_seconds_count 1",
        "kant_job_wait_seconds_count{size=\"2-8\"} 1",
    ] {
        assert!(metrics.contains(series), "missing {series} in {metrics}");
    }
    let ready = http_get(kant.serving.health, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let alive = http_get(kant.serving.health, "/healthz").await;
    assert!(alive.starts_with("HTTP/1.1 200"), "{alive}");
    kant.stop().await;
}

/// An API server answering every call in 2.5 s (etcd defragmenting, say) elects and keeps
/// a leader, as client-go's election does: a try for the Lease (a read, then a replace)
/// is waited for until the renew deadline, not each call for a retry period. Here the
/// replica finds its own earlier run's record and places nothing for `--api-timeout`
/// first: the renewal in flight when that wait ends goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_slow_to_answer_still_elects_and_keeps_a_leader() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    server.create(&lease_held_by("replica-a"));
    server.set_latency(Duration::from_millis(2500));
    let mut options = replica("replica-a");
    options.api_timeout = Duration::from_secs(3);
    let kant = Kant::start_with(&server, options).await;
    server.create(&gpu_pod("p", 2));
    eventually("the leader binds the pod", || {
        bound_pods(&server).len() == 1
    })
    .await;
    // Well past the renew deadline (10 s), every renewal as slow.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(!kant.has_ended(), "the leader stood down");
    assert_eq!(lease_holder(&server).as_deref(), Some("replica-a"));
    server.set_latency(Duration::ZERO);
    kant.stop().await;
}

/// A leader whose Lease is deleted (by hand, say) writes it anew and leads on: its next
/// renewal, a write over the Lease it last wrote, is refused (404), and it reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_is_deleted_writes_it_anew() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start_with(&server, replica("replica-a")).await;
    eventually("a leads", || {
        lease_holder(&server).as_deref() == Some("replica-a")
    })
    .await;
    server.delete::<Lease>(Some("kube-system"), "kant-scheduler-all");
    eventually("a writes the lease anew", || {
        lease_holder(&server).as_deref() == Some("replica-a")
    })
    .await;
    // Past the renew deadline (10 s) from the deletion.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(!kant.has_ended(), "the leader stood down");
    server.create(&gpu_pod("p", 2));
    eventually("a binds", || bound_pods(&server).len() == 1).await;
    kant.stop().await;
}

/// A replica that cannot read its Lease (no Role for leases) leads nothing and is not
/// ready, so that a rollout of replicas that can never lead stops and shows why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_read_its_lease_is_not_ready() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    server.fail_next("get", "leases", Some("kube-system"), None, usize::MAX, 403);
    let kant = Kant::start_with(&server, replica("replica-a")).await;
    server.create(&gpu_pod("p", 2));
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert!(bound_pods(&server).is_empty());
    let ready = http_get(kant.serving.health, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.contains("leadership undecided"), "{ready}");
    kant.stop().await;
}

/// A replica of the `all` shard that elects its leader on the Lease in kube-system.
fn replica(identity: &str) -> RunOptions {
    let mut options = RunOptions::new(Config::embedded());
    options.metrics_addr = "127.0.0.1:0".parse().unwrap();
    options.health_addr = "127.0.0.1:0".parse().unwrap();
    options.identity = identity.into();
    options.lease_namespace = "kube-system".into();
    options
}

/// The `all` shard's Lease, as the API server has it.
fn shard_lease(server: &ApiServer) -> Option<Lease> {
    server.get::<Lease>(Some("kube-system"), "kant-scheduler-all")
}

fn lease_holder(server: &ApiServer) -> Option<String> {
    shard_lease(server)?.spec?.holder_identity
}

/// Two shards configured with a GPU model in common would both place pods on its nodes,
/// each unaware of the other's bindings in flight: the leader of the second finds the
/// first's Lease and says so on its metrics (and in its log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_finds_another_shard_scheduling_its_gpu_models() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let shard = |identity: &str, shard: &str, models: &[&str]| {
        let mut options = replica(identity);
        options.world.shard = shard.into();
        options.world.shard_models = models.iter().map(|m| m.to_string()).collect();
        options.world.default_shard = false;
        options
    };
    let holder = |lease: &str| {
        let lease = server.get::<Lease>(Some("kube-system"), lease)?;
        lease.spec?.holder_identity
    };
    let a = Kant::start_with(&server, shard("replica-a", "a", &["H100"])).await;
    eventually("a leads", || holder("kant-scheduler-a").is_some()).await;
    let b = Kant::start_with(&server, shard("replica-b", "b", &["A100", "H100"])).await;
    eventually("b leads", || holder("kant-scheduler-b").is_some()).await;
    let series = "kant_shard_overlap{lease=\"kant-scheduler-a\"} 1";
    let started = std::time::Instant::now();
    loop {
        let metrics = http_get(b.serving.metrics, "/metrics").await;
        if metrics.contains(series) {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "missing {series} in {metrics}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    a.stop().await;
    b.stop().await;
}

/// Two Deployments given the same `--shard` by mistake, one for H100 and one for A100:
/// the A100 replica stands by for good while no one schedules A100, and says so.
#[tokio::test]
async fn a_standby_whose_leader_schedules_other_gpu_models_says_so() {
    let log = kant::captured_log::CapturedLog::default();
    let _logging = tracing::subscriber::set_default(log.subscriber());
    let server = ApiServer::start().await;
    let on = |identity: &str, model: &str| {
        let mut options = replica(identity);
        options.world.shard_models = vec![model.into()];
        options
    };
    let h = Kant::start_with(&server, on("replica-h", "H100")).await;
    eventually("h leads", || {
        lease_holder(&server).as_deref() == Some("replica-h")
    })
    .await;
    let a = Kant::start_with(&server, on("replica-a", "A100")).await;
    let said = "lease kant-scheduler-all: its leader replica-h schedules GPU models H100 and \
                the pods that name none (schedulerName kant-scheduler), this replica GPU \
                models A100 and the pods that name none (schedulerName kant-scheduler)";
    eventually("a says why it stands by", || log.text().contains(said)).await;
    assert_eq!(log.text().matches(said).count(), 1, "said once");
    a.stop().await;
    h.stop().await;
}

/// No replica started with `--default-shard`: the pods that name no GPU model are no
/// shard's, and the leaders say so.
#[tokio::test]
async fn a_leader_finding_no_shard_for_pods_naming_no_gpu_model_says_so() {
    let log = kant::captured_log::CapturedLog::default();
    let _logging = tracing::subscriber::set_default(log.subscriber());
    let server = ApiServer::start().await;
    let mut options = replica("replica-h");
    options.world.shard_models = vec!["H100".into()];
    options.world.default_shard = false;
    let h = Kant::start_with(&server, options).await;
    eventually("h says no shard takes them", || {
        log.text()
            .contains("no shard of this scheduler takes the pods that name no GPU model")
    })
    .await;
    h.stop().await;
}

/// A pod naming `L40S|H100`, where L40S nodes exist but no shard is configured for L40S
/// (no Lease claims it), is placed by the H100 shard once its leader has read the Leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_naming_a_model_no_shard_schedules_is_placed_by_the_shard_of_another() {
    let server = ApiServer::start().await;
    server.create(&node("h100-0", 8));
    let mut l40s = node("l40s-0", 8);
    (l40s.metadata.labels.as_mut().unwrap()).insert("nvidia.com/gpu.product".into(), "L40S".into());
    server.create(&l40s);
    let mut options = replica("replica-h100");
    options.world.shard = "h100".into();
    options.world.shard_models = vec!["H100".into()];
    let term = json!({"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["L40S", "H100"]}]});
    let either = pod(
        "either",
        json!({"spec": {
            "containers": [{"name": "main", "image": "trainer",
                            "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [term]}}}}}),
    );
    server.create(&either);
    let kant = Kant::start_with(&server, options).await;
    eventually("the pod is bound", || bound_pods(&server).len() == 1).await;
    let node = bound_pods(&server)[0]
        .spec
        .as_ref()
        .unwrap()
        .node_name
        .clone();
    assert_eq!(node.as_deref(), Some("h100-0"));
    kant.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewal_does_not_land_stands_down_before_another_leads() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let a = Kant::start_with(&server, replica("replica-a")).await;
    eventually("a leads", || {
        lease_holder(&server).as_deref() == Some("replica-a")
    })
    .await;
    // A's next renewal is taken and never answered (a half-open connection, say): it is
    // waited for until 10 s after the last renewal that landed was sent, and A stands
    // down then.
    server.hang_next(
        "update",
        "leases",
        Some("kube-system"),
        Some("kant-scheduler-all"),
        1,
    );
    // B, taking the Lease over, waits for A's bindings for 4 s before placing.
    let mut options = replica("replica-b");
    options.api_timeout = Duration::from_secs(4);
    let b = Kant::start_with(&server, options).await;
    eventually("b takes the lease", || {
        lease_holder(&server).as_deref() == Some("replica-b")
    })
    .await;
    assert!(a.has_ended(), "a still leads beside b");
    let ended = a.ended().await.expect_err("a exits");
    assert!(ended.to_string().contains("lost the lease"), "{ended}");
    assert!(
        matches!(ended, RunError::Stopped(_)),
        "exits 1, not as for bad input"
    );
    server.create(&gpu_pod("p", 2));
    eventually("b binds", || bound_pods(&server).len() == 1).await;
    b.stop().await;
}

/// A leader that finds another holding its Lease sends none of the bindings and status
/// writes still waiting for their turn: the other replica leads by then, may place onto
/// the same GPUs, and writes statuses of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_lost_its_lease_writes_nothing_more() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    // Every binding is taken and never answered: each holds A's one slot until A gives up
    // on it, and the others wait behind it.
    server.hang_next("create", "pods/binding", Some("ml"), None, usize::MAX);
    let mut options = replica("replica-a");
    options.max_in_flight = 1;
    options.api_timeout = Duration::from_secs(4);
    options.status_qps = 1;
    let a = Kant::start_with(&server, options).await;
    eventually("a leads", || {
        lease_holder(&server).as_deref() == Some("replica-a")
    })
    .await;
    for i in 0..4 {
        server.create(&gpu_pod(&format!("p{i}"), 2));
    }
    // A backlog of status writes: pods of a Queue that does not exist, told so once a
    // second.
    for i in 0..10 {
        server.create(&pod(
            &format!("held-{i}"),
            json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
        ));
    }
    eventually("a sends its first binding", || {
        server.request_count("create", "pods/binding") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // B takes the Lease over (A was cut off for a while, say): A finds out at its next
    // renewal, before its first binding is given up.
    let mut lease = shard_lease(&server).expect("the shard's lease exists");
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = Some("replica-b".into());
    }
    server.update(&lease);
    let ended = a.ended().await.expect_err("a exits");
    assert!(ended.to_string().contains("lost the lease"), "{ended}");
    let status_writes = server.request_count("patch", "pods/status");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        server.request_count("create", "pods/binding"),
        1,
        "bindings sent after the lease was lost"
    );
    assert_eq!(
        server.request_count("patch", "pods/status"),
        status_writes,
        "statuses written after the lease was lost"
    );
}

/// Replicas started without an identity (no `--identity`, no `POD_NAME`) do not share
/// one, so only one leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_with_the_default_identity_do_not_both_lead() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let options = || {
        let mut options = RunOptions::new(Config::embedded());
        options.metrics_addr = "127.0.0.1:0".parse().unwrap();
        options.health_addr = "127.0.0.1:0".parse().unwrap();
        options
    };
    let a = Kant::start_with(&server, options()).await;
    eventually("a leads", || lease_holder(&server).is_some()).await;
    let b = Kant::start_with(&server, options()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ready_a = http_get(a.serving.health, "/readyz").await;
    let ready_b = http_get(b.serving.health, "/readyz").await;
    let leads = |r: &str| r.ends_with("\r\n\r\nok\n");
    assert!(leads(&ready_a), "{ready_a}");
    assert!(!leads(&ready_b), "both lead: {ready_b}");
    a.stop().await;
    b.stop().await;
}

/// A relist of Queues refused once (an API server just restarted serves custom resources
/// only once it has loaded them) keeps the Queues listed before: a pod of one is never
/// told its Queue does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_relist_of_queues_keeps_them() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let team: Queue = serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team"},
        "spec": {"mode": "shared", "quota": {"H100": 8}}
    }))
    .unwrap();
    server.create(&team);
    let kant = Kant::start(&server, Config::embedded()).await;
    let in_team = |name: &str, gpus: u32| {
        let mut p = gpu_pod(name, gpus);
        p.metadata.labels = Some(BTreeMap::from([("kant.io/queue".into(), "team".into())]));
        p
    };
    server.create(&in_team("runs", 8));
    eventually("runs is bound", || node_of(&server, "runs").is_some()).await;
    server.create(&in_team("waits", 8));
    eventually("waits says it waits for GPUs", || {
        told_waits(&server, "waits", "Insufficient nvidia.com/gpu")
    })
    .await;
    // The watches fall behind, history is compacted, they are cut: each relists, and the
    // Queue list is answered 404 once.
    server.pause_watches();
    server.create(&gpu_pod("bump", 0));
    server.compact();
    server.fail_next("list", "queues", None, None, 1, 404);
    server.drop_watches();
    server.resume_watches();
    eventually("the queue list was refused", || {
        server
            .requests()
            .iter()
            .any(|r| r.verb == "list" && r.resource == "queues" && r.code == 404)
    })
    .await;
    let mut told = Vec::new();
    for _ in 0..200 {
        if let Some((_, m)) = server
            .get::<Pod>(Some("ml"), "waits")
            .and_then(|p| scheduled_condition(&p))
            && !told.contains(&m)
        {
            told.push(m);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !told.iter().any(|m| m.contains("does not exist")),
        "waits was told its queue is gone: {told:?}"
    );
    kant.stop().await;
}

/// One node of 8 GPUs; replica-a leading, then replica-b started beside it.
async fn leader_and_standby(server: &ApiServer) -> (Kant, Kant) {
    server.create(&node("node-0", 8));
    let a = Kant::start_with(server, replica("replica-a")).await;
    eventually("a leads", || {
        lease_holder(server).as_deref() == Some("replica-a")
    })
    .await;
    (a, Kant::start_with(server, replica("replica-b")).await)
}

/// A leader that stops gives its Lease up: a standby leads at once, not once the Lease
/// expires; and of two standbys racing for it, one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_leader_gives_its_lease_to_one_standby_at_once() {
    let server = ApiServer::start().await;
    let (a, b) = leader_and_standby(&server).await;
    let c = Kant::start_with(&server, replica("replica-c")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Only the leader exports the cluster's figures.
    let leader = http_get(a.serving.metrics, "/metrics").await;
    let standby = http_get(b.serving.metrics, "/metrics").await;
    assert!(leader.contains("\nkant_leader 1\n"), "{leader}");
    assert!(
        leader.contains("\nkant_gpus_capacity_milli 8000\n"),
        "{leader}"
    );
    assert!(standby.contains("\nkant_leader 0\n"), "{standby}");
    assert!(!standby.contains("kant_gpus_capacity_milli"), "{standby}");
    let stopped = std::time::Instant::now();
    a.stop().await;
    eventually("a standby leads", || {
        lease_holder(&server).is_some_and(|h| h != "replica-a")
    })
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopped.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ready = [
        http_get(b.serving.health, "/readyz").await,
        http_get(c.serving.health, "/readyz").await,
    ];
    let leading = ready.iter().filter(|r| r.ends_with("\r\n\r\nok\n")).count();
    assert_eq!(leading, 1, "{ready:?}");
    server.create(&gpu_pod("p", 2));
    eventually("the new leader binds", || bound_pods(&server).len() == 1).await;
    b.stop().await;
    c.stop().await;
}

/// A leader told to stop while the API server still carries out its binding keeps its
/// Lease until the binding is answered: the standby that takes it over sees the pod bound
/// and places nothing onto the same GPUs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_leader_keeps_its_lease_until_its_bindings_are_answered() {
    let server = ApiServer::start().await;
    let (a, b) = leader_and_standby(&server).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The API server takes A's binding of p now and carries it out 4 s later.
    server.set_latency(Duration::from_secs(4));
    server.create(&with_priority(gpu_pod("p", 8), 0, "p"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.set_latency(Duration::ZERO);
    a.stop().await;
    server.create(&with_priority(gpu_pod("q", 8), 100, "q"));
    eventually("b leads", || {
        lease_holder(&server).as_deref() == Some("replica-b")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bound: Vec<String> = bound_pods(&server)
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(bound, ["p"], "one pod on node-0's 8 GPUs");
    b.stop().await;
}

/// A standby's watch may run behind the API server, so the leader it follows may have
/// bound pods it has not seen when it takes the Lease that leader gave up. It lists the
/// pods anew and places nothing before: q, of higher priority and seen waiting, would be
/// given the GPUs p was bound to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_taking_a_lease_given_up_lists_the_pods_anew_before_placing() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    server.create(&lease_held_by("replica-a"));
    server.create(&with_priority(gpu_pod("p", 8), 0, "p"));
    server.create(&with_priority(gpu_pod("q", 8), 100, "q"));
    let b = Kant::start_with(&server, replica("replica-b")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // replica-a binds p and gives the Lease up; b's watch shows neither.
    server.pause_watches();
    bind_to_node_0(&server, "p");
    let mut lease = shard_lease(&server).expect("the lease");
    lease.spec.as_mut().unwrap().holder_identity = None;
    server.update(&lease);
    eventually("b leads", || {
        lease_holder(&server).as_deref() == Some("replica-b")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(binding_count(&server), 0, "b placed q on p's GPUs");
    server.resume_watches();
    server.create(&node("node-1", 8));
    eventually("q is bound beside p", || {
        node_of(&server, "q").as_deref() == Some("node-1")
    })
    .await;
    b.stop().await;
}

/// Binds the pod `name` to all 8 GPUs of node-0, as another scheduler (or leader) would.
fn bind_to_node_0(server: &ApiServer, name: &str) {
    let mut pod = server.get::<Pod>(Some("ml"), name).expect("the pod exists");
    pod.spec.as_mut().unwrap().node_name = Some("node-0".into());
    (pod.metadata.annotations.get_or_insert_with(BTreeMap::new))
        .insert("kant.io/gpu-ids".into(), "0,1,2,3,4,5,6,7".into());
    server.update(&pod);
}

/// A replica that takes the Lease over from a leader whose record expired (one cut off
/// from the API server, say) places nothing for `--api-timeout`: a binding that leader
/// sent just before standing down may still land, onto GPUs the new leader sees free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_taking_an_expired_lease_over_waits_for_the_old_leaders_bindings() {
    takes_the_lease_from_and_waits_for_its_bindings("replica-a").await;
}

/// So does a replica finding its own identity's record, an earlier run's (a container
/// restarted in its pod keeps the pod's name): that run may have left bindings in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_replica_waits_for_the_bindings_of_its_earlier_run() {
    takes_the_lease_from_and_waits_for_its_bindings("replica-b").await;
}

/// `holder` led, sent the binding of p to node-0's 8 GPUs and was cut off (or restarted);
/// replica-b takes the Lease, and p's binding lands a second later. Without the wait, B
/// would have placed q, of higher priority, on the same GPUs.
async fn takes_the_lease_from_and_waits_for_its_bindings(holder: &str) {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let lease = server.create(&lease_held_by(holder));
    server.create(&with_priority(gpu_pod("p", 8), 0, "p"));
    server.create(&with_priority(gpu_pod("q", 8), 100, "q"));
    let mut options = replica("replica-b");
    options.api_timeout = Duration::from_secs(4);
    let b = Kant::start_with(&server, options).await;
    eventually("b takes the lease", || renewed_since(&server, &lease)).await;
    assert_eq!(lease_holder(&server).as_deref(), Some("replica-b"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ready = http_get(b.serving.health, "/readyz").await;
    assert!(ready.ends_with("\r\n\r\ntaking over\n"), "{ready}");
    bind_to_node_0(&server, "p");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        binding_count(&server),
        0,
        "b placed before the binding landed"
    );
    assert_eq!(node_of(&server, "q"), None);
    // B schedules once the wait is over.
    server.create(&node("node-1", 8));
    eventually("q is bound beside p", || {
        node_of(&server, "q").as_deref() == Some("node-1")
    })
    .await;
    let ready = http_get(b.serving.health, "/readyz").await;
    assert!(ready.ends_with("\r\n\r\nok\n"), "{ready}");
    b.stop().await;
}

/// A replica stopped while it waits for the bindings of the leader it took over from
/// leaves the Lease to expire rather than giving it up: the next replica takes it over,
/// and waits in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_while_it_waits_after_a_takeover_leaves_the_lease_to_expire() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let lease = lease_held_by("replica-b");
    server.create(&lease);
    let mut options = replica("replica-b");
    options.api_timeout = Duration::from_secs(20);
    let b = Kant::start_with(&server, options).await;
    eventually("b takes the lease", || renewed_since(&server, &lease)).await;
    b.stop().await;
    assert_eq!(lease_holder(&server).as_deref(), Some("replica-b"));
}

/// A leader stopping with a binding still unanswered after `--api-timeout` leaves the
/// Lease to expire: the next leader waits for that binding rather than placing at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopping_with_a_binding_unanswered_leaves_the_lease_to_expire() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    // The binding is never answered, nor the reads that would settle whether it landed.
    server.hang_next("create", "pods/binding", Some("ml"), None, usize::MAX);
    server.hang_next("get", "pods", Some("ml"), None, usize::MAX);
    let mut options = replica("replica-a");
    options.api_timeout = Duration::from_secs(2);
    let a = Kant::start_with(&server, options).await;
    eventually("a leads", || {
        lease_holder(&server).as_deref() == Some("replica-a")
    })
    .await;
    server.create(&gpu_pod("p", 8));
    eventually("a sends the binding", || binding_count(&server) == 1).await;
    a.stop().await;
    assert_eq!(lease_holder(&server).as_deref(), Some("replica-a"));
}

/// A Lease of the `all` shard held by `holder`, renewed now.
fn lease_held_by(holder: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": "kant-scheduler-all", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": k8s_openapi::jiff::Timestamp::now()}
    }))
    .unwrap()
}

/// Whether the `all` shard's Lease was written since `lease`.
fn renewed_since(server: &ApiServer, lease: &Lease) -> bool {
    let renewed = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    shard_lease(server).as_ref().map(renewed) != Some(renewed(lease))
}

/// A minimal HTTP/1.1 GET.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: kant\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

fn node_of(server: &ApiServer, name: &str) -> Option<String> {
    server.get::<Pod>(Some("ml"), name)?.spec?.node_name
}

/// Status writes are paced; a pod's `PodScheduled=False` explanation still waiting in the
/// writer's queue when the pod gets bound must not be written after the binding set
/// `PodScheduled=True`: a running pod would read as unschedulable for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_unschedulable_status_does_not_overwrite_a_binding() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let mut options = single_replica(Config::embedded());
    options.status_qps = 10;
    let kant = Kant::start_with(&server, options).await;
    server.create(&gpu_pod("blocker", 8));
    eventually("the blocker is bound", || {
        node_of(&server, "blocker").is_some()
    })
    .await;
    // A backlog of status writes: pods of a queue that does not exist.
    for i in 0..30 {
        server.create(&pod(
            &format!("held-{i:02}"),
            json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
        ));
    }
    server.create(&gpu_pod("late", 8));
    // Long enough for `late` to be tried and explained (once a second).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    server.delete::<Pod>(Some("ml"), "blocker");
    eventually("late is bound", || node_of(&server, "late").is_some()).await;
    // The 30 held pods' explanations are written; late's, outdated by its binding, is not.
    eventually("the status backlog is written", || {
        server.request_count("patch", "pods/status") >= 30
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let late = server.get::<Pod>(Some("ml"), "late").expect("late exists");
    assert_eq!(
        scheduled_condition(&late).map(|c| c.0).as_deref(),
        Some("True"),
        "late is bound to {:?}",
        node_of(&server, "late")
    );
    kant.stop().await;
}

/// A pod changed while its `PodScheduled=False` explanation waited in the writer's queue:
/// the write's 409 says so, and the pod, still waiting, is told again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_outdated_in_the_queue_is_written_again() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let mut options = single_replica(Config::embedded());
    options.status_qps = 2;
    let kant = Kant::start_with(&server, options).await;
    for i in 0..6 {
        server.create(&pod(
            &format!("held-{i}"),
            json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
        ));
    }
    // Their conditions (and events) are queued at 2 writes a second; the pods change.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    for i in 0..6 {
        let mut p = server.get::<Pod>(Some("ml"), &format!("held-{i}")).unwrap();
        p.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("example.com/touched".into(), "yes".into());
        server.update(&p);
    }
    eventually("every held pod is told why it waits", || {
        (0..6).all(|i| told_waits(&server, &format!("held-{i}"), "queue nope does not exist"))
    })
    .await;
    kant.stop().await;
}

/// A pod told again why it waits, for another reason, keeps the time its condition
/// turned False, as kube-scheduler keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_reason_to_wait_keeps_the_conditions_transition_time() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start(&server, Config::embedded()).await;
    let mut waits = gpu_pod("waits", 8);
    waits.metadata.labels = Some(BTreeMap::from([("kant.io/queue".into(), "team".into())]));
    server.create(&waits);
    let condition = || {
        let pod = server.get::<Pod>(Some("ml"), "waits")?;
        let conditions = pod.status?.conditions?;
        conditions.into_iter().find(|c| c.type_ == "PodScheduled")
    };
    eventually("waits is told its queue does not exist", || {
        condition().is_some_and(|c| c.message.unwrap_or_default().contains("does not exist"))
    })
    .await;
    let first = condition().and_then(|c| c.last_transition_time);
    assert!(first.is_some());
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // The queue comes, with no quota: the pod waits on.
    let team: Queue = serde_json::from_value(json!({
        "apiVersion": "kant.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team"},
        "spec": {"mode": "isolated", "quota": {"H100": 0}}
    }))
    .unwrap();
    server.create(&team);
    eventually("waits is told another reason", || {
        condition().is_some_and(|c| {
            c.status == "False" && !c.message.unwrap_or_default().contains("does not exist")
        })
    })
    .await;
    assert_eq!(condition().and_then(|c| c.last_transition_time), first);
    kant.stop().await;
}

/// Options for one replica whose calls to the API server give up after one second.
fn impatient(config: Config) -> RunOptions {
    let mut options = single_replica(config);
    options.api_timeout = Duration::from_secs(1);
    options
}

/// An eviction names its victim's uid: a pod created again under the victim's name
/// before the eviction comes is not evicted in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_spares_a_pod_created_again_under_the_victims_name() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start_with(&server, impatient(preempting())).await;
    server.create(&with_priority(gpu_pod("low", 8), 0, "low"));
    eventually("the low pod is bound", || bound_pods(&server).len() == 1).await;
    // The first eviction is taken and never answered; before the next one, the victim is
    // deleted and created again, unbound, by another controller (unseen by Kant).
    server.hang_next("create", "pods/eviction", Some("ml"), Some("low"), 1);
    server.create(&with_priority(gpu_pod("high", 8), 100, "high"));
    eventually("the first eviction is sent", || {
        server.request_count("create", "pods/eviction") >= 1
    })
    .await;
    server.pause_watches();
    server.delete::<Pod>(Some("ml"), "low");
    let mut again = with_priority(gpu_pod("low", 8), 0, "low");
    again.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
    let again = server.create(&again);
    eventually("the eviction is sent again", || {
        server.request_count("create", "pods/eviction") >= 2
    })
    .await;
    server.resume_watches();
    eventually("the preemptor is bound", || {
        node_of(&server, "high").is_some()
    })
    .await;
    let low = server
        .get::<Pod>(Some("ml"), "low")
        .expect("the new low pod stays");
    assert_eq!(low.metadata.uid, again.metadata.uid);
    kant.stop().await;
}

/// An API server that takes a binding and never answers must not hold the pod (and its
/// devices) for good: past the timeout the binding counts as failed and is tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_never_answered_is_given_up_and_tried_again() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let mut config = Config::embedded();
    config.queueing.requeue_backoff = 100;
    let kant = Kant::start_with(&server, impatient(config)).await;
    server.hang_next("create", "pods/binding", Some("ml"), Some("p"), 1);
    server.create(&gpu_pod("p", 8));
    eventually("the pod is bound on the second try", || {
        node_of(&server, "p").is_some()
    })
    .await;
    assert_eq!(
        binding_count(&server),
        2,
        "one never answered, one accepted"
    );
    kant.stop().await;
}

/// A binding left unanswered may still be carried out by the API server after its
/// client gave up: its devices go to no other pod for as long again as the timeout, and
/// once it lands the pod is bound where it was placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_carried_out_after_its_timeout_shares_no_device() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 4));
    let mut options = single_replica(Config::embedded());
    options.api_timeout = Duration::from_secs(2);
    let kant = Kant::start_with(&server, options).await;
    server.land_next_bindings_late(1, Duration::from_secs(3));
    server.create(&gpu_pod("x", 4));
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.create(&gpu_pod("y", 4));
    eventually("x's binding lands", || node_of(&server, "x").is_some()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bound = bound_pods(&server);
    assert_eq!(bound.len(), 1, "only x holds the node's 4 GPUs");
    assert_devices_valid(&bound);
    kant.stop().await;
}

/// A status write that is never answered must not hold up the later ones while it waits
/// for its timeout (long here, as a loaded API server's answers may be slow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_never_answered_does_not_hold_up_the_others() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let mut options = impatient(Config::embedded());
    options.api_timeout = Duration::from_secs(600);
    let kant = Kant::start_with(&server, options).await;
    let unknown_queue = json!({"metadata": {"labels": {"kant.io/queue": "nope"}}});
    server.hang_next("patch", "pods/status", Some("ml"), Some("first"), 1);
    server.create(&pod("first", unknown_queue.clone()));
    eventually("first's status write is sent", || {
        server
            .requests()
            .iter()
            .any(|r| r.resource == "pods/status" && r.name.as_deref() == Some("first"))
    })
    .await;
    server.create(&pod("second", unknown_queue));
    eventually("second is told why it waits", || {
        told_waits(&server, "second", "queue nope does not exist")
    })
    .await;
    kant.stop().await;
}

/// The API server carried out `first`'s binding but its answer says otherwise, and the
/// watch (lagging, as a watch cache may) has not shown it yet. `first` runs on the node's
/// eight GPUs: `second`, waiting behind it, must not be given them.
async fn a_binding_that_landed_keeps_its_devices(answer: Option<u16>) {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    server.create(&with_priority(gpu_pod("first", 8), 100, "first"));
    server.create(&with_priority(gpu_pod("second", 8), 0, "second"));
    server.lose_next_answers(
        "create",
        "pods/binding",
        Some("ml"),
        Some("first"),
        1,
        answer,
    );
    server.pause_watches();
    let mut config = Config::embedded();
    config.queueing.requeue_backoff = 100;
    let kant = Kant::start_with(&server, impatient(config)).await;
    eventually("first is bound", || node_of(&server, "first").is_some()).await;
    // Past the timeout, the answer and a few rounds.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    server.resume_watches();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        node_of(&server, "second"),
        None,
        "second is bound to first's GPUs"
    );
    kant.stop().await;
}

/// A 504 after the write committed; kube's retry then gets 409 "already assigned".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_that_landed_but_was_answered_504_keeps_its_devices() {
    a_binding_that_landed_keeps_its_devices(Some(504)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_that_landed_but_was_never_answered_keeps_its_devices() {
    a_binding_that_landed_keeps_its_devices(None).await;
}

/// A condition the API server refuses (403 here) would be refused again: it is not sent
/// again round after round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_refused_for_good_is_not_written_again() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start_with(&server, impatient(Config::embedded())).await;
    server.fail_next("patch", "pods/status", Some("ml"), Some("held"), 1_000, 403);
    server.create(&pod(
        "held",
        json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
    ));
    eventually("held's condition is sent", || {
        server.request_count("patch", "pods/status") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(server.request_count("patch", "pods/status"), 1);
    kant.stop().await;
}

/// A binding whose answer was lost is settled by reading the pod; a read the API server
/// refuses for good (a 403: the role lacks `get` on pods) must not keep retrying, holding
/// the binding's slot: with one slot, `second` would never be bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_whose_settling_read_is_refused_frees_its_slot() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 16));
    server.lose_next_answers("create", "pods/binding", Some("ml"), Some("first"), 1, None);
    server.fail_next("get", "pods", Some("ml"), Some("first"), 1_000, 403);
    server.create(&with_priority(gpu_pod("first", 8), 100, "first"));
    let mut options = impatient(Config::embedded());
    options.max_in_flight = 1;
    let kant = Kant::start_with(&server, options).await;
    eventually("first is bound", || node_of(&server, "first").is_some()).await;
    server.create(&gpu_pod("second", 8));
    eventually("second is bound", || node_of(&server, "second").is_some()).await;
    kant.stop().await;
}

/// scheduler-plugins' PodGroup CRD does not require a spec. A PodGroup without one must
/// neither keep the PodGroup watch from listing (nothing would be scheduled anywhere) nor
/// keep its pods waiting: it reads as minMember 0, as scheduler-plugins reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_without_a_spec_does_not_stop_scheduling() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let resource = ApiResource::erase::<PodGroup>(&());
    let groups: Api<DynamicObject> = Api::namespaced_with(server.client(), "ml", &resource);
    groups
        .create(
            &PostParams::default(),
            &DynamicObject::new("bare", &resource),
        )
        .await
        .unwrap();
    let kant = Kant::start(&server, Config::embedded()).await;
    server.create(&gpu_pod("lone", 1));
    let mut member = gpu_pod("member", 1);
    member.metadata.labels = Some(BTreeMap::from([(
        "scheduling.x-k8s.io/pod-group".to_string(),
        "bare".to_string(),
    )]));
    server.create(&member);
    eventually("both pods are bound", || bound_pods(&server).len() == 2).await;
    kant.stop().await;
}

/// A pod's condition is written once per change of reason; one the API server refused
/// must be written again, or the pod never says why it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_condition_is_written_again() {
    let server = ApiServer::start().await;
    server.create(&node("node-0", 8));
    let kant = Kant::start(&server, Config::embedded()).await;
    server.fail_next("patch", "pods/status", Some("ml"), Some("held"), 1, 500);
    server.create(&pod(
        "held",
        json!({"metadata": {"labels": {"kant.io/queue": "nope"}}}),
    ));
    eventually("held is told why it waits", || {
        told_waits(&server, "held", "queue nope does not exist")
    })
    .await;
    assert_eq!(server.request_count("patch", "pods/status"), 2);
    kant.stop().await;
}
