//! The scheduler under a changing world, as the Kubernetes world drives it: pods found
//! already bound (adopted), pods deleted one by one, nodes coming and going, tenants
//! changing, pending jobs withdrawn, and placement constraints (node selectors, affinity,
//! taints, pod limits, ephemeral storage and extended resources).

mod common;

use std::sync::Arc;

use common::*;
use kant::cache::{Placement, PlacementPhase, PodKey};
use kant::framework::{Adopted, Decision, Scheduler};

const RUNNING: Adopted = Adopted::Running { preemptible: true };
use kant::model::{
    ClusterSpec, ClusterSpecBuilder, ExtendedResources, GpuRequest, JobId, LinkProfile,
    NodeConstraints, NodeRow, PoolId, Requirement, SelectorOp, SelectorTerm, Taint, TaintEffect,
    TenantId, Toleration, UNSCHEDULABLE_TAINT,
};
use kant::queue::{TenantConfig, TenantMode, Tenants};

fn row(name: &str, model: &str, gpus: usize) -> NodeRow {
    NodeRow {
        name: name.into(),
        gpu_model: Some(model.into()),
        gpus,
        ..Default::default()
    }
}

fn spec_of(rows: Vec<NodeRow>, pools: &[Option<String>]) -> Arc<ClusterSpec> {
    let mut builder = ClusterSpecBuilder::with_pools(pools);
    for r in rows {
        builder.add(r, LinkProfile::NvlinkAll).expect("valid node");
    }
    Arc::new(builder.build())
}

fn on(node: u32, devices: u32) -> Placement {
    placement(node, devices, kant::model::MILLI_PER_GPU)
}

fn key(job: u32, pod: u32) -> PodKey {
    PodKey {
        job: JobId(job),
        pod,
    }
}

#[test]
fn adopted_pods_hold_their_devices_and_a_conflict_changes_nothing() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    let mut s = scheduler(profile("default", None, None), spec);
    s.adopt(
        job(7, 2, whole(2), 0, 0),
        &[Some(on(0, 0b11)), Some(on(0, 0b1100))],
        0,
        RUNNING,
    )
    .expect("fits");
    assert_eq!(s.state().total().free_gpus, 4);
    assert_eq!(
        s.state().placement(key(7, 1)).map(|p| p.phase),
        Some(PlacementPhase::Bound)
    );
    // Device 3 is already taken: the whole adoption is refused.
    let before = s.state().total().free_gpus;
    assert!(
        s.adopt(
            job(8, 2, whole(1), 0, 0),
            &[Some(on(0, 0b10000)), Some(on(0, 0b1000))],
            0,
            RUNNING
        )
        .is_err()
    );
    assert_eq!(s.state().total().free_gpus, before);
    assert!(s.state().placement(key(8, 0)).is_none());
    // A new job gets only the four free devices.
    s.submit(job(9, 1, whole(4), 0, 0));
    let decisions = s.schedule(0);
    assert_eq!(placed_jobs(&decisions), [JobId(9)]);
    let devices = s
        .state()
        .placement(key(9, 0))
        .unwrap()
        .placement
        .gpus
        .devices;
    assert_eq!(devices, 0b1111_0000);
}

#[test]
fn pods_released_one_by_one_return_quota_and_end_the_job() {
    let spec = spec_of(vec![row("a", "H100", 8), row("b", "H100", 8)], &[]);
    let tenants = Tenants::resolve(
        &[TenantConfig {
            name: "team".into(),
            mode: TenantMode::Shared,
            weight: 1.0,
            quota: [("H100".to_string(), 16)].into(),
        }],
        &spec,
    )
    .unwrap();
    let mut s = kant::framework::Scheduler::with_tenants(
        profile("default", None, None),
        Box::new(TestBinder { refuse: false }),
        spec,
        tenants,
    );
    let mut gang = job(1, 2, whole(8), 0, 0);
    gang.tenant = TenantId(1);
    s.submit(gang);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(s.tenants().used(1, PoolId(0)), 16_000);
    assert!(s.release_pod(key(1, 0)).is_some());
    assert_eq!(s.tenants().used(1, PoolId(0)), 8_000);
    assert!(s.running().contains_key(&JobId(1)), "one pod still runs");
    assert!(s.release_pod(key(1, 0)).is_none(), "already released");
    assert!(s.release_pod(key(1, 1)).is_some());
    assert_eq!(s.tenants().used(1, PoolId(0)), 0);
    assert!(!s.running().contains_key(&JobId(1)));
    assert_eq!(s.state().total().free_gpus, 16);
}

