//! End to end: the `kant` binary replays small hand-made traces and the JSON report holds
//! the hand-computed metric values; bad input exits 2 and writes nothing.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

/// A fresh directory, removed with what the test wrote there when it is dropped.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("kant-cli-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn kant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kant"))
        .args(args)
        // Warnings show at the default level.
        .env_remove("RUST_LOG")
        .output()
        .expect("the kant binary runs")
}

/// The JSON report on standard output of a run that must succeed (`args` give
/// `--format json`).
fn json_report(args: &[&str]) -> Value {
    let output = kant(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path.display().to_string()
}

/// A `nodes.csv` of one `H100` node of `gpus` GPUs, written as `name` into `dir`.
fn one_node(dir: &Path, name: &str, gpus: u32) -> String {
    let text = format!("node_id,gpu_model,gpus,cpu_milli,memory_mib\nnode-a,H100,{gpus},,\n");
    write(dir, name, &text)
}

/// The header of a `jobs.csv` without topology.
const JOBS_COLUMNS: &str =
    "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n";

const NODES: &str = "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,spine,superspine,hbd\n\
    node-a,H100,8,64000,524288,l1,s1,ss,\n\
    node-b,H100,8,64000,524288,l1,s1,ss,\n";

/// j1 (4 GPUs) runs 0-100 s and leaves node-a half used; j2 (2 x 8 GPUs) must wait for it
/// and runs 100-200 s; j3 (4 GPUs) arrives at 100 s behind j2 and runs 200-210 s; j4 never
/// ran in the original trace and is skipped.
const JOBS: &str = "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
    j1,,0,100,4,1,H100,0,train\n\
    j2,team-a,50,100,8,2,H100,0,train\n\
    j3,,100,10,4,1,,0,train\n\
    j4,,60,,1,1,,0,train\n";

/// The `--events` log, one JSON object per line.
fn read_events(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("--events written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9)
}

#[test]
fn hand_made_trace_gives_hand_computed_metrics() {
    let dir = temp_dir("metrics");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let events = dir.path().join("events.jsonl").display().to_string();
    let out = dir.path().join("report.json").display().to_string();
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--format",
        "json",
        "--baseline",
        "none",
        "--events",
        &events,
        "--out",
        &out,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let from_file: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("--out written")).unwrap();
    assert_eq!(report, from_file);

    for key in [
        "gar_mean",
        "gar_p50",
        "sor",
        "gfr_mean",
        "jwtd",
        "jtted",
        "jobs_total",
        "jobs_placed",
        "jobs_skipped",
        "jobs_never_placed",
        "sim_span_s",
        "wall_s",
        "placements_per_s",
    ] {
        assert!(report.get(key).is_some(), "missing key {key}");
    }
    // Window 0..100 s: 4 of 16 GPUs assigned throughout, node-a fragmented (1 of 2 nodes).
    assert!(close(&report["gar_mean"], 0.25), "{}", report["gar_mean"]);
    assert!(close(&report["gar_p50"], 0.25));
    assert!(close(&report["sor"], 0.25));
    assert!(close(&report["gfr_mean"], 0.5));
    assert_eq!(report["jobs_total"], 4);
    assert_eq!(report["jobs_skipped"], 1);
    assert_eq!(report["jobs_placed"], 3);
    assert_eq!(report["jobs_never_placed"], 0);
    assert!(close(&report["sim_span_s"], 210.0));
    // Waits: j1 0 s and j3 100 s in 2-8; j2 50 s in 9-64. Nearest rank: p50 of two is the
    // first, p95 the second.
    let small = &report["jwtd"]["2-8"];
    assert_eq!(small["count"], 2);
    assert!(
        close(&small["mean"], 50.0) && close(&small["p50"], 0.0) && close(&small["p95"], 100.0)
    );
    let gang = &report["jwtd"]["9-64"];
    assert_eq!(gang["count"], 1);
    assert!(close(&gang["mean"], 50.0) && close(&gang["p95"], 50.0));
    assert_eq!(report["jwtd"]["1"]["count"], 0);
    assert!(report["jwtd"]["1"]["mean"].is_null());
    let spread = &report["jtted"]["9-64"];
    assert!(close(&spread["node_dev"], 1.0) && close(&spread["group_dev"], 1.0));

    let lines = read_events(&events);
    let count = |kind: &str| lines.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(
        (count("submit"), count("place"), count("finish")),
        (3, 3, 3)
    );
    let times: Vec<f64> = lines.iter().map(|e| e["t"].as_f64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "events out of time order"
    );
    let gang_place = lines
        .iter()
        .find(|e| e["type"] == "place" && e["job"] == "j2")
        .expect("j2 placed");
    assert!(close(&gang_place["t"], 100.0));
    let pods = gang_place["pods"].as_array().unwrap();
    let mut nodes: Vec<&str> = pods.iter().map(|p| p["node"].as_str().unwrap()).collect();
    nodes.sort();
    assert_eq!(nodes, ["node-a", "node-b"]);
    for pod in pods {
        let devices = pod["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 8);
        assert!(devices.iter().all(|d| d["milli"] == 1000));
        // All-NVLink nodes pair NIC i with GPU i.
        assert_eq!(pod["nics"], json!([0, 1, 2, 3, 4, 5, 6, 7]));
    }
    let submit = lines
        .iter()
        .find(|e| e["type"] == "submit" && e["job"] == "j2")
        .unwrap();
    // No tenant is declared: `team-a`'s job is queued in the default tenant.
    assert_eq!(submit["tenant"], "default");
    assert_eq!(submit["unknown_tenant"], "team-a");
    assert_eq!(submit["gpus_per_pod"], "8");
    assert_eq!(submit["gpu_model"], "H100");
}

#[test]
fn gar_is_recomputed_from_the_events_room_held_for_a_backfill_head_included() {
    // Spread leaves j1 and j2 on different nodes: j3 (8 GPUs) blocks, becomes the backfill
    // head at 1,800 s, and the 8 free GPUs are held for it until the window ends at 5,000 s.
    let dir = temp_dir("held");
    let nodes = write(
        dir.path(),
        "nodes.csv",
        "node_id,gpu_model,gpus,cpu_milli,memory_mib\na,H100,8,,\nb,H100,8,,\n",
    );
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         j1,,0,10000,4,1,,0,train\nj2,,0,10000,4,1,,0,train\n\
         j3,,0,100,8,1,,0,train\nj4,,5000,1,1,1,,0,train\n",
    );
    let events = dir.path().join("events.jsonl").display().to_string();
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--placement",
        "spread",
        "--baseline",
        "none",
        "--format",
        "json",
        "--events",
        &events,
    ]);
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    // Recomputed from the events alone: placed milli-GPUs plus held room, over the window
    // from the first submission to the last.
    let (mut placed, mut held, mut at, mut integral) = (0.0, 0.0, 0.0, 0.0);
    let mut running: std::collections::HashMap<String, f64> = Default::default();
    let lines = read_events(&events);
    let window = lines
        .iter()
        .filter(|e| e["type"] == "submit")
        .map(|e| e["t"].as_f64().unwrap())
        .fold(0.0, f64::max);
    for e in &lines {
        let t = e["t"].as_f64().unwrap().min(window);
        integral += (placed + held) * (t - at);
        at = t;
        let job = e["job"].as_str().unwrap_or_default().to_owned();
        match e["type"].as_str().unwrap() {
            "place" => {
                let milli: f64 = e["pods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|p| p["devices"].as_array().unwrap())
                    .map(|d| d["milli"].as_f64().unwrap())
                    .sum();
                placed += milli;
                running.insert(job, milli);
            }
            "finish" | "preempt" => placed -= running.remove(&job).unwrap_or(0.0),
            "held" => held = e["milli"].as_f64().unwrap(),
            _ => {}
        }
    }
    let gar = integral / (16_000.0 * window);
    assert!(
        close(&report["gar_mean"], gar),
        "{} against {gar}",
        report["gar_mean"]
    );
    assert!(close(
        &report["gar_mean"],
        (0.5 * 5000.0 + 0.5 * 3200.0) / 5000.0
    ));
}

