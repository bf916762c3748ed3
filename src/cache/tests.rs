//! Tests of the cluster state: aggregates kept equal to a recount from the nodes, no
//! device overcommitted, snapshots unaffected by later changes, under hand-made and random
//! sequences of placements, confirmations and removals.

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::model::{ClusterSpecBuilder, LeafPath, LinkProfile, NodeRow, bits};

fn cluster(nodes: &[(usize, Option<&str>)]) -> Arc<ClusterSpec> {
    let mut b = ClusterSpecBuilder::new();
    for (i, &(gpus, leaf)) in nodes.iter().enumerate() {
        let row = NodeRow {
            name: format!("n{i}"),
            gpu_model: (gpus > 0).then(|| "H100".to_string()),
            gpus,
            cpu_milli: None,
            memory_bytes: None,
            leaf: leaf.map(|l| LeafPath {
                superspine: "s".into(),
                spine: "p".into(),
                leaf: l.into(),
            }),
            hbd: (i % 3 != 2).then(|| format!("hbd-{}", i % 2)),
            ..Default::default()
        };
        b.add(row, LinkProfile::NvlinkPairs).unwrap();
    }
    Arc::new(b.build())
}

fn key(job: u32, pod: u32) -> PodKey {
    PodKey {
        job: JobId(job),
        pod,
    }
}

fn place(node: u32, devices: u32, milli_each: Milli) -> Placement {
    Placement {
        node: NodeId(node),
        gpus: DeviceAlloc {
            devices,
            milli_each,
        },
        cpu_milli: 0,
        memory_bytes: 0,
        ephemeral_bytes: 0,
    }
}

/// Recomputes every aggregate from the node states and checks the stored ones.
fn assert_aggregates_match(state: &ClusterState) {
    let spec = state.spec().clone();
    let mut groups = vec![GpuAggregate::default(); spec.groups.len()];
    let mut pools = vec![GpuAggregate::default(); spec.pools.len()];
    let mut hbds = vec![GpuAggregate::default(); spec.hbds.len()];
    let mut total = GpuAggregate::default();
    for (id, node) in state.nodes() {
        groups[spec.node_group[id.index()].index()].apply(node, 1);
        pools[spec.node(id).pool.index()].apply(node, 1);
        if let Some(hbd) = spec.node(id).topology.hbd {
            hbds[hbd as usize].apply(node, 1);
        }
        total.apply(node, 1);
    }
    for (i, h) in hbds.iter().enumerate() {
        assert_eq!(state.hbd(i as u32), h, "hbd {i}");
    }
    for (i, g) in groups.iter().enumerate() {
        assert_eq!(state.group(GroupId(i as u32)), g, "group {i}");
    }
    for (i, p) in pools.iter().enumerate() {
        assert_eq!(state.pool(PoolId(i as u16)), p, "pool {i}");
    }
    assert_eq!(state.total(), &total);
}

/// Recomputes device use from the placements: no device past capacity, no whole-GPU pod
/// sharing a device, and node states equal to the sum of their placements.
fn assert_no_device_overcommitted(state: &ClusterState) {
    let spec = state.spec();
    let mut used = vec![[0u32; 32]; spec.nodes.len()];
    let mut whole_owner = vec![[false; 32]; spec.nodes.len()];
    for (_, placed) in state.placements() {
        let p = placed.placement;
        for d in bits(p.gpus.devices) {
            let n = p.node.index();
            if p.gpus.milli_each == MILLI_PER_GPU {
                assert!(used[n][d] == 0 && !whole_owner[n][d], "device given twice");
                whole_owner[n][d] = true;
            }
            assert!(!whole_owner[n][d] || p.gpus.milli_each == MILLI_PER_GPU || used[n][d] == 0);
            used[n][d] += p.gpus.milli_each;
            assert!(used[n][d] <= MILLI_PER_GPU, "device past capacity");
        }
    }
    for (id, node) in state.nodes() {
        for (d, &milli) in used[id.index()]
            .iter()
            .enumerate()
            .take(spec.node(id).gpus())
        {
            assert_eq!(node.device_used(d), milli);
        }
    }
}