#[test]
fn nodes_coming_and_going_keep_what_still_fits() {
    let models = [Some("H100".to_string())];
    let spec = spec_of(vec![row("a", "H100", 8), row("b", "H100", 8)], &models);
    let mut s = scheduler(profile("default", None, None), spec);
    // Job 1 bound on a; job 2 reserved (binding in flight) on b.
    s.adopt(job(1, 1, whole(8), 0, 0), &[Some(on(0, 0xff))], 0, RUNNING)
        .unwrap();
    s.adopt(job(2, 1, whole(4), 0, 0), &[Some(on(1, 0x0f))], 0, RUNNING)
        .unwrap();
    // Node a goes away, node c comes: job 1's pod is forgotten, job 2 stays on b
    // (whose id changed).
    let next = spec_of(vec![row("c", "H100", 8), row("b", "H100", 8)], &models);
    let reshaped = s.set_cluster(next, 5_000);
    assert_eq!(reshaped.lost_bound, [key(1, 0)]);
    assert!(reshaped.requeued.is_empty());
    assert!(!s.running().contains_key(&JobId(1)));
    let b = s.state().spec().node_id("b").unwrap();
    assert_eq!(s.state().placement(key(2, 0)).unwrap().placement.node, b);
    assert_eq!(s.state().total().free_gpus, 12);
    // A job waiting for 8 GPUs is placed on the new node.
    s.submit(job(3, 1, whole(8), 0, 5));
    assert_eq!(placed_jobs(&s.schedule(5_000)), [JobId(3)]);
}

#[test]
fn a_reserved_job_whose_node_vanishes_is_requeued_whole() {
    let models = [Some("H100".to_string())];
    let spec = spec_of(vec![row("a", "H100", 8), row("b", "H100", 8)], &models);
    let mut s =
        kant::framework::Scheduler::new(profile("default", None, None), Box::new(WaitBinder), spec);
    s.submit(job(1, 2, whole(8), 0, 0));
    let decisions = s.schedule(0);
    assert!(matches!(
        &decisions[..],
        [Decision::Placed { bound: false, .. }]
    ));
    let next = spec_of(vec![row("b", "H100", 8)], &models);
    let reshaped = s.set_cluster(next, 1_000);
    assert_eq!(reshaped.requeued, [JobId(1)]);
    assert_eq!(s.state().placed_pods(), 0, "both pods released");
    assert_eq!(s.pending(), 1);
}

#[test]
fn a_new_gpu_model_joins_as_a_new_pool_and_old_pool_ids_hold() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    let mut s = scheduler(profile("default", None, None), spec.clone());
    let mut wants_a100 = job(1, 1, whole(8), 0, 0);
    wants_a100.pools = vec![PoolId(1)];
    // No A100 yet: the pool exists, empty, because the world registered the model.
    let models = [Some("H100".to_string()), Some("A100".to_string())];
    s.set_cluster(spec_of(vec![row("a", "H100", 8)], &models), 0);
    s.submit(wants_a100);
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    let grown = spec_of(vec![row("a", "H100", 8), row("x", "A100", 8)], &models);
    assert_eq!(grown.pool_of_model(Some("A100")), Some(PoolId(1)));
    s.set_cluster(grown, 1_000);
    assert_eq!(placed_jobs(&s.schedule(1_000)), [JobId(1)]);
}

/// A shared tenant with `gpus` H100 of quota.
fn team(name: &str, gpus: i64) -> TenantConfig {
    TenantConfig {
        name: name.into(),
        mode: TenantMode::Shared,
        weight: 1.0,
        quota: [("H100".to_string(), gpus)].into(),
    }
}