#[test]
fn jobs_never_placed_are_listed_with_why() {
    let dir = temp_dir("never-placed");
    // The pool holds 24 GPUs, but no leaf more than 16.
    let nodes = write(
        dir.path(),
        "nodes.csv",
        &format!("{NODES}node-c,H100,8,64000,524288,l2,s1,ss,\n"),
    );
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind,topology\n\
         wide,,0,100,8,3,H100,0,train,required:leaf\n\
         fits,,10,100,8,2,H100,0,train,required:leaf\n",
    );
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--format",
        "json",
        "--baseline",
        "none",
    ]);
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    let never = &report["never_placed"];
    assert_eq!(never.as_array().map(Vec::len), Some(1), "{never}");
    assert_eq!(never[0]["job"], "wide");
    let reason = never[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no leaf of the job's node pools can ever hold its 24 GPUs"),
        "{reason}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 job was never placed") && stderr.contains("wide: "),
        "{stderr}"
    );
}

#[test]
fn a_run_changed_by_placement_or_queueing_is_named_apart_from_its_baseline() {
    let dir = temp_dir("run-names");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let trace = ["simulate", "--nodes", &nodes, "--jobs", &jobs];
    let changed = [
        "--profile",
        "native",
        "--baseline",
        "native",
        "--placement",
        "e-binpack",
        "--queueing",
        "backfill",
    ];
    let output = kant(&[&trace[..], &changed, &["--format", "json"]].concat());
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(
        report["profile"],
        "native (placement e-binpack, queueing backfill)"
    );
    assert_eq!(report["baseline"]["profile"], "native");
    let output = kant(&[&trace[..], &changed].concat());
    assert!(output.status.success());
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("profile native (placement e-binpack, queueing backfill)"),
        "{table}"
    );
}

fn assert_rejected(args: &[&str], needle: &str, unwritten: &Path) {
    let output = kant(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr}");
    assert!(stderr.contains(needle), "{stderr} lacks {needle}");
    assert!(!unwritten.exists(), "{} was written", unwritten.display());
    assert!(output.stdout.is_empty());
}

/// Each row ends before the clock's last second, but queued one behind the other on the one
/// GPU, the second would end past it, where event times stop being exact: the replay
/// fails for its input, naming the job (and the baseline, where it is the baseline's run
/// that would), and writes none of its outputs. A fill, where no job ends, is not refused.
#[test]
fn a_replay_that_would_run_past_the_clock_is_refused() {
    let dir = temp_dir("past-clock");
    let nodes = one_node(dir.path(), "nodes.csv", 1);
    let jobs = format!(
        "{JOBS_COLUMNS}first,,0,999999999999,1,1,H100,0,train\n\
         second,,0,999999999999,1,1,H100,0,train\n"
    );
    let jobs = write(dir.path(), "jobs.csv", &jobs);
    let events = dir.path().join("events.jsonl");
    let out = dir.path().join("out.json");
    assert_rejected(
        &[
            "simulate",
            "--nodes",
            &nodes,
            "--jobs",
            &jobs,
            "--baseline",
            "none",
            "--events",
            &events.display().to_string(),
            "--out",
            &out.display().to_string(),
        ],
        "job second, placed at 999999999999 s, would end past the clock's last second",
        &out,
    );
    assert!(!events.exists());
    // In a fill nothing ends: the second arrives at 1 s on a node of 2 GPUs and is placed.
    let wide = one_node(dir.path(), "wide.csv", 2);
    let report = json_report(&[
        "simulate",
        "--nodes",
        &wide,
        "--jobs",
        &jobs,
        "--fill",
        "--baseline",
        "none",
        "--format",
        "json",
    ]);
    assert_eq!(report["jobs_placed"], 2, "{report}");
    // On 3 GPUs, `c` (1 GPU) goes ahead of the blocked `b` at 2 s under backfill and ends by
    // the clock's last second; the baseline's strict FIFO keeps it behind `b` until 100 s,
    // past which it would end. The error names the baseline.
    let three = one_node(dir.path(), "three.csv", 3);
    let queued = format!(
        "{JOBS_COLUMNS}a,,0,100,2,1,H100,0,train\n\
         b,,1,10,2,1,H100,0,train\n\
         c,,2,999999999950,1,1,H100,0,train\n"
    );
    let queued = write(dir.path(), "queued.csv", &queued);
    assert_rejected(
        &[
            "simulate",
            "--nodes",
            &three,
            "--jobs",
            &queued,
            "--out",
            &out.display().to_string(),
        ],
        "the baseline profile native: job c, placed at 100 s, would end past",
        &out,
    );
}