#[test]
fn absurd_memory_sums_saturate_rather_than_wrap() {
    // Nodes of unknown capacity take any request: two pods of 10 EiB each on one node.
    let mut state = ClusterState::new(cluster(&[(8, None)]));
    let huge = |devices| Placement {
        memory_bytes: 10 << 60,
        ..place(0, devices, 1000)
    };
    state.assume(key(1, 0), huge(0b1)).unwrap();
    state.assume(key(2, 0), huge(0b10)).unwrap();
    assert_eq!(state.node(NodeId(0)).memory_used, u64::MAX);
    state.forget(key(1, 0)).unwrap();
    state.forget(key(2, 0)).unwrap();
    assert_eq!(state.node(NodeId(0)).memory_used, 0);
}

#[test]
fn aggregates_follow_assume_and_forget() {
    let mut state = ClusterState::new(cluster(&[(8, Some("a")), (8, Some("a")), (0, None)]));
    assert_eq!(state.total().free_gpus, 16);
    assert_eq!(state.total().free_nodes, 2);
    state.assume(key(1, 0), place(0, 0b11, 1000)).unwrap();
    state.assume(key(2, 0), place(1, 0b100, 500)).unwrap();
    let total = state.total();
    assert_eq!(total.free_gpus, 13);
    assert_eq!(total.free_nodes, 0);
    assert_eq!(total.free_histogram[6], 1);
    assert_eq!(total.free_histogram[7], 1);
    assert_eq!(total.used_milli, 2500);
    assert_eq!(total.sharing_milli, 2500);
    assert_eq!(total.fragmented_nodes, 2);
    state.forget(key(1, 0)).unwrap();
    assert_eq!(state.total().free_gpus, 15);
    assert_aggregates_match(&state);
}

#[test]
fn only_pods_that_share_their_node_count_as_sharing() {
    let mut state = ClusterState::new(cluster(&[(8, Some("a")), (8, Some("a")), (4, None)]));
    state.assume(key(1, 0), place(0, 0xff, 1000)).unwrap(); // the whole node
    state.assume(key(2, 0), place(1, 0x0f, 1000)).unwrap(); // half of it
    state.assume(key(3, 0), place(2, 0x1, 250)).unwrap(); // a fraction
    assert_eq!(state.total().used_milli, 12_250);
    assert_eq!(state.total().sharing_milli, 4_250);
    // Health does not change what a placement counts as: taking a device away and giving
    // it back leaves the sums as they were.
    state.set_device_health(NodeId(0), 3, false).unwrap();
    state.forget(key(1, 0)).unwrap();
    state.set_device_health(NodeId(0), 3, true).unwrap();
    state.forget(key(2, 0)).unwrap();
    assert_eq!(state.total().sharing_milli, 250);
    assert_aggregates_match(&state);
}

#[test]
fn whole_gpu_never_shares_a_device() {
    let mut state = ClusterState::new(cluster(&[(8, None)]));
    state.assume(key(1, 0), place(0, 0b1, 300)).unwrap();
    let conflict = state.assume(key(2, 0), place(0, 0b1, 1000));
    assert!(matches!(conflict, Err(CacheError::DeviceConflict { .. })));
    state.assume(key(3, 0), place(0, 0b1, 700)).unwrap();
    let full = state.assume(key(4, 0), place(0, 0b1, 1));
    assert!(full.is_err());
    assert_eq!(state.placed_pods(), 2);
}

#[test]
fn snapshot_is_unaffected_by_later_changes() {
    let mut state = ClusterState::new(cluster(&[(8, None), (8, None)]));
    let before = state.snapshot();
    state.assume(key(1, 0), place(1, 0xff, 1000)).unwrap();
    assert_eq!(before.total().free_gpus, 16);
    assert_eq!(before.placed_pods(), 0);
    assert_eq!(state.total().free_gpus, 8);
}

#[test]
fn unhealthy_device_takes_no_new_pod_and_keeps_its_own() {
    let mut state = ClusterState::new(cluster(&[(8, None)]));
    state.assume(key(1, 0), place(0, 0b1, 500)).unwrap();
    state.set_device_health(NodeId(0), 0, false).unwrap();
    state.set_device_health(NodeId(0), 1, false).unwrap();
    assert!(state.assume(key(2, 0), place(0, 0b1, 100)).is_err());
    assert!(state.assume(key(3, 0), place(0, 0b10, 1000)).is_err());
    assert_eq!(state.total().free_gpus, 6);
    assert!(state.placement(key(1, 0)).is_some());
    assert_aggregates_match(&state);
}

