//! Snapshot cost: the cache's persistent snapshot against a deep copy of the same state,
//! each followed by the same change to 1% of the nodes.
//!
//! The state: 12,500 nodes of 8 GPUs (`common`'s cluster), every node running four 1-GPU
//! pods on devices 0-3, i.e. 50,000 placements, 50% of the GPUs. The change: one more 1-GPU
//! pod (device 4) on each of 125 nodes (1%), nodes 0, 100, 200, ... so that every change
//! falls in a different search group and a different leaf of the node array.
//!
//! - `persistent`: `ClusterState::snapshot()` (an O(1) clone sharing structure), then
//!   `assume` of the 125 pods, which copies the touched paths and moves the node's group,
//!   pool and cluster aggregates.
//! - `deep_copy`: a plain struct with the same contents (a `Vec<NodeState>`, the group and
//!   pool aggregates in `Vec<GpuAggregate>`, the cluster aggregate and a
//!   `std::collections::HashMap<PodKey, PlacedPod>` of the placements, read through the
//!   cache's public accessors), `.clone()`d, then the same 125 changes written into it.
//!   `NodeState`'s mutators are crate-private, so the changed values come from a second
//!   `ClusterState` with the 125 pods assumed: each change overwrites the node's slot, its
//!   group's and pool's aggregate and the cluster aggregate with those values and inserts
//!   the placement. That writes the same slots the cache writes, without the fit check and
//!   aggregate arithmetic `assume` does, which if anything favours the deep copy. The bench
//!   checks once that the deep copy ends equal to the persistent result.
//! - `snapshot_only` and `deep_copy_only`: the copy alone, for reference.
//!
//! Dropping the result is timed with it (`iter`): a scheduling cycle drops its snapshot, and
//! in this steady state the allocator hands the freed memory back to the next copy. Kept
//! alive instead (`iter_with_large_drop`, which holds a batch of results), every copy lands
//! on fresh pages and page faults dominate both variants (measured once: persistent 0.94
//! ms, deep copy 2.67 ms, over 40% of the persistent profile in the kernel). The placement
//! map keeps `PlacedPod` (placement and phase), the value type the cache keeps.
//!
//! Run: `cargo bench --bench snapshot` (add
//! `-- --quick` for a short run). The machine is shared: compare figures side by side from
//! one run, not across runs.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kant::cache::{
    ClusterState, DeviceAlloc, GpuAggregate, NodeState, PlacedPod, Placement, PodKey,
};
use kant::model::{GroupId, JobId, NodeId, PoolId};

const NODES: usize = 12_500;
/// 1-GPU pods per node in the pre-filled state (devices 0..PODS_PER_NODE).
const PODS_PER_NODE: u32 = 4;
/// One node in this many is changed: 1%.
const CHANGE_EVERY: usize = 100;
/// Job ids of the changes start here, clear of the pre-fill's.
const CHANGE_FIRST_ID: u32 = 1_000_000;

/// The cluster state as a plain, deep-copied struct.
#[derive(Clone, PartialEq)]
struct DeepState {
    nodes: Vec<NodeState>,
    groups: Vec<GpuAggregate>,
    pools: Vec<GpuAggregate>,
    total: GpuAggregate,
    placements: HashMap<PodKey, PlacedPod>,
}

impl DeepState {
    fn of(state: &ClusterState) -> Self {
        let spec = state.spec();
        Self {
            nodes: state.nodes().map(|(_, n)| *n).collect(),
            groups: (0..spec.groups.len())
                .map(|g| *state.group(GroupId(g as u32)))
                .collect(),
            pools: (0..spec.pools.len())
                .map(|p| *state.pool(PoolId(p as u16)))
                .collect(),
            total: *state.total(),
            placements: state.placements().map(|(k, p)| (*k, *p)).collect(),
        }
    }
}