#[test]
fn bad_input_exits_2_naming_the_problem_and_writes_nothing() {
    let dir = temp_dir("bad");
    let out_path = dir.path().join("out.json");
    let out = out_path.display().to_string();
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let trace_cases = [
        // (nodes, jobs, what the error must name)
        (
            nodes.clone(),
            write(
                dir.path(),
                "bad_jobs.csv",
                &JOBS.replace("j3,,100,10,4", "j3,,100,10,four"),
            ),
            "bad_jobs.csv:4: field gpus_per_pod",
        ),
        (
            nodes.clone(),
            write(
                dir.path(),
                "model_jobs.csv",
                &JOBS.replace(",H100,0,train\nj2", ",B200,0,train\nj2"),
            ),
            "B200",
        ),
        (
            write(
                dir.path(),
                "bad_nodes.csv",
                &NODES.replace("node-b,H100,8", "node-b,,8"),
            ),
            jobs.clone(),
            "bad_nodes.csv:3",
        ),
    ];
    for (nodes, jobs, needle) in &trace_cases {
        let args = ["simulate", "--nodes", nodes, "--jobs", jobs, "--out", &out];
        assert_rejected(&args, needle, &out_path);
    }
    let config = write(
        dir.path(),
        "kant.yaml",
        "default_profile: p\nprofiles:\n  - name: p\n    queueing: strict-fifo\n    \
         search: flat\n    plugins: [priority-sort, gpu-devices, {name: binpack, weight: -1}]\n",
    );
    let args = [
        "simulate",
        "--config",
        &config,
        "--synthetic-jobs",
        "10",
        "--out",
        &out,
    ];
    assert_rejected(&args, "weight -1 of `binpack` is negative", &out_path);
    let quota = write(
        dir.path(),
        "quota.yaml",
        &format!(
            "{}tenants:\n  - name: a\n    quota: {{B200: 8}}\n",
            kant::config::DEFAULT_CONFIG
        ),
    );
    let args = [
        "simulate",
        "--config",
        &quota,
        "--synthetic-jobs",
        "10",
        "--out",
        &out,
    ];
    assert_rejected(
        &args,
        "quota.yaml: tenant a: quota for unknown GPU model \"B200\" (the cluster has: H100, A100)",
        &out_path,
    );
    // The embedded cluster has 2,048 H100.
    let past = write(
        dir.path(),
        "past.yaml",
        &format!(
            "{}tenants:\n  - {{name: a, mode: isolated, quota: {{H100: 2000}}}}\n  \
             - {{name: b, mode: isolated, quota: {{H100: 100}}}}\n",
            kant::config::DEFAULT_CONFIG
        ),
    );
    let args = [
        "simulate",
        "--config",
        &past,
        "--synthetic-jobs",
        "10",
        "--out",
        &out,
    ];
    assert_rejected(
        &args,
        "past.yaml: the isolated quotas for H100 add up to 2100 GPUs (a 2000, b 100), more \
         than the 2048 GPUs its nodes have",
        &out_path,
    );
    assert_rejected(&["config", "check", &config], "kant.yaml", &out_path);
    let no_native = write(
        dir.path(),
        "no_native.yaml",
        "default_profile: p\nprofiles:\n  - name: p\n    queueing: strict-fifo\n    \
         search: flat\n    plugins: [priority-sort, gpu-devices]\n",
    );
    let args = [
        "simulate",
        "--config",
        &no_native,
        "--synthetic-jobs",
        "10",
        "--out",
        &out,
    ];
    assert_rejected(&args, "no profile `native`", &out_path);
    assert_rejected(&args, "--baseline none", &out_path);
    let args = [
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--load-factor",
        "1e-300",
        "--out",
        &out,
    ];
    assert_rejected(
        &args,
        "--load-factor 1e-300: job j2 would end past",
        &out_path,
    );
    let same = dir.path().join("same");
    std::fs::create_dir_all(&same).expect("same dir");
    let (same_nodes, same_jobs) = (
        write(&same, "nodes.csv", NODES),
        write(&same, "jobs.csv", JOBS),
    );
    let same_arg = same.display().to_string();
    let args = [
        "simulate",
        "--nodes",
        &same_nodes,
        "--jobs",
        &same_jobs,
        "--write-trace",
        &same_arg,
        "--out",
        &out,
    ];
    assert_rejected(&args, "--write-trace would write over", &out_path);
    assert_eq!(std::fs::read_to_string(&same_jobs).unwrap(), JOBS);
    assert_eq!(std::fs::read_to_string(&same_nodes).unwrap(), NODES);
    // Two outputs to one file are refused; a device takes both.
    let small = ["simulate", "--synthetic-jobs", "10", "--baseline", "none"];
    let args = [&small[..], &["--out", &out, "--events", &out]].concat();
    assert_rejected(&args, "--events would write over", &out_path);
    let sink = kant(&[&small[..], &["--out", "/dev/null", "--events", "/dev/null"]].concat());
    assert!(
        sink.status.success(),
        "{}",
        String::from_utf8_lossy(&sink.stderr)
    );
    let args = ["simulate", "--format", "xml", "--out", &out];
    assert_rejected(&args, "invalid value 'xml'", &out_path);
    let args = ["simulate", "--nodes", &nodes, "--out", &out];
    assert_rejected(&args, "--jobs", &out_path);
}

