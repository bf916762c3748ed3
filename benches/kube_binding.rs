//! `kant run` end to end against the in-process API server, in the shape of
//! kube-scheduler's SchedulingBasic benchmark: 5,000 nodes (8 GPUs each), then 10,000
//! pods of one GPU created at once, timed until the API server has bound every one.
//!
//! The API server runs on a runtime of its own (one worker thread) so that its CPU time
//! is measured apart; the scheduler (watches, loop, writer, kube client) runs in the rest
//! of the process. Three figures come from the same iterations, each as criterion's time
//! per iteration of 10,000 pods:
//!
//! - `wall`: creation of the first pod to the last binding (throughput: pods bound/s);
//! - `scheduler_cpu`: CPU time of the process less the API server's and the harness
//!   thread's (÷ 10,000 = CPU per pod; the goal is under 0.1 ms);
//! - `apiserver_cpu`: the API server's CPU time, reported apart.
//!
//! Between iterations the pods are deleted and the scheduler given time to see it (not
//! timed). Pods are created through the server's store (no HTTP), as a test harness would
//! create them; every watch event and binding goes over HTTP.
//!
//! Run: `cargo bench --bench kube_binding`. Two cores are shared by both sides, so the
//! pods/s figure is a floor; the CPU figures are what to compare.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, Pod};
use kant::config::Config;
use kant::kube::{RunOptions, run_with_config};
use kant_testkit::ApiServer;
use serde_json::json;

const NODES: usize = 5_000;
const PODS: usize = 10_000;

/// One iteration's three figures.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    scheduler_cpu: Duration,
    apiserver_cpu: Duration,
}

fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// CPU time of the calling thread: the harness's own work (creating pods in the server's
/// store, polling for bindings) is not the scheduler's.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": format!("node-{i:05}"), "labels": {
            "nvidia.com/gpu.product": "H100",
            "kant.io/leaf": format!("leaf-{}", i / 32),
            "kant.io/spine": format!("spine-{}", i / 512)}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "128", "memory": "1Ti", "pods": "110"}}
    }))
    .expect("valid node")
}

fn pod(round: usize, i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("p-{round}-{i:05}"), "namespace": "bench"},
        "spec": {"schedulerName": "kant-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}]}
    }))
    .expect("valid pod")
}

fn bound(server: &ApiServer) -> u64 {
    server.request_count("create", "pods/binding")
}

/// Creates the round's pods, waits for every binding, deletes them again.
fn one_round(server: &ApiServer, round: usize) -> Sample {
    let before = bound(server);
    let (cpu0, server0, harness0) = (process_cpu(), server.cpu_time(), thread_cpu());
    let started = Instant::now();
    for i in 0..PODS {
        server.create(&pod(round, i));
    }
    while bound(server) < before + PODS as u64 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = started.elapsed();
    let (cpu1, server1, harness1) = (process_cpu(), server.cpu_time(), thread_cpu());
    let apiserver_cpu = server1.saturating_sub(server0);
    let others = apiserver_cpu + harness1.saturating_sub(harness0);
    let sample = Sample {
        wall,
        scheduler_cpu: cpu1.saturating_sub(cpu0).saturating_sub(others),
        apiserver_cpu,
    };
    for i in 0..PODS {
        server.delete::<Pod>(Some("bench"), &format!("p-{round}-{i:05}"));
    }
    // Lets the scheduler take the deletions in before the next round.
    std::thread::sleep(Duration::from_millis(500));
    sample
}

fn bench(c: &mut Criterion) {
    let server = ApiServer::start_dedicated(1);
    for i in 0..NODES {
        server.create(&node(i));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut options = RunOptions::new(Config::embedded());
    options.leader_election = false;
    options.metrics_addr = "127.0.0.1:0".parse().expect("address");
    options.health_addr = "127.0.0.1:0".parse().expect("address");
    let scheduler = runtime.spawn(run_with_config(
        server.config(),
        options,
        async {
            let _ = stopped.await;
        },
        None,
    ));
    // Warm: the scheduler has listed the nodes when a first pod is bound.
    let mut round = 0;
    one_round(&server, round);

    // Each benchmark runs its own rounds and reads its own figure of each.
    let mut group = c.benchmark_group("kube_bind_10k_pods_5k_nodes");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(PODS as u64));
    for (name, figure) in [
        ("wall", (|s: &Sample| s.wall) as fn(&Sample) -> Duration),
        ("scheduler_cpu", |s: &Sample| s.scheduler_cpu),
        ("apiserver_cpu", |s: &Sample| s.apiserver_cpu),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    total += figure(&one_round(&server, round));
                }
                total
            })
        });
    }
    group.finish();
    let _ = stop.send(());
    let _ = runtime.block_on(scheduler);
}

criterion_group!(benches, bench);
criterion_main!(benches);