/// GFR counts nodes that strand free GPUs: a node whose only free device is unhealthy
/// strands none, and counts again once that device is back.
#[test]
fn a_node_whose_only_free_device_is_unhealthy_is_not_fragmented() {
    let mut state = ClusterState::new(cluster(&[(2, None)]));
    state
        .assume(key(1, 0), place(0, 0b1, MILLI_PER_GPU))
        .unwrap();
    assert_eq!(state.total().fragmented_nodes, 1);
    state.set_device_health(NodeId(0), 1, false).unwrap();
    assert_eq!(state.total().fragmented_nodes, 0);
    assert_aggregates_match(&state);
    state.set_device_health(NodeId(0), 1, true).unwrap();
    assert_eq!(state.total().fragmented_nodes, 1);
    // Half a GPU free beside an unhealthy device still strands room.
    state.set_device_health(NodeId(0), 1, false).unwrap();
    state.forget(key(1, 0)).unwrap();
    state.assume(key(2, 0), place(0, 0b1, 500)).unwrap();
    assert_eq!(state.total().fragmented_nodes, 1);
    assert_aggregates_match(&state);
}

#[test]
fn extended_resources_are_held_from_record_to_the_last_placement() {
    use crate::model::{NodeConstraints, PodRequest};
    let hca = |n: u64| ExtendedResources::from([("rdma/hca".to_owned(), n)]);
    let asking = |n: u64| {
        Arc::new(NodeConstraints {
            extended: hca(n),
            ..NodeConstraints::default()
        })
    };
    // Pods 0 and 1 ask for 2 each, pod 2 for 1.
    let pods = vec![PodRequest::gpus(crate::model::GpuRequest::Whole(1)); 3];
    let job = Job {
        constraints: vec![Some(asking(2)), Some(asking(2)), Some(asking(1))],
        ..Job::new(JobId(1), pods)
    };
    let mut state = ClusterState::new(cluster(&[(8, None), (8, None)]));
    // Placed before the job is recorded: accounted when it is.
    state
        .assume(key(1, 0), place(0, 0b1, MILLI_PER_GPU))
        .unwrap();
    assert_eq!(state.extended_used(NodeId(0)), None);
    state.record_job(&job);
    assert_eq!(state.extended_used(NodeId(0)), Some(&hca(2)));
    // Recorded again (replaced): not counted twice. Placed after: accounted at once.
    state.record_job(&job);
    state
        .assume(key(1, 1), place(0, 0b10, MILLI_PER_GPU))
        .unwrap();
    state
        .assume(key(1, 2), place(1, 0b1, MILLI_PER_GPU))
        .unwrap();
    assert_eq!(state.extended_used(NodeId(0)), Some(&hca(4)));
    assert_eq!(state.extended_used(NodeId(1)), Some(&hca(1)));
    // A rebuilt cluster keeps them.
    let mut rebuilt = ClusterState::new(state.spec().clone());
    for (&pod, placed) in state.placements() {
        rebuilt
            .restore(pod, placed.placement, placed.phase)
            .unwrap();
    }
    rebuilt.keep_jobs(&state);
    assert_eq!(rebuilt.extended_used(NodeId(0)), Some(&hca(4)));
    // Each forgotten pod returns its share; the last one drops the job.
    state.forget(key(1, 0)).unwrap();
    assert_eq!(state.extended_used(NodeId(0)), Some(&hca(2)));
    state.forget(key(1, 1)).unwrap();
    state.forget(key(1, 2)).unwrap();
    assert_eq!(state.extended_used(NodeId(0)), None);
    assert_eq!(state.extended_used(NodeId(1)), None);
    state
        .assume(key(1, 0), place(0, 0b1, MILLI_PER_GPU))
        .unwrap();
    assert_eq!(
        state.extended_used(NodeId(0)),
        None,
        "the job was forgotten"
    );
}

#[test]
fn confirm_and_forget_need_a_placement() {
    let mut state = ClusterState::new(cluster(&[(8, None)]));
    assert_eq!(
        state.confirm(key(1, 0)),
        Err(CacheError::NotPlaced(key(1, 0)))
    );
    state.assume(key(1, 0), place(0, 0b1, 1000)).unwrap();
    state.confirm(key(1, 0)).unwrap();
    assert_eq!(
        state.placement(key(1, 0)).unwrap().phase,
        PlacementPhase::Bound
    );
    assert!(state.assume(key(1, 0), place(0, 0b10, 1000)).is_err());
}