#[test]
fn tenants_replaced_by_name_keep_charges_and_queues() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    let tenants = Tenants::resolve(&[team("x", 4), team("y", 4)], &spec).unwrap();
    let mut s = kant::framework::Scheduler::with_tenants(
        profile("default", None, None),
        Box::new(TestBinder { refuse: false }),
        spec.clone(),
        tenants,
    );
    let mut running = job(1, 1, whole(4), 0, 0);
    running.tenant = TenantId(2); // y
    s.submit(running);
    s.schedule(0);
    let mut waiting = job(2, 1, whole(8), 0, 1);
    waiting.tenant = TenantId(2);
    s.submit(waiting);
    s.schedule(1);
    // x is removed and y's quota grows: y keeps its use and its pending job.
    s.set_tenants(Tenants::resolve(&[team("y", 8)], &spec).unwrap());
    let y = s.tenants().index("y").unwrap();
    assert_eq!(y, 1);
    assert_eq!(s.tenants().used(y, PoolId(0)), 4_000);
    assert_eq!(s.pending_of(y), 1);
}

#[test]
fn a_tenant_declared_twice_is_refused_the_default_included() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    for name in ["x", "default"] {
        let err = Tenants::resolve(&[team(name, 4), team(name, 8)], &spec).unwrap_err();
        assert_eq!(err, format!("tenant {name} is declared twice"));
    }
    let tenants = Tenants::resolve(&[team("default", 4)], &spec).expect("configured once");
    assert_eq!((tenants.len(), tenants.quota(0, PoolId(0))), (1, 4_000));
}

#[test]
fn withdrawn_jobs_leave_their_queue() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(1, 1, whole(8), 0, 0));
    s.submit(job(2, 1, whole(8), 0, 1));
    s.schedule(0);
    assert_eq!(
        s.waiting().map(|w| w.job.id).collect::<Vec<_>>(),
        [JobId(2)]
    );
    assert!(s.waiting().all(|w| w.blocked_since == Some(0)));
    assert!(s.withdraw(JobId(2)).is_some());
    assert!(s.withdraw(JobId(2)).is_none());
    assert_eq!(s.pending(), 0);
}

fn labelled(name: &str, labels: &[(&str, &str)], taints: Vec<Taint>) -> NodeRow {
    NodeRow {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints,
        ..row(name, "H100", 8)
    }
}

#[test]
fn selectors_affinity_and_taints_decide_the_node() {
    let reserved = Taint {
        key: "dedicated".into(),
        value: "infer".into(),
        effect: TaintEffect::NoSchedule,
    };
    let spec = spec_of(
        vec![
            labelled("tainted", &[("zone", "a")], vec![reserved]),
            labelled("zone-a", &[("zone", "a")], vec![]),
            labelled("zone-b", &[("zone", "b")], vec![]),
        ],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec.clone());
    let with = |id: u32, constraints: NodeConstraints| {
        let mut j = job(id, 1, whole(8), 0, u64::from(id));
        j.set_constraints(constraints);
        j
    };
    s.submit(with(
        1,
        NodeConstraints {
            node_selector: vec![("zone".into(), "b".into())],
            ..NodeConstraints::default()
        },
    ));
    s.submit(with(
        2,
        NodeConstraints {
            affinity: vec![SelectorTerm {
                match_expressions: vec![Requirement {
                    key: "zone".into(),
                    op: SelectorOp::In,
                    values: vec!["a".into()],
                }],
                ..SelectorTerm::default()
            }],
            ..NodeConstraints::default()
        },
    ));
    // Only zone a is left for it, and the free node there is tainted.
    s.submit(with(
        3,
        NodeConstraints {
            node_selector: vec![("zone".into(), "a".into())],
            ..NodeConstraints::default()
        },
    ));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1), JobId(2)]);
    let node_of = |s: &kant::framework::Scheduler, job: u32| {
        let node = s.state().placement(key(job, 0)).unwrap().placement.node;
        s.state().spec().node(node).name.clone()
    };
    assert_eq!(node_of(&s, 1), "zone-b");
    assert_eq!(node_of(&s, 2), "zone-a");
    let message = s.diagnose(JobId(3), 0).unwrap().message();
    assert_eq!(
        message,
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, \
         1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint {dedicated: infer}."
    );
    // Tolerating the taint lets it in.
    s.withdraw(JobId(3));
    s.submit(with(
        4,
        NodeConstraints {
            node_selector: vec![("zone".into(), "a".into())],
            tolerations: vec![Toleration {
                key: Some("dedicated".into()),
                exists: true,
                value: String::new(),
                effect: None,
            }],
            ..NodeConstraints::default()
        },
    ));
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(4)]);
    assert_eq!(node_of(&s, 4), "tainted");
}