/// Runs `kant simulate ARGS --write-trace DIR`, replays the written trace with REPLAY_ARGS,
/// and checks that both runs, and their baselines, give the same figures; returns the
/// first run's report.
fn assert_written_trace_replays_the_same(name: &str, args: &[&str], replay_args: &[&str]) -> Value {
    let dir = temp_dir(name);
    let trace = dir.path().join("trace");
    let trace_arg = trace.display().to_string();
    let json = ["--format", "json"];
    let first = kant(&[&["simulate"], args, &json, &["--write-trace", &trace_arg]].concat());
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let nodes = trace.join("nodes.csv").display().to_string();
    let jobs = trace.join("jobs.csv").display().to_string();
    let trace_args = ["simulate", "--nodes", &nodes, "--jobs", &jobs];
    let replay = kant(&[&trace_args, replay_args, &json].concat());
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let a: Value = serde_json::from_slice(&first.stdout).unwrap();
    let b: Value = serde_json::from_slice(&replay.stdout).unwrap();
    for key in [
        "gar_mean",
        "gar_p50",
        "sor",
        "gfr_mean",
        "jwtd",
        "jtted",
        "jobs_total",
        "jobs_placed",
        "jobs_skipped",
    ] {
        assert_eq!(a[key], b[key], "{key} differs after replay");
        assert_eq!(
            a["baseline"][key], b["baseline"][key],
            "baseline {key} differs"
        );
    }
    a
}

#[test]
fn written_trace_replays_to_the_same_figures() {
    // The written trace names each job's tenant; their quotas are the synthetic ones.
    let report = assert_written_trace_replays_the_same(
        "replay",
        &["--synthetic-jobs", "300", "--seed", "7"],
        &["--synthetic-tenants"],
    );
    assert_eq!(report["jobs_total"], 300);
    assert_eq!(report["baseline"]["profile"], "native");

    // A trace's skipped row (j4, no duration) is written back too.
    let dir = temp_dir("replay-trace");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let trace_args = ["--nodes", nodes.as_str(), "--jobs", jobs.as_str()];
    let report = assert_written_trace_replays_the_same("replay-written", &trace_args, &[]);
    assert_eq!(
        (&report["jobs_total"], &report["jobs_skipped"]),
        (&4.into(), &1.into())
    );
}

#[test]
fn the_replay_wakes_the_scheduler_when_a_gangs_patience_ends() {
    // Two leaf groups of two nodes. One node of each frees at 100 s; the gang (two nodes)
    // could fit one leaf only once a second node there frees (100,000 s), so it waits its
    // patience (600 s) and then spreads over both leaves, at 700 s, with nothing happening
    // at that instant but the wake-up.
    let dir = temp_dir("wakeup");
    let nodes = write(
        dir.path(),
        "nodes.csv",
        "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,spine,superspine,hbd\n\
         a,H100,8,,,l1,s,ss,\nb,H100,8,,,l1,s,ss,\nc,H100,8,,,l2,s,ss,\nd,H100,8,,,l2,s,ss,\n",
    );
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         j0,,0,100,8,1,,0,train\nj1,,0,100000,8,1,,0,train\n\
         j2,,0,100,8,1,,0,train\nj3,,0,100000,8,1,,0,train\n\
         gang,,50,10,8,2,,0,train\n",
    );
    let events = dir.path().join("events.jsonl").display().to_string();
    let args = [
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--baseline",
        "none",
        "--format",
        "json",
        "--events",
        &events,
    ];
    let output = kant(&args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let place = read_events(&events)
        .into_iter()
        .find(|e| e["type"] == "place" && e["job"] == "gang")
        .expect("the gang is placed");
    assert!(close(&place["t"], 700.0), "placed at {}", place["t"]);
}

#[test]
fn an_ignored_column_or_flag_is_warned_of() {
    let dir = temp_dir("columns");
    let nodes = write(
        dir.path(),
        "nodes.csv",
        &NODES
            .replace("hbd\n", "hbd,rack,\n")
            .replace(",ss,\n", ",ss,,r1,\n"),
    );
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    // A GPU model misspelt in the links: no node has it.
    let typo = kant::config::DEFAULT_CONFIG.replace("A100: nvlink-pairs", "A10O: pcie");
    let config = write(dir.path(), "typo.yaml", &typo);
    let args = [
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--baseline",
        "none",
        "--synthetic-jobs",
        "10",
        "--seed",
        "7",
        "--config",
        &config,
    ];
    let output = kant(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "nodes.csv: ignoring the column(s) rack, (one without a name: a trailing comma?)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--synthetic-jobs is ignored"), "{stderr}");
    assert!(stderr.contains("--seed is ignored"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "no colour codes off a terminal: {stderr:?}"
    );
    assert!(
        stderr.contains("links name GPU model `A10O`, which no node of"),
        "{stderr}"
    );
    // j2 names `team-a`, which no configuration declares: it runs as the default tenant's,
    // and both the warning and the report say so.
    assert!(
        stderr.contains("tenants the configuration does not declare: `team-a` (1)"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().any(
            |l| l.contains("jobs of undeclared tenants (run as default)") && l.contains(" 1 ")
        ),
        "{stdout}"
    );
    // The embedded default's layouts are its own: links given for it are warned of.
    let embedded = kant(&["simulate", "--synthetic-jobs", "10", "--config", &config]);
    let stderr = String::from_utf8_lossy(&embedded.stderr);
    assert!(
        stderr.contains("the configuration's links are for trace nodes"),
        "{stderr}"
    );
    // A configuration file that says nothing of links is not warned of them.
    let text = kant::config::DEFAULT_CONFIG;
    let cut = text
        .find("# How the GPUs of a node are linked")
        .expect("the links section");
    let no_links = write(dir.path(), "no_links.yaml", &text[..cut]);
    let embedded = kant(&["simulate", "--synthetic-jobs", "10", "--config", &no_links]);
    let stderr = String::from_utf8_lossy(&embedded.stderr);
    assert!(embedded.status.success(), "{stderr}");
    assert!(!stderr.contains("links"), "{stderr}");
}

/// What a user types first: no command shows the commands; a misspelt one keeps clap's
/// tip; an empty `KANT_CONFIG` (a manifest's placeholder) means no configuration file,
/// and one naming a file that cannot be read is named in the error.
#[test]
fn the_command_line_helps_and_an_empty_variable_means_unset() {
    let bare = kant(&[]);
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert_eq!(bare.status.code(), Some(2));
    assert!(
        stderr.contains("Commands:") && stderr.contains("simulate"),
        "{stderr}"
    );
    let misspelt = kant(&["config", "chek", "x.yaml"]);
    let stderr = String::from_utf8_lossy(&misspelt.stderr);
    assert_eq!(misspelt.status.code(), Some(2));
    assert!(
        stderr.contains("a similar subcommand exists: 'check'"),
        "{stderr}"
    );
    let with_kant_config = |value: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_kant"))
            .args(["simulate", "--synthetic-jobs", "10", "--baseline", "none"])
            .env("KANT_CONFIG", value)
            .output()
            .expect("the kant binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code(), stderr)
    };
    let (status, stderr) = with_kant_config("");
    assert_eq!(status, Some(0), "{stderr}");
    let (status, stderr) = with_kant_config("/nonexistent/kant.yaml");
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("(the file KANT_CONFIG names, \"/nonexistent/kant.yaml\")"),
        "{stderr}"
    );
}