#[derive(Debug, Clone)]
enum Op {
    Assume {
        job: u32,
        node: u32,
        devices: u32,
        milli: Milli,
    },
    Forget {
        job: u32,
    },
    Confirm {
        job: u32,
    },
    Health {
        node: u32,
        device: usize,
        healthy: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..40, 0u32..10, 1u32..65536, prop_oneof![Just(1000u32), 1u32..1000])
            .prop_map(|(job, node, devices, milli)| Op::Assume { job, node, devices, milli }),
        2 => (0u32..40).prop_map(|job| Op::Forget { job }),
        2 => (0u32..40).prop_map(|job| Op::Confirm { job }),
        1 => (0u32..10, 0usize..16, any::<bool>())
            .prop_map(|(node, device, healthy)| Op::Health { node, device, healthy }),
    ]
}

/// The cluster aggregate computed from first principles: the placements (device use) and
/// the health the test itself set, not from the cache's node states.
fn assert_total_from_first_principles(state: &ClusterState, unhealthy: &HashSet<(u32, usize)>) {
    let spec = state.spec();
    let mut used = vec![vec![0u32; 32]; spec.nodes.len()];
    for (_, placed) in state.placements() {
        let p = placed.placement;
        for d in bits(p.gpus.devices) {
            used[p.node.index()][d] += p.gpus.milli_each;
        }
    }
    let sharing_milli: u64 = state
        .placements()
        .map(|(_, placed)| placed.placement)
        .filter(|p| {
            let all = spec.node(p.node).all_devices();
            p.gpus.devices != all || p.gpus.milli_each < MILLI_PER_GPU
        })
        .map(|p| p.gpus.total_milli())
        .sum();
    let (mut free_gpus, mut free_nodes, mut used_milli, mut fragmented) = (0u32, 0u32, 0u64, 0u32);
    let mut max_free = 0u32;
    let (mut shared_room_max, mut shared_room_milli) = (0, 0u64);
    let mut roomiest_of_nodes = Vec::new();
    for (index, node) in spec.nodes.iter().enumerate() {
        let devices = node.gpus();
        let rooms: Vec<u32> = (0..devices)
            .filter(|&d| used[index][d] > 0 && !unhealthy.contains(&(index as u32, d)))
            .map(|d| MILLI_PER_GPU - used[index][d])
            .collect();
        let roomiest = rooms.iter().copied().max().unwrap_or(0);
        shared_room_max = shared_room_max.max(roomiest);
        roomiest_of_nodes.push(roomiest);
        shared_room_milli += rooms.iter().map(|&r| u64::from(r)).sum::<u64>();
        let free = (0..devices)
            .filter(|&d| used[index][d] == 0 && !unhealthy.contains(&(index as u32, d)))
            .count() as u32;
        let node_used: u64 = used[index].iter().map(|&m| u64::from(m)).sum();
        free_gpus += free;
        max_free = max_free.max(free);
        free_nodes += u32::from(devices > 0 && free == devices as u32);
        used_milli += node_used;
        // Room left on healthy devices, free or shared.
        let room = free > 0 || rooms.iter().any(|&r| r > 0);
        fragmented += u32::from(node_used > 0 && room);
    }
    let assumed: u64 = state
        .placements()
        .filter(|(_, placed)| placed.phase == PlacementPhase::Assumed)
        .map(|(_, placed)| placed.placement.gpus.total_milli())
        .sum();
    assert_eq!(state.assumed_milli(), assumed);
    let total = state.total();
    assert_eq!(
        (
            total.free_gpus,
            total.free_nodes,
            total.used_milli,
            total.sharing_milli,
            total.fragmented_nodes
        ),
        (free_gpus, free_nodes, used_milli, sharing_milli, fragmented)
    );
    assert_eq!(total.shared_room_max, shared_room_max);
    let at_max = roomiest_of_nodes
        .iter()
        .filter(|&&r| r > 0 && r == shared_room_max);
    assert_eq!(total.shared_room_at_max, at_max.count() as u32);
    assert_eq!(total.shared_room_milli, shared_room_milli);
    assert_eq!(total.max_free_on_node(), max_free);
    let max_island = (state.nodes()).map(|(_, node)| node.nvlink_island()).max();
    assert_eq!(total.max_nvlink_island(), max_island.unwrap_or(0));
}

/// A random cluster: 1 to 10 nodes of 0 to 16 GPUs, some under one of two leaves.
fn random_cluster() -> impl Strategy<Value = Vec<(usize, Option<&'static str>)>> {
    proptest::collection::vec(
        (
            0usize..=16,
            prop_oneof![Just(None), Just(Some("a")), Just(Some("b"))],
        ),
        1..10,
    )
}