/// A cordoned node refuses a pod in kube-scheduler's `NodeUnschedulable` words, whatever
/// other taint it has, and takes one that tolerates the cordon (as a DaemonSet's pods do).
#[test]
fn a_cordoned_node_is_unschedulable_in_kube_schedulers_words() {
    let taint = |key: &str| Taint {
        key: key.into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    let spec = spec_of(
        vec![
            labelled(
                "cordoned",
                &[],
                vec![taint("a"), taint(UNSCHEDULABLE_TAINT)],
            ),
            labelled("tainted", &[], vec![taint("a")]),
        ],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(1, 1, whole(8), 0, 1));
    assert!(placed_jobs(&s.schedule(0)).is_empty());
    assert_eq!(
        s.diagnose(JobId(1), 0).unwrap().message(),
        "0/2 nodes are available: 1 node(s) had untolerated taint {a: }, \
         1 node(s) were unschedulable."
    );
    s.withdraw(JobId(1));
    let mut tolerant = job(2, 1, whole(8), 0, 2);
    tolerant.set_constraints(NodeConstraints {
        tolerations: vec![Toleration {
            key: None,
            exists: true,
            value: String::new(),
            effect: None,
        }],
        ..NodeConstraints::default()
    });
    s.submit(tolerant);
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
}

/// A gang's launcher that its workers' nodes cannot hold may go to any node, and is still
/// kept off the tainted ones: the taints of every pool count for it, not only the GPU
/// pools its job names.
#[test]
fn a_launcher_going_anywhere_still_meets_the_taints() {
    let system = Taint {
        key: "dedicated".into(),
        value: "system".into(),
        effect: TaintEffect::NoSchedule,
    };
    let rows = |taints: Vec<Taint>| {
        let cpu = NodeRow {
            name: "cpu-0".into(),
            gpu_model: None,
            gpus: 0,
            cpu_milli: Some(64_000),
            taints,
            ..Default::default()
        };
        let gpu = NodeRow {
            cpu_milli: Some(4_000),
            ..row("gpu-0", "H100", 8)
        };
        vec![gpu, cpu]
    };
    let gang = || {
        let mut gang = job(0, 2, whole(8), 0, 0);
        gang.pods[0] = kant::model::PodRequest {
            cpu_milli: 8_000,
            ..kant::model::PodRequest::gpus(GpuRequest::NONE)
        };
        gang
    };
    let mut s = scheduler(profile("default", None, None), spec_of(rows(vec![]), &[]));
    s.submit(gang());
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(0)]);
    assert_eq!(nodes_of(&s, 0, 2), ["cpu-0", "gpu-0"]);
    let mut s = scheduler(
        profile("default", None, None),
        spec_of(rows(vec![system]), &[]),
    );
    s.submit(gang());
    assert!(placed_jobs(&s.schedule(0)).is_empty());
}

/// A `PreferNoSchedule` taint (cluster-autoscaler's mark on a node it means to remove) ranks
/// its node after the others for the pods that do not tolerate it, and refuses none.
#[test]
fn a_prefer_no_schedule_taint_ranks_its_node_last() {
    let soft = |key: &str| Taint {
        key: key.into(),
        value: String::new(),
        effect: TaintEffect::PreferNoSchedule,
    };
    let rows = |taints: Vec<Taint>| {
        vec![
            labelled("marked", &[], taints),
            labelled("plain-1", &[], vec![]),
            labelled("plain-2", &[], vec![]),
        ]
    };
    let untainted = spec_of(rows(vec![]), &[]);
    let mut s = scheduler(profile("default", None, None), untainted);
    // The taint arrives with a change of the cluster: the first node, where E-Binpack
    // would put the first pod of an empty cluster, is marked.
    s.set_cluster(spec_of(rows(vec![soft("autoscaler")]), &[]), 0);
    s.submit(job(1, 1, whole(4), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, 1, 1), ["plain-1"]);
    // A pod that tolerates it sees no difference.
    let mut tolerant = job(2, 1, whole(8), 0, 2);
    tolerant.set_constraints(NodeConstraints {
        tolerations: vec![Toleration {
            key: Some("autoscaler".into()),
            exists: true,
            value: String::new(),
            effect: Some(TaintEffect::PreferNoSchedule),
        }],
        ..NodeConstraints::default()
    });
    s.submit(tolerant);
    assert_eq!(placed_jobs(&s.schedule(1)), [JobId(2)]);
    assert_eq!(nodes_of(&s, 2, 1), ["marked"]);
    // Once the others are full, it still takes pods: a preference, not a filter.
    s.finish(JobId(2));
    s.submit(job(3, 1, whole(8), 0, 3));
    s.submit(job(4, 1, whole(4), 0, 4));
    s.submit(job(5, 1, whole(4), 0, 5));
    assert_eq!(placed_jobs(&s.schedule(2)), [JobId(3), JobId(4), JobId(5)]);
    let nodes: Vec<Vec<String>> = (3..=5).map(|j| nodes_of(&s, j, 1)).collect();
    assert_eq!(nodes, [["plain-2"], ["plain-1"], ["marked"]]);
}