/// `kant run`'s naming flags are checked before anything starts: an empty GPU model (a
/// stray comma) would make a shard that places nothing, a shard name that cannot end a
/// Lease's name a replica that never leads, and a scheduler name no pod can name, or too
/// long to report events as, a scheduler whose every event is refused.
#[test]
fn run_refuses_a_name_or_number_the_cluster_could_not_take() {
    let too_long = "k".repeat(64);
    for (args, needle) in [
        (
            &["--scheduler-name", too_long.as_str()][..],
            "which the API server takes only up to 63 characters",
        ),
        (
            &["--scheduler-name", "Kant_Scheduler"][..],
            "pods name their scheduler in lower-case letters",
        ),
        (&["--gpu-models", "H100,,A100"][..], "an empty GPU model"),
        (&["--gpu-models", ""][..], "an empty GPU model"),
        (
            &["--shard", "Team_A"][..],
            "a shard's name ends its Lease's name",
        ),
        (
            &["--shard", "a..b"][..],
            "a shard's name ends its Lease's name",
        ),
        (&["--identity", ""][..], "cannot be empty"),
        (
            &["--lease-namespace", "Kube_System"][..],
            "a namespace's name",
        ),
        (
            &["--lease-namespace", "kube.system"][..],
            "a namespace's name",
        ),
        (&["--leaf-label", "bad label!"][..], "a label key is"),
        (&["--hbd-label", "Kant.io/hbd"][..], "a label key is"),
        (&["--spine-label", "kant.io/"][..], "a label key is"),
        (&["--max-binds-in-flight", "0"][..], "0 is not in 1.."),
        (&["--status-qps", "0"][..], "0 is not in 1.."),
    ] {
        let output = kant(&[&["run", "--kubeconfig", "/nonexistent"][..], args].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `kant run` takes its tenants from Queue objects: tenants a configuration file declares
/// are said to be ignored, by name, rather than passed over in silence.
#[test]
fn run_says_it_ignores_the_configurations_tenants() {
    let dir = temp_dir("run-tenants");
    let text = format!(
        "{}tenants:\n  - name: team-a\n    quota: {{H100: 8}}\n",
        kant::config::DEFAULT_CONFIG
    );
    let config = write(dir.path(), "kant.yaml", &text);
    let output = kant(&["run", "--kubeconfig", "/nonexistent", "--config", &config]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the configuration's tenants (team-a) are ignored"),
        "{stderr}"
    );
}

/// Standard output closed before anything is written (`kant crds | head -1`, say) is an
/// error that says so, exit status 1, not a panic.
#[test]
fn output_to_a_closed_pipe_is_an_error_not_a_panic() {
    let dir = temp_dir("closed-pipe");
    let config = write(dir.path(), "kant.yaml", kant::config::DEFAULT_CONFIG);
    let simulate = ["simulate", "--synthetic-jobs", "20", "--baseline", "none"];
    for args in [&["crds"][..], &["config", "check", &config], &simulate] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_kant"))
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: Broken pipe") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

/// A replay stopped by SIGINT or SIGTERM (Ctrl-C, `kill`) ends as the signal would, with
/// status 128 + its number, and leaves its outputs as they were: no half-written staging
/// file is left beside them.
#[cfg(unix)]
#[test]
fn an_interrupted_replay_leaves_no_staging_file() {
    for (signal, status) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = temp_dir("interrupted");
        let events = write(dir.path(), "e.jsonl", "{\"old\":1}\n");
        let before = listing(dir.path());
        // The embedded default: a replay of seconds, even in an optimized build.
        let mut child = Command::new(env!("CARGO_BIN_EXE_kant"))
            .args(["simulate", "--baseline", "none", "--events", &events])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Once the event log's staging file is there, the replay is writing it.
        let started = std::time::Instant::now();
        while listing(dir.path()).len() == before.len() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no staging file"
            );
            assert!(child.try_wait().unwrap().is_none(), "the replay ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: a plain kill(2) of the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let exit = child.wait().unwrap();
        assert_eq!(exit.code(), Some(status), "signal {signal}");
        assert_eq!(
            listing(dir.path()),
            before,
            "signal {signal}: files left behind"
        );
        assert_eq!(std::fs::read_to_string(&events).unwrap(), "{\"old\":1}\n");
    }
}

/// A profile searching flat (the baseline's search) ignores required topology: `config
/// check` notes it for each such profile, and `kant run` warns when it runs one.
#[test]
fn a_flat_search_is_noted_by_config_check_and_warned_of_by_run() {
    let dir = temp_dir("flat-search");
    let config = write(dir.path(), "kant.yaml", kant::config::DEFAULT_CONFIG);
    let checked = kant(&["config", "check", &config]);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{stdout}");
    let notes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 1, "{stdout}");
    assert!(
        notes[0].starts_with("note: profile `native`: `search: flat`")
            && notes[0].contains("ignores jobs' required topology"),
        "{stdout}"
    );
    let caution = "`search: flat`, the baseline's search, ignores";
    let run = |profile: &[&str]| {
        let args = [&["run", "--kubeconfig", "/nonexistent"], profile].concat();
        String::from_utf8_lossy(&kant(&args).stderr).into_owned()
    };
    let native = run(&["--profile", "native"]);
    assert!(
        native.contains(&format!("profile `native`: {caution}")),
        "{native}"
    );
    let default = run(&[]);
    assert!(!default.contains(caution), "{default}");
}

/// A kubeconfig that cannot be read is bad input (exit 2), as a bad flag is; a replica
/// that stops while running (a lost Lease) exits 1 (`kube_api`'s lease tests).
#[test]
fn run_says_which_kubeconfig_it_could_not_read_and_exits_as_for_bad_input() {
    let output = kant(&["run", "--kubeconfig", "/nonexistent"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: kubeconfig /nonexistent"),
        "{stderr}"
    );
    // Said once, though kube's error prints its cause in its own text.
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
}

#[test]
fn an_unwritable_output_fails_before_the_replay() {
    let dir = temp_dir("unwritable");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let out = dir
        .path()
        .join("missing")
        .join("report.json")
        .display()
        .to_string();
    let events_path = dir.path().join("events.jsonl");
    let events = events_path.display().to_string();
    let args = [
        "simulate", "--nodes", &nodes, "--jobs", &jobs, "--out", &out, "--events", &events,
    ];
    let output = kant(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("report.json"), "{stderr}");
    assert!(!events_path.exists(), "the replay ran and wrote its events");
    assert!(output.stdout.is_empty());
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_run_leaves_every_output_as_it_was() {
    let dir = temp_dir("failed-run");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let out = write(dir.path(), "r.json", "{\"old\":1}\n");
    let events = write(dir.path(), "e.jsonl", "{\"old\":2}\n");
    let not_a_dir = write(dir.path(), "afile", "");
    let before = listing(dir.path());
    let trace = format!("{not_a_dir}/sub");
    let args = [
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--baseline",
        "none",
        "--format",
        "json",
        "--out",
        &out,
        "--events",
        &events,
    ];
    let output = kant(&[&args[..], &["--write-trace", &trace]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("afile/sub"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"old\":1}\n");
    assert_eq!(std::fs::read_to_string(&events).unwrap(), "{\"old\":2}\n");
    assert_eq!(listing(dir.path()), before, "files left behind");

    // The same run without the bad folder replaces both, leaving nothing else behind.
    let output = kant(&args);
    assert!(output.status.success());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["jobs_total"], 4);
    assert_eq!(read_events(&events).len(), 9);
    assert_eq!(listing(dir.path()), before, "files left behind");
}

#[test]
fn a_trace_file_that_cannot_be_written_is_named_and_no_half_trace_is_left() {
    let dir = temp_dir("half-trace");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let trace = dir.path().join("wt");
    std::fs::create_dir_all(trace.join("jobs.csv")).expect("a folder named jobs.csv");
    let write_trace = |target: &str| {
        let output = kant(&[
            "simulate",
            "--nodes",
            &nodes,
            "--jobs",
            &jobs,
            "--write-trace",
            target,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        (output, stderr)
    };
    let (output, stderr) = write_trace(&trace.display().to_string());
    assert!(stderr.contains("wt/jobs.csv: "), "{stderr}");
    assert_eq!(listing(&trace), ["jobs.csv"], "files left behind");
    assert!(output.stdout.is_empty());
    // A file where the directory should be is named as such.
    let (_, stderr) = write_trace(&write(dir.path(), "plain.txt", "x"));
    assert!(stderr.contains("plain.txt: not a directory"), "{stderr}");
}

#[cfg(target_os = "linux")]
#[test]
fn an_event_log_write_error_names_the_file() {
    let dir = temp_dir("full");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--events",
        "/dev/full",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.lines().any(|l| l.starts_with("error: /dev/full: ")),
        "{stderr}"
    );
}

#[test]
fn the_report_says_on_how_many_nodes_cpu_or_memory_is_unknown() {
    let dir = temp_dir("unknown-capacity");
    let nodes = write(
        dir.path(),
        "nodes.csv",
        &NODES.replace("node-b,H100,8,64000,524288", "node-b,H100,8,,524288"),
    );
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let run = |format: &str| {
        let output = kant(&[
            "simulate", "--nodes", &nodes, "--jobs", &jobs, "--format", format,
        ]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    let report: Value = serde_json::from_str(&run("json")).expect("JSON report");
    assert_eq!(report["nodes_unknown_capacity"], 1);
    assert!(report["baseline"].get("nodes_unknown_capacity").is_none());
    let table = run("table");
    assert!(
        table.contains("CPU or memory unknown on some nodes"),
        "{table}"
    );

    let known = write(dir.path(), "known.csv", NODES);
    let output = kant(&[
        "simulate", "--nodes", &known, "--jobs", &jobs, "--format", "json",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(report["nodes_unknown_capacity"], 0);
}

#[test]
fn a_written_trace_scales_its_skipped_rows_with_the_load_factor() {
    let dir = temp_dir("scaled-skipped");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         ran,,0,100,8,1,H100,0,train\n\
         late,,4000,100,8,1,H100,0,train\n\
         never,,5000,,1,1,,0,train\n",
    );
    let trace = dir.path().join("scaled");
    let trace_arg = trace.display().to_string();
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--baseline",
        "none",
        "--load-factor",
        "4",
        "--write-trace",
        &trace_arg,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = std::fs::read_to_string(trace.join("jobs.csv")).expect("jobs.csv written");
    let submit = |job: &str| {
        let row = written
            .lines()
            .find(|l| l.starts_with(&format!("{job},")))
            .unwrap_or_else(|| panic!("{job} in {written}"));
        row.split(',').nth(2).expect("submit_s").to_owned()
    };
    assert_eq!(
        (submit("late"), submit("never")),
        ("1000".into(), "1250".into())
    );
}

/// A fill: a (6 GPUs), b (4) and never-ran (1, no duration: a fill needs none) arrive,
/// and again, until 16 GPUs of demand have arrived on the 16 GPUs of the two nodes. a goes
/// to one node; b, which does not fit in its 2 free GPUs, to the other; never-ran beside
/// a; the copy of a finds 1 and 4 GPUs free and is dropped.
#[test]
fn a_fill_reads_the_gpus_allocated_as_demand_arrives() {
    let dir = temp_dir("fill");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         a,,0,100,6,1,H100,0,train\n\
         b,,500,10,4,1,H100,0,train\n\
         never-ran,,600,,1,1,H100,0,train\n",
    );
    let events = dir.path().join("events.jsonl").display().to_string();
    let report = json_report(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--fill",
        "--format",
        "json",
        "--baseline",
        "none",
        "--events",
        &events,
    ]);
    let fill = &report["fill"];
    let points = |key: &str| -> Vec<f64> {
        (fill["points"].as_array().unwrap().iter())
            .map(|p| p[key].as_f64().unwrap())
            .collect()
    };
    let tenths: Vec<f64> = (1..=10).map(|n| f64::from(n) / 10.0).collect();
    assert_eq!(points("arrived"), tenths);
    // Tenths 1-3 of 16 GPUs are reached with a (6 arrived), 4-6 with b (10), 7-10 with
    // a#2 (17: never-ran brought 11, short of 11.2).
    let by_arrival = |a: f64, b: f64, a2: f64| [[a; 3].as_slice(), &[b; 3], &[a2; 4]].concat();
    assert_eq!(
        points("reached"),
        by_arrival(6.0 / 16.0, 10.0 / 16.0, 17.0 / 16.0)
    );
    assert_eq!(
        points("allocated"),
        by_arrival(6.0 / 16.0, 10.0 / 16.0, 11.0 / 16.0)
    );
    assert_eq!(points("fragmented"), by_arrival(0.5, 1.0, 1.0));
    assert_eq!(fill["jobs_dropped"], 1);
    assert!(close(&fill["gpus_dropped"], 6.0));
    assert_eq!(fill["jobs_without_duration"], 1);
    assert_eq!(report["jobs_placed"], 3);
    assert_eq!(report["jobs_skipped"], 0);
    let dropped = report["never_placed"].as_array().unwrap();
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0]["job"], "a#2");
    assert!(
        dropped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("nvidia.com/gpu"),
        "{}",
        dropped[0]
    );
    // One second apart, the copy named apart, dropped; nothing finishes.
    let log = read_events(&events);
    let arrivals: Vec<(String, f64)> = (log.iter())
        .filter(|e| e["type"] == "submit")
        .map(|e| {
            (
                e["job"].as_str().unwrap().to_owned(),
                e["t"].as_f64().unwrap(),
            )
        })
        .collect();
    let expected = [("a", 0.0), ("b", 1.0), ("never-ran", 2.0), ("a#2", 3.0)];
    assert_eq!(arrivals, expected.map(|(j, t)| (j.to_owned(), t)));
    let drops: Vec<&Value> = log.iter().filter(|e| e["type"] == "drop").collect();
    assert_eq!(drops.len(), 1);
    assert_eq!(
        (&drops[0]["job"], &drops[0]["t"]),
        (&json!("a#2"), &json!(3.0))
    );
    assert!(!log.iter().any(|e| e["type"] == "finish"));

    // The table shows the points at 50, 80, 90 and 100%.
    let table = kant(&["simulate", "--nodes", &nodes, "--jobs", &jobs, "--fill"]);
    let table = String::from_utf8_lossy(&table.stdout);
    let row = (table.lines())
        .find(|l| l.contains("fill: GPUs allocated"))
        .expect("the fill row");
    assert!(row.contains("62.5% / 68.8% / 68.8% / 68.8%"), "{table}");
}

/// `--synthetic-tenants` gives every row of a fill a tenant, those without a duration
/// too: none is left to the default tenant, outside every quota.
#[test]
fn a_fill_gives_the_synthetic_tenants_the_rows_without_a_duration_too() {
    let dir = temp_dir("fill-tenants");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         a,,0,100,1,1,H100,0,train\n\
         never-ran,,1,,1,1,H100,0,train\n\
         never-ran-either,,2,,1,1,H100,0,train\n",
    );
    let events = dir.path().join("events.jsonl").display().to_string();
    let run = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--fill",
        "--synthetic-tenants",
        "--baseline",
        "none",
        "--events",
        &events,
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let log = read_events(&events);
    let tenants: Vec<(&str, &str)> = (log.iter())
        .filter(|e| e["type"] == "submit")
        .map(|e| (e["job"].as_str().unwrap(), e["tenant"].as_str().unwrap()))
        .collect();
    assert_eq!(tenants.len(), 16, "{tenants:?}");
    assert!(
        tenants
            .iter()
            .all(|&(_, tenant)| tenant.starts_with("team-")),
        "{tenants:?}"
    );
}

/// `low` (8 GPUs) runs from 0 s on the one node; `high`, of higher priority, arrives at
/// 1,000 s, past `low`'s minimum runtime, evicts it and runs 500 s; `low` runs again from
/// 1,500 s. The report counts the 8,000 GPU-seconds thrown away and the 500 s `low`
/// waited to run again, which no JWTD bucket holds (they count first placements).
#[test]
fn a_victims_wait_to_run_again_is_reported_by_kind() {
    let dir = temp_dir("wait-again");
    let nodes = one_node(dir.path(), "nodes.csv", 8);
    let jobs = format!(
        "{JOBS_COLUMNS}low,,0,10000,8,1,H100,0,train\n\
         high,,1000,500,8,1,H100,10,train\n"
    );
    let jobs = write(dir.path(), "jobs.csv", &jobs);
    let config = include_str!("../src/default_config.yaml").replacen(
        "      - backfill-preemption\n",
        "      - preemption\n",
        1,
    );
    let config = write(dir.path(), "config.yaml", &config);
    let report = json_report(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--config",
        &config,
        "--format",
        "json",
        "--baseline",
        "none",
    ]);
    let priority = &report["preemptions"]["priority"];
    assert_eq!(priority["count"], 1, "{report}");
    assert!(close(&priority["gpu_hours_lost"], 8.0 * 1000.0 / 3600.0));
    assert_eq!(priority["placed_again"], 1);
    assert!(close(&priority["mean_wait_again_s"], 500.0));
    assert_eq!(report["preemptions"]["backfill"]["placed_again"], 0);
    assert!(report["preemptions"]["backfill"]["mean_wait_again_s"].is_null());
    // First placements alone: `low` at 0 s, `high` at once.
    assert_eq!(report["jwtd"]["2-8"]["count"], 2);
    assert!(close(&report["jwtd"]["2-8"]["mean"], 0.0));
}

/// Nothing is preempted in a fill: a victim would never come back. c, of high priority,
/// finds both nodes taken and is dropped, though the profile preempts.
#[test]
fn a_fill_preempts_nothing() {
    let dir = temp_dir("fill-preempt");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         a,,0,100,8,1,H100,0,train\n\
         b,,1,100,4,1,H100,0,train\n\
         c,,2,100,8,1,H100,100,train\n",
    );
    let config = include_str!("../src/default_config.yaml")
        .replacen("      - gang\n", "      - gang\n      - preemption\n", 1)
        .replace("min_runtime: 10m", "min_runtime: 0s");
    let config = write(dir.path(), "config.yaml", &config);
    let report = json_report(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--fill",
        "--config",
        &config,
        "--format",
        "json",
        "--baseline",
        "none",
    ]);
    assert_eq!(report["preemptions"]["priority"]["count"], 0);
    assert_eq!(report["never_placed"][0]["job"], "c");
    assert_eq!(report["jobs_placed"], 2);
}

/// No gang waits for a tighter placement in a fill: nothing finishes, so none would come.
/// g0 and g1 take two nodes of each leaf; g2 could have one leaf only once they finish,
/// and is spread over the last node of each at once.
#[test]
fn a_fill_spreads_a_gang_at_once_rather_than_wait() {
    let dir = temp_dir("fill-patience");
    let nodes = write(
        dir.path(),
        "nodes.csv",
        "node_id,gpu_model,gpus,cpu_milli,memory_mib,leaf,spine,superspine,hbd\n\
         a,H100,8,,,l1,s,ss,\nb,H100,8,,,l1,s,ss,\nc,H100,8,,,l1,s,ss,\n\
         d,H100,8,,,l2,s,ss,\ne,H100,8,,,l2,s,ss,\nf,H100,8,,,l2,s,ss,\n",
    );
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         g0,,0,100,8,2,,0,train\ng1,,1,100,8,2,,0,train\ng2,,2,10,8,2,,0,train\n",
    );
    let events = dir.path().join("events.jsonl").display().to_string();
    let output = kant(&[
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--fill",
        "--baseline",
        "none",
        "--events",
        &events,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let nodes_of = |job: &str| -> Vec<String> {
        let place = (read_events(&events).into_iter())
            .find(|e| e["type"] == "place" && e["job"] == job)
            .unwrap_or_else(|| panic!("{job} is placed"));
        let pods = place["pods"].as_array().unwrap().iter();
        let mut nodes: Vec<String> = pods.map(|p| p["node"].as_str().unwrap().into()).collect();
        nodes.sort();
        nodes
    };
    let in_l1 = |nodes: &[String]| nodes.iter().map(|n| n.as_str() < "d").collect::<Vec<_>>();
    assert_eq!(in_l1(&nodes_of("g0")), [true, true]);
    assert_eq!(in_l1(&nodes_of("g1")), [false, false]);
    assert_eq!(in_l1(&nodes_of("g2")), [true, false]);
}

#[test]
fn a_fill_refuses_a_load_factor_and_a_workload_without_gpus() {
    let dir = temp_dir("fill-bad");
    let unwritten = dir.path().join("out.json");
    let out = unwritten.display().to_string();
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(dir.path(), "jobs.csv", JOBS);
    let cpu_only = write(
        dir.path(),
        "cpu.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         c,,0,100,0,1,,0,train\n",
    );
    let load = [
        "simulate",
        "--nodes",
        &nodes,
        "--jobs",
        &jobs,
        "--fill",
        "--out",
        &out,
        "--load-factor",
        "2",
    ];
    assert_rejected(&load, "--load-factor", &unwritten);
    let cpu = [
        "simulate", "--nodes", &nodes, "--jobs", &cpu_only, "--fill", "--out", &out,
    ];
    assert_rejected(
        &cpu,
        "--fill: no job of the workload asks for GPUs",
        &unwritten,
    );
    let cpu_nodes = write(
        dir.path(),
        "cpu-nodes.csv",
        "node_id,gpu_model,gpus,cpu_milli,memory_mib\nc1,,0,64000,262144\n",
    );
    let no_gpus = [
        "simulate", "--nodes", &cpu_nodes, "--jobs", &cpu_only, "--fill", "--out", &out,
    ];
    assert_rejected(&no_gpus, "--fill: the cluster has no GPUs", &unwritten);
}

/// Every job submitted at one instant: the window (first to last submission) has no
/// length, and the averages over it are undefined, not 0 (the cluster was busy): null in
/// the JSON, `-` in the table, and said on standard error.
#[test]
fn a_window_of_no_length_leaves_the_averages_undefined() {
    let dir = temp_dir("zero-window");
    let nodes = write(dir.path(), "nodes.csv", NODES);
    let jobs = write(
        dir.path(),
        "jobs.csv",
        "job_id,tenant,submit_s,duration_s,gpus_per_pod,pods,gpu_model,priority,kind\n\
         a,,0,3600,8,2,,,train\n",
    );
    let args = ["simulate", "--nodes", &nodes, "--jobs", &jobs];
    let report = json_report(&[&args[..], &["--format", "json"]].concat());
    for metric in ["gar_mean", "gar_p50", "sor", "gfr_mean"] {
        assert_eq!(report[metric], Value::Null, "{metric}: {report}");
    }
    assert_eq!(report["jobs_placed"], 1);
    let tenant = &report["tenants"][0];
    for mean in ["used_gpus_mean", "borrowed_gpus_mean", "pending_mean"] {
        assert_eq!(tenant[mean], Value::Null, "{mean}: {tenant}");
    }
    let output = kant(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let gar = stdout
        .lines()
        .find(|l| l.contains("GAR mean"))
        .expect("a GAR row");
    assert!(gar.trim_end_matches(['│', ' ']).ends_with('-'), "{gar}");
    let tenant = stdout
        .lines()
        .find(|l| l.contains("tenant default"))
        .expect("a row of the default tenant");
    assert!(tenant.contains("- / - of 0, - (max 0)"), "{tenant}");
    assert!(stderr.contains("GAR, SOR and GFR"), "{stderr}");
}