proptest! {
    #[test]
    fn invariants_hold_under_random_changes(
        nodes in random_cluster(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let spec = cluster(&nodes);
        let mut state = ClusterState::new(spec);
        let mut unhealthy = HashSet::new();
        let mut snapshots = Vec::new();
        for op in ops {
            match op {
                Op::Assume { job, node, devices, milli } => {
                    let node = node % nodes.len() as u32;
                    let n = state.spec().node(NodeId(node)).gpus();
                    let devices = devices & crate::model::node_device_mask(n);
                    let devices = if milli < 1000 { devices & devices.wrapping_neg() } else { devices };
                    let _ = state.assume(key(job, 0), place(node, devices, milli));
                }
                Op::Forget { job } => { let _ = state.forget(key(job, 0)); }
                Op::Confirm { job } => { let _ = state.confirm(key(job, 0)); }
                Op::Health { node, device, healthy } => {
                    let node = node % nodes.len() as u32;
                    if state.set_device_health(NodeId(node), device, healthy).is_ok() {
                        if healthy {
                            unhealthy.remove(&(node, device));
                        } else {
                            unhealthy.insert((node, device));
                        }
                    }
                }
            }
            assert_no_device_overcommitted(&state);
            assert_aggregates_match(&state);
            assert_total_from_first_principles(&state, &unhealthy);
            if snapshots.len() < 5 { snapshots.push((state.snapshot(), state.total().free_gpus)); }
        }
        for (snapshot, free) in snapshots {
            prop_assert_eq!(snapshot.total().free_gpus, free);
            assert_aggregates_match(&snapshot);
        }
    }
}

/// Shared-device room is exact to the milli-GPU (330 asked does not fit 300 free), and
/// when the roomiest shared device fills, the next roomiest one counts.
#[test]
fn shared_room_is_exact_and_follows_the_roomiest_device() {
    let mut state = ClusterState::new(cluster(&[(2, Some("a")), (1, Some("b"))]));
    let (a, b) = (GroupId(0), GroupId(1));
    assert!(!state.total().has_shared_room(1), "no shared device");
    // 0.7 on node 0's device 0 leaves 300; device 1 stays whole and is no shared room.
    state.assume(key(1, 0), place(0, 0b1, 700)).unwrap();
    assert!(state.group(a).has_shared_room(300));
    assert!(!state.group(a).has_shared_room(301));
    // 0.65 on node 1 leaves 350: room for 330 in its group only.
    state.assume(key(2, 0), place(1, 0b1, 650)).unwrap();
    assert!(!state.group(a).has_shared_room(330));
    assert!(state.group(b).has_shared_room(330));
    assert!(!state.total().has_shared_room(351));
    assert_eq!(state.total().shared_room_milli, 650);
    // Node 1's device fills: the most room is node 0's 300 again.
    state.assume(key(3, 0), place(1, 0b1, 350)).unwrap();
    assert!(!state.total().has_shared_room(301));
    assert!(state.total().has_shared_room(300));
    assert!(!state.group(b).has_shared_room(1));
    state.assume(key(4, 0), place(0, 0b1, 300)).unwrap();
    assert!(
        !state.total().has_shared_room(1),
        "every shared device is full"
    );
    assert_eq!(state.total().shared_room_milli, 0);
    assert_aggregates_match(&state);
}

/// Nodes at the most room are counted: one of them filling leaves the most room to the
/// others without a look at the group's nodes, and the last one's filling finds the next.
#[test]
fn nodes_at_the_most_shared_room_are_counted() {
    let mut state = ClusterState::new(cluster(&[(1, Some("a")), (1, Some("a")), (1, Some("a"))]));
    let group = GroupId(0);
    for node in 0..2 {
        state.assume(key(node, 0), place(node, 0b1, 500)).unwrap();
    }
    state.assume(key(2, 0), place(2, 0b1, 800)).unwrap();
    let at = |state: &ClusterState| {
        let g = state.group(group);
        (g.shared_room_max, g.shared_room_at_max)
    };
    assert_eq!(at(&state), (500, 2));
    state.assume(key(0, 1), place(0, 0b1, 500)).unwrap();
    assert_eq!(at(&state), (500, 1));
    state.assume(key(1, 1), place(1, 0b1, 500)).unwrap();
    assert_eq!(at(&state), (200, 1));
    state.forget(key(1, 1)).unwrap();
    assert_eq!(at(&state), (500, 1));
    assert_aggregates_match(&state);
}