/// The node each pod of the job is placed on.
fn nodes_of(s: &kant::framework::Scheduler, job: u32, pods: u32) -> Vec<String> {
    (0..pods)
        .map(|pod| {
            let node = s.state().placement(key(job, pod)).unwrap().placement.node;
            s.state().spec().node(node).name.clone()
        })
        .collect()
}

#[test]
fn pod_limits_and_ephemeral_storage_are_accounted() {
    let spec = spec_of(
        vec![
            NodeRow {
                max_pods: Some(1),
                ..row("full", "H100", 8)
            },
            NodeRow {
                ephemeral_bytes: Some(100),
                ..row("small-disk", "H100", 8)
            },
            NodeRow {
                max_pods: Some(110),
                ephemeral_bytes: Some(1000),
                ..row("roomy", "H100", 8)
            },
        ],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec);
    // A pod placed elsewhere fills the first node's pod limit.
    s.adopt(job(1, 1, whole(1), 0, 0), &[Some(on(0, 0b1))], 0, RUNNING)
        .unwrap();
    let with_disk = |id: u32, bytes: u64| {
        let mut j = job(id, 1, whole(1), 0, u64::from(id));
        j.pods[0].ephemeral_bytes = bytes;
        j
    };
    s.submit(with_disk(2, 600));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(2)]);
    assert_eq!(nodes_of(&s, 2, 1), ["roomy"]);
    // The roomy node has 400 bytes left.
    s.submit(with_disk(3, 500));
    assert!(placed_jobs(&s.schedule(1_000)).is_empty());
    assert_eq!(
        s.diagnose(JobId(3), 1_000).unwrap().message(),
        "0/3 nodes are available: 2 Insufficient ephemeral-storage, 1 Too many pods."
    );
    // Job 2's pod gone, its storage is free again.
    assert!(s.release_pod(key(2, 0)).is_some());
    assert_eq!(placed_jobs(&s.schedule(2_000)), [JobId(3)]);
    assert_eq!(nodes_of(&s, 3, 1), ["roomy"]);
}