/// One change as the deep copy applies it: the slots to overwrite and the placement to add.
struct DeepChange {
    node: usize,
    node_state: NodeState,
    group: usize,
    group_aggregate: GpuAggregate,
    pool: usize,
    pool_aggregate: GpuAggregate,
    total: GpuAggregate,
    key: PodKey,
    placed: PlacedPod,
}

fn one_gpu(node: usize, device: u32) -> Placement {
    Placement {
        node: NodeId(node as u32),
        gpus: DeviceAlloc::whole(1 << device),
        cpu_milli: 0,
        memory_bytes: 0,
        ephemeral_bytes: 0,
    }
}

/// The 50%-full state: four 1-GPU pods on every node.
fn half_full_state() -> ClusterState {
    let mut state = ClusterState::new(common::cluster(NODES));
    for node in 0..NODES {
        for device in 0..PODS_PER_NODE {
            let key = PodKey {
                job: JobId(node as u32 * PODS_PER_NODE + device),
                pod: 0,
            };
            state
                .assume(key, one_gpu(node, device))
                .expect("the pre-fill fits");
        }
    }
    state
}

/// The 1% change: one 1-GPU pod on device 4 of every 100th node.
fn changes() -> Vec<(PodKey, Placement)> {
    (0..NODES)
        .step_by(CHANGE_EVERY)
        .enumerate()
        .map(|(i, node)| {
            let key = PodKey {
                job: JobId(CHANGE_FIRST_ID + i as u32),
                pod: 0,
            };
            (key, one_gpu(node, PODS_PER_NODE))
        })
        .collect()
}

fn assume_all(state: &mut ClusterState, changes: &[(PodKey, Placement)]) {
    for &(key, placement) in changes {
        state.assume(key, placement).expect("the change fits");
    }
}

fn apply_deep(copy: &mut DeepState, changes: &[DeepChange]) {
    for change in changes {
        copy.nodes[change.node] = change.node_state;
        copy.groups[change.group] = change.group_aggregate;
        copy.pools[change.pool] = change.pool_aggregate;
        copy.total = change.total;
        copy.placements.insert(change.key, change.placed);
    }
}

fn snapshot_vs_deep_copy(c: &mut Criterion) {
    let state = half_full_state();
    let changes = changes();
    assert_eq!(changes.len(), NODES / CHANGE_EVERY);

    let mut changed = state.snapshot();
    assume_all(&mut changed, &changes);
    let spec = state.spec().clone();
    let deep_changes: Vec<DeepChange> = changes
        .iter()
        .map(|&(key, placement)| {
            let node = placement.node;
            let group = spec.node_group[node.index()];
            let pool = spec.node(node).pool;
            DeepChange {
                node: node.index(),
                node_state: *changed.node(node),
                group: group.index(),
                group_aggregate: *changed.group(group),
                pool: pool.index(),
                pool_aggregate: *changed.pool(pool),
                total: *changed.total(),
                key,
                placed: *changed.placement(key).expect("the change was assumed"),
            }
        })
        .collect();
    let deep = DeepState::of(&state);
    let mut deep_changed = deep.clone();
    apply_deep(&mut deep_changed, &deep_changes);
    assert!(
        deep_changed == DeepState::of(&changed),
        "the deep copy's change differs from the cache's"
    );

    let mut group = c.benchmark_group("snapshot/12500_nodes_50pct_change_1pct");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("persistent", |b| {
        b.iter(|| {
            let mut snapshot = state.snapshot();
            assume_all(&mut snapshot, &changes);
            snapshot
        });
    });
    group.bench_function("deep_copy", |b| {
        b.iter(|| {
            let mut copy = deep.clone();
            apply_deep(&mut copy, &deep_changes);
            copy
        });
    });
    group.bench_function("snapshot_only", |b| {
        b.iter(|| state.snapshot());
    });
    group.bench_function("deep_copy_only", |b| {
        b.iter(|| deep.clone());
    });
    group.finish();
}

criterion_group!(benches, snapshot_vs_deep_copy);
criterion_main!(benches);