#[test]
fn extended_resources_are_accounted_on_each_node() {
    let listing = |name: &str, hcas: u64| NodeRow {
        extended: ExtendedResources::from([("rdma/hca".to_owned(), hcas)]),
        ..row(name, "H100", 8)
    };
    let spec = spec_of(
        vec![
            row("plain", "H100", 8),
            listing("rdma", 4),
            listing("none", 0),
        ],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec);
    let asking = |id: u32, pods: usize, gpus: u32, resources: &[(&str, u64)]| {
        let mut j = job(id, pods, whole(gpus), 0, u64::from(id));
        j.set_constraints(NodeConstraints {
            extended: resources
                .iter()
                .map(|&(name, amount)| (name.to_owned(), amount))
                .collect(),
            ..NodeConstraints::default()
        });
        j
    };
    // Each pod of a gang asks for 2: both go to the one node that lists 4, which they
    // then hold whole.
    s.submit(asking(1, 2, 2, &[("rdma/hca", 2)]));
    // More than any node lists, and a resource no node lists: never placed.
    s.submit(asking(2, 1, 1, &[("rdma/hca", 5)]));
    s.submit(asking(3, 1, 1, &[("example.com/foo", 1)]));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    assert_eq!(nodes_of(&s, 1, 2), ["rdma", "rdma"]);
    let held = |s: &Scheduler| {
        let node = s.state().spec().node_id("rdma").unwrap();
        s.state().extended_used(node).cloned().unwrap_or_default()
    };
    assert_eq!(
        held(&s),
        ExtendedResources::from([("rdma/hca".to_owned(), 4)])
    );
    for (id, asked) in [(2, "5 rdma/hca"), (3, "1 example.com/foo")] {
        let waiting = s.waiting().find(|w| w.job.id == JobId(id)).unwrap();
        assert!(waiting.unresolvable, "job {id}");
        assert_eq!(
            s.diagnose(JobId(id), 0).unwrap().message(),
            format!("no node of the job's pools has {asked} allocatable for each pod")
        );
    }
    // The node that lists it has GPUs free but its rdma/hca all held: a pod asking for
    // one waits, and the nodes that lack it are no candidates.
    s.submit(asking(4, 1, 1, &[("rdma/hca", 1)]));
    assert!(placed_jobs(&s.schedule(1_000)).is_empty());
    assert_eq!(
        s.diagnose(JobId(4), 1_000).unwrap().message(),
        "0/3 nodes are available: 3 Insufficient rdma/hca."
    );
    // One pod of the gang gone: its two return, and the waiting pod takes one.
    s.release_pod(key(1, 0));
    assert_eq!(
        held(&s),
        ExtendedResources::from([("rdma/hca".to_owned(), 2)])
    );
    assert_eq!(placed_jobs(&s.schedule(2_000)), [JobId(4)]);
    assert_eq!(
        held(&s),
        ExtendedResources::from([("rdma/hca".to_owned(), 3)])
    );
    // A gang whose pods fit the node's GPUs but not its rdma/hca together waits whole.
    s.submit(asking(5, 2, 1, &[("rdma/hca", 1)]));
    assert!(placed_jobs(&s.schedule(3_000)).is_empty());
    s.release_pod(key(1, 1));
    assert_eq!(placed_jobs(&s.schedule(4_000)), [JobId(5)]);
    assert_eq!(nodes_of(&s, 5, 2), ["rdma", "rdma"]);
    assert_eq!(
        held(&s),
        ExtendedResources::from([("rdma/hca".to_owned(), 3)])
    );
}

/// A gang's members keep their own node rules: a launcher that asks for no rdma/hca and
/// must stay off the nodes labelled `role: worker`, and two workers that ask for the only
/// rdma/hca of each such node. Had the launcher taken the workers' rules, it would need a
/// third rdma/hca and the gang would never fit.
#[test]
fn a_gangs_members_are_placed_by_their_own_node_rules() {
    let worker_node = |name: &str| NodeRow {
        extended: ExtendedResources::from([("rdma/hca".to_owned(), 1)]),
        labels: [("role".to_owned(), "worker".to_owned())].into(),
        ..row(name, "H100", 8)
    };
    let spec = spec_of(
        vec![
            worker_node("w1"),
            worker_node("w2"),
            row("plain", "H100", 8),
        ],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec);
    let mut mpi = job(1, 3, whole(4), 0, 0);
    mpi.pods[0].gpu = GpuRequest::NONE;
    let launcher = NodeConstraints {
        affinity: vec![SelectorTerm {
            match_expressions: vec![Requirement {
                key: "role".into(),
                op: SelectorOp::NotIn,
                values: vec!["worker".into()],
            }],
            ..SelectorTerm::default()
        }],
        ..NodeConstraints::default()
    };
    let worker = Arc::new(NodeConstraints {
        extended: ExtendedResources::from([("rdma/hca".to_owned(), 1)]),
        ..NodeConstraints::default()
    });
    mpi.constraints = vec![Some(Arc::new(launcher)), Some(worker.clone()), Some(worker)];
    s.submit(mpi);
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(1)]);
    let mut workers = nodes_of(&s, 1, 3).split_off(1);
    workers.sort();
    assert_eq!(nodes_of(&s, 1, 1), ["plain"]);
    assert_eq!(workers, ["w1", "w2"]);
}

#[test]
fn devices_unhealthy_at_first_sight_are_never_given() {
    let spec = spec_of(
        vec![NodeRow {
            unhealthy: 0b1,
            ..row("a", "H100", 8)
        }],
        &[],
    );
    let mut s = scheduler(profile("default", None, None), spec);
    s.submit(job(1, 1, whole(8), 0, 0));
    s.submit(job(2, 1, whole(7), 0, 1));
    assert_eq!(placed_jobs(&s.schedule(0)), [JobId(2)]);
    let devices = s
        .state()
        .placement(key(2, 0))
        .unwrap()
        .placement
        .gpus
        .devices;
    assert_eq!(devices & 1, 0);
}

/// A binder whose outcome the world reports later.
struct WaitBinder;

impl kant::framework::Plugin for WaitBinder {
    fn name(&self) -> &'static str {
        "wait-binder"
    }
}

impl kant::framework::Bind for WaitBinder {
    fn bind(&self, _: &kant::model::Job, _: &kant::framework::JobPlan) -> kant::framework::Status {
        kant::framework::Status::new(kant::framework::Code::Wait, "binding")
    }
}

#[test]
fn victims_held_until_gone_keep_what_their_preemptor_left() {
    let spec = spec_of(vec![row("a", "H100", 8)], &[]);
    let mut config = profile_config("default", None, None);
    config
        .plugins
        .push(kant::config::PluginConfig::Name("preemption".into()));
    let mut s = scheduler(build(&config), spec);
    s.hold_victims_until_gone();
    // A low-priority job placed long ago (past the minimum runtime).
    s.adopt(job(1, 1, whole(8), 0, 0), &[Some(on(0, 0xff))], 0, RUNNING)
        .unwrap();
    s.submit(job(2, 1, whole(4), 100, 7_200));
    s.submit(job(3, 1, whole(4), 0, 7_201));
    let decisions = s.schedule(7_200_000);
    assert!(
        decisions
            .iter()
            .any(|d| matches!(d, Decision::Preempted { victims, .. } if victims == &[JobId(1)]))
    );
    assert_eq!(
        placed_jobs(&decisions),
        [JobId(2)],
        "job 3 waits for the victim"
    );
    assert_eq!(
        s.state().total().free_gpus,
        0,
        "the victim holds the other four"
    );
    assert!(s.waiting().all(|w| w.job.id != JobId(1)), "not requeued");
    // Its pod is gone: job 3 takes the room.
    assert!(s.release_pod(key(1, 0)).is_some());
    assert!(!s.running().contains_key(&JobId(1)));
    assert_eq!(placed_jobs(&s.schedule(7_200_001)), [JobId(3)]);
}

#[test]
fn a_node_that_changes_gpu_model_moves_its_pods_charges_to_the_new_pool() {
    let models = [Some("H100".to_string()), Some("A100".to_string())];
    let spec = spec_of(vec![row("a", "H100", 8), row("b", "H100", 8)], &models);
    let mut s = scheduler(profile("default", None, None), spec);
    s.adopt(
        job(1, 2, whole(4), 0, 0),
        &[Some(on(0, 0x0f)), Some(on(1, 0x0f))],
        0,
        RUNNING,
    )
    .unwrap();
    let tenant = 0; // the default tenant
    assert_eq!(s.tenants().used(tenant, PoolId(0)), 8_000);
    // Node a is relabelled A100 (its pod keeps running there).
    let relabelled = spec_of(vec![row("a", "A100", 8), row("b", "H100", 8)], &models);
    assert!(s.set_cluster(relabelled, 1_000).lost_bound.is_empty());
    assert_eq!(s.tenants().used(tenant, PoolId(0)), 4_000);
    assert_eq!(s.tenants().used(tenant, PoolId(1)), 4_000);
    // Both pods end: nothing stays charged on either pool.
    assert!(s.release_pod(key(1, 0)).is_some());
    assert!(s.release_pod(key(1, 1)).is_some());
    assert_eq!(s.tenants().used(tenant, PoolId(0)), 0);
    assert_eq!(s.tenants().used(tenant, PoolId(1)), 0);
    assert!(!s.running().contains_key(&JobId(1)));
}
