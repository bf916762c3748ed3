//! The manifests under `manifests/`: the checked-in CRDs match the code, every document
//! parses and names itself, the ConfigMap holds a valid configuration, the Deployment runs
//! locked down with known flags, the RBAC grants no delete on pods and no secrets and says
//! why for every rule, and the examples are the objects they claim to be.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kant::config::Config;
use kant::kube::RunOptions;
use kant::kube::crd::{POD_GROUP_LABEL, PodGroup, Queue, QueueMode, crd_manifests};
use serde::de::DeserializeOwned;
use serde_json::Value;

mod common;
use common::rbac::{Grants, grants};

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

fn read(relative: &str) -> String {
    let path = manifests_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.yaml` file under `manifests/`, sorted, as paths relative to it.
fn yaml_files() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let relative = path.strip_prefix(base).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let base = manifests_dir();
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// The documents of one file, empty ones left out.
fn documents(relative: &str) -> Vec<Value> {
    let text = read(relative);
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("manifests/{relative} does not parse: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn of_kind(relative: &str, kind: &str) -> Vec<Value> {
    documents(relative)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect()
}

fn typed<T: DeserializeOwned>(relative: &str, doc: Value) -> T {
    let name = doc["metadata"]["name"].clone();
    serde_json::from_value(doc).unwrap_or_else(|e| {
        panic!(
            "manifests/{relative}: {name} is not a {}: {e}",
            std::any::type_name::<T>()
        )
    })
}

fn one<T: DeserializeOwned>(relative: &str, kind: &str) -> T {
    let mut docs = of_kind(relative, kind);
    assert_eq!(docs.len(), 1, "manifests/{relative}: one {kind}");
    typed(relative, docs.remove(0))
}

#[test]
fn crds_yaml_is_what_kant_crds_prints() {
    let checked_in = read("crds.yaml");
    assert!(
        checked_in == crd_manifests(),
        "manifests/crds.yaml is out of date with src/kube/crd.rs; regenerate it with\n    \
         cargo run -- crds > manifests/crds.yaml"
    );
}

#[test]
fn every_document_parses_and_names_itself() {
    let files = yaml_files();
    for expected in [
        "configmap.yaml",
        "crds.yaml",
        "deployment.yaml",
        "rbac.yaml",
        "examples/gang-64-gpus.yaml",
        "examples/half-gpu-pod.yaml",
        "examples/inference-deployment.yaml",
        "examples/one-gpu-pod.yaml",
        "examples/queues.yaml",
    ] {
        assert!(files.iter().any(|f| f == expected), "{expected} missing");
    }
    for file in &files {
        let text = read(file);
        assert!(
            text.starts_with('#'),
            "manifests/{file} starts with a comment on what it is for"
        );
        let docs = documents(file);
        assert!(!docs.is_empty(), "manifests/{file} holds no document");
        for (index, doc) in docs.iter().enumerate() {
            let at = format!("manifests/{file}, document {}", index + 1);
            assert!(doc.is_object(), "{at} is not a mapping");
            for field in ["apiVersion", "kind"] {
                assert!(
                    doc[field].as_str().is_some_and(|s| !s.is_empty()),
                    "{at} has no {field}"
                );
            }
            assert!(
                doc["metadata"]["name"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "{at} has no metadata.name"
            );
            // A scheduler outage must never block pod creation.
            let kind = doc["kind"].as_str().unwrap();
            assert!(
                !kind.ends_with("WebhookConfiguration"),
                "{at} is an admission webhook ({kind})"
            );
        }
    }
}

#[test]
fn configmap_holds_a_valid_configuration() {
    let config_map: ConfigMap = one("configmap.yaml", "ConfigMap");
    assert_eq!(config_map.metadata.name.as_deref(), Some("kant-config"));
    assert_eq!(
        config_map.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    let data = config_map.data.expect("data");
    let text = data.get("config.yaml").expect("config.yaml key");
    let config = Config::parse("manifests/configmap.yaml config.yaml", text)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(config.profile(&config.default_profile).is_some());
    assert!(
        config.tenants.is_empty(),
        "tenants come from Queue objects in a cluster"
    );
}

/// The flags of `kant run` the Deployment may use.
const ALLOWED_FLAGS: [&str; 6] = [
    "--config",
    "--scheduler-name",
    "--shard",
    "--metrics-addr",
    "--health-addr",
    "--lease-namespace",
];

#[test]
fn deployment_runs_locked_down_with_known_flags() {
    let deployment: Deployment = one("deployment.yaml", "Deployment");
    assert_eq!(deployment.metadata.name.as_deref(), Some("kant-scheduler"));
    assert_eq!(
        deployment.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("kant-scheduler"));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    // A replica told to stop waits up to --api-timeout for its bindings' answers, then
    // gives its Lease up (a read and a write of at most 2 s each): killed before, its
    // standby waits for the Lease to expire instead of leading at once.
    let drain = RunOptions::new(Config::embedded()).api_timeout.as_secs() as i64;
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    assert!(
        grace > drain + 4,
        "terminationGracePeriodSeconds {grace} leaves no time to give the Lease up after \
         a drain of {drain} s"
    );
    assert_eq!(pod.containers.len(), 1);
    let container = &pod.containers[0];

    let security = container
        .security_context
        .as_ref()
        .expect("securityContext");
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.run_as_user, Some(65532));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    let dropped = security
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    assert_eq!(dropped, vec!["ALL".to_owned()]);
    assert_eq!(
        security.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault")
    );
    assert_ne!(security.privileged, Some(true));

    let command = container.command.clone().unwrap_or_default();
    assert_eq!(command.len(), 2, "{command:?}");
    assert!(command[0].ends_with("kant"), "{command:?}");
    assert_eq!(command[1], "run");
    let args = container.args.clone().unwrap_or_default();
    // Each flag is one `kant run` has (a flag renamed in the CLI fails here).
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_kant"))
        .args(["run", "--help"])
        .output()
        .expect("kant run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let mut seen = BTreeSet::new();
    for arg in &args {
        let flag = arg.split('=').next().unwrap();
        assert!(ALLOWED_FLAGS.contains(&flag), "unexpected argument {arg}");
        assert!(help.contains(&format!("{flag} ")), "kant run has no {flag}");
        assert!(seen.insert(flag), "{flag} given twice");
    }
    for (flag, value) in [
        ("--config", "/etc/kant/config.yaml"),
        ("--scheduler-name", "kant-scheduler"),
        ("--shard", "all"),
        ("--lease-namespace", "kube-system"),
    ] {
        assert!(
            args.contains(&format!("{flag}={value}")),
            "{flag}={value} missing from {args:?}"
        );
    }

    let env = container.env.clone().unwrap_or_default();
    let pod_name = env.iter().find(|e| e.name == "POD_NAME").expect("POD_NAME");
    let field = pod_name
        .value_from
        .as_ref()
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(field, Some("metadata.name"));

    let resources = container.resources.as_ref().expect("resources");
    let limits = resources.limits.clone().unwrap_or_default();
    assert!(!limits.contains_key("cpu"), "no CPU limit on a scheduler");
    assert_eq!(limits.get("memory"), Some(&Quantity("2Gi".into())));
    let mount = container
        .volume_mounts
        .as_ref()
        .and_then(|m| m.iter().find(|m| m.mount_path == "/etc/kant"))
        .expect("config mounted at /etc/kant");
    assert_eq!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .as_ref()
        .and_then(|v| v.iter().find(|v| v.name == mount.name))
        .expect("config volume");
    assert_eq!(
        volume.config_map.as_ref().map(|c| c.name.as_str()),
        Some("kant-config")
    );
    for (path, probe) in [
        ("/healthz", &container.liveness_probe),
        ("/readyz", &container.readiness_probe),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path));
    }

    let service: Value = of_kind("deployment.yaml", "Service")
        .into_iter()
        .next()
        .expect("a metrics Service");
    assert_eq!(
        service["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(service["spec"]["ports"][0]["port"], 9090);
}

#[test]
fn rbac_is_least_privilege_and_explained() {
    let role: ClusterRole = one("rbac.yaml", "ClusterRole");
    let rules = role.rules.expect("rules");
    for rule in &rules {
        assert!(!grants(rule, "", "pods", "delete"), "delete on pods");
        assert!(
            !grants(rule, "", "pods", "deletecollection"),
            "delete on pods"
        );
        for verb in ["get", "list", "watch"] {
            assert!(!grants(rule, "", "secrets", verb), "access to secrets");
        }
        let everything = rule.verbs.iter().any(|v| v == "*")
            || rule.resources.iter().flatten().any(|r| r == "*")
            || rule.api_groups.iter().flatten().any(|g| g == "*");
        assert!(!everything, "a wildcard rule: {rule:?}");
        assert!(rule.non_resource_urls.is_none());
    }
    let needed = [
        ("", "pods", "watch"),
        ("", "pods", "get"),
        ("", "pods/binding", "create"),
        ("", "pods/status", "patch"),
        ("", "pods/eviction", "create"),
        ("", "nodes", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        ("kant.io", "queues", "watch"),
        ("kant.io", "queues/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "persistentvolumeclaims", "get"),
        ("", "persistentvolumeclaims", "patch"),
        ("", "persistentvolumes", "watch"),
        ("", "persistentvolumes", "get"),
        ("", "persistentvolumes", "patch"),
        ("storage.k8s.io", "storageclasses", "watch"),
    ];
    for (group, resource, verb) in needed {
        assert!(
            rules.iter().any(|r| grants(r, group, resource, verb)),
            "{verb} on {group}/{resource} missing"
        );
    }
    assert!(
        !rules
            .iter()
            .any(|r| grants(r, "coordination.k8s.io", "leases", "get")),
        "leases belong in the kube-system Role"
    );

    let lease_role: Role = one("rbac.yaml", "Role");
    assert_eq!(
        lease_role.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    let lease_rules = lease_role.rules.expect("rules");
    for verb in ["get", "list", "create", "update"] {
        assert!(
            lease_rules
                .iter()
                .any(|r| grants(r, "coordination.k8s.io", "leases", verb))
        );
    }
    for verb in ["patch", "delete"] {
        assert!(
            !lease_rules
                .iter()
                .any(|r| grants(r, "coordination.k8s.io", "leases", verb))
        );
    }

    // Every rule says why, in the comment line just above it.
    let text = read("rbac.yaml");
    let lines: Vec<&str> = text.lines().collect();
    let mut rule_lines = 0;
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("- apiGroups") {
            rule_lines += 1;
            let above = if index > 0 { lines[index - 1] } else { "" };
            assert!(
                above.trim_start().starts_with('#'),
                "manifests/rbac.yaml line {}: a rule without a comment above it",
                index + 1
            );
        }
    }
    assert_eq!(rule_lines, rules.len() + lease_rules.len());
}

fn gpu_limit(pod: &Pod) -> Option<Quantity> {
    pod.spec.as_ref()?.containers[0]
        .resources
        .as_ref()?
        .limits
        .as_ref()?
        .get("nvidia.com/gpu")
        .cloned()
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn scheduler_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.scheduler_name.as_deref()
}

#[test]
fn examples_are_the_objects_they_claim() {
    let one_gpu: Pod = one("examples/one-gpu-pod.yaml", "Pod");
    assert_eq!(scheduler_name(&one_gpu), Some("kant-scheduler"));
    assert_eq!(gpu_limit(&one_gpu), Some(Quantity("1".into())));
    assert_eq!(label(&one_gpu, "kant.io/queue"), Some("team-a"));

    let half: Pod = one("examples/half-gpu-pod.yaml", "Pod");
    assert_eq!(scheduler_name(&half), Some("kant-scheduler"));
    assert_eq!(gpu_limit(&half), None);
    let requests = half.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    assert!(!requests.contains_key("nvidia.com/gpu"));
    assert_eq!(annotation(&half, "kant.io/gpu-fraction"), Some("0.5"));

    let file = "examples/gang-64-gpus.yaml";
    let group: PodGroup = one(file, "PodGroup");
    let group_name = group.metadata.name.clone().unwrap();
    assert_eq!(group_name, "llm-pretrain");
    assert_eq!(group.spec.min_member, 8);
    let members: Vec<Pod> = of_kind(file, "Pod")
        .into_iter()
        .map(|d| typed(file, d))
        .collect();
    assert_eq!(members.len(), 8);
    let mut gpus = 0;
    for pod in &members {
        assert_eq!(scheduler_name(pod), Some("kant-scheduler"));
        assert_eq!(label(pod, POD_GROUP_LABEL), Some(group_name.as_str()));
        assert_eq!(pod.metadata.namespace, group.metadata.namespace);
        assert_eq!(annotation(pod, "kant.io/topology"), Some("preferred:leaf"));
        let selector = pod.spec.as_ref().unwrap().node_selector.clone();
        assert_eq!(
            selector
                .unwrap_or_default()
                .get("nvidia.com/gpu.product")
                .map(String::as_str),
            Some("NVIDIA-H100-80GB-HBM3")
        );
        assert_eq!(gpu_limit(pod), Some(Quantity("8".into())));
        gpus += 8;
    }
    assert_eq!(gpus, 64);

    let inference: Deployment = one("examples/inference-deployment.yaml", "Deployment");
    let spec = inference.spec.unwrap();
    assert_eq!(spec.replicas, Some(4));
    let template = Pod {
        metadata: spec.template.metadata.unwrap_or_default(),
        spec: spec.template.spec,
        status: None,
    };
    assert_eq!(scheduler_name(&template), Some("kant-scheduler"));
    assert_eq!(label(&template, "kant.io/workload"), Some("inference"));
    assert_eq!(gpu_limit(&template), Some(Quantity("1".into())));

    let file = "examples/queues.yaml";
    let queues: Vec<Queue> = of_kind(file, "Queue")
        .into_iter()
        .map(|d| typed(file, d))
        .collect();
    assert_eq!(queues.len(), 2);
    let team_a = queues
        .iter()
        .find(|q| q.metadata.name.as_deref() == Some("team-a"))
        .expect("team-a");
    assert_eq!(team_a.spec.mode, QueueMode::Shared);
    assert_eq!(team_a.spec.quota.get("NVIDIA-H100-80GB-HBM3"), Some(&64));
    let research = queues
        .iter()
        .find(|q| q.metadata.name.as_deref() == Some("team-research"))
        .expect("team-research");
    assert_eq!(research.spec.mode, QueueMode::Isolated);
    assert_eq!(research.spec.weight, 2.0);
    for queue in &queues {
        let name = queue.metadata.name.as_deref().unwrap();
        queue
            .spec
            .to_tenant_config(name)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn no_admission_webhook_and_readme_says_so() {
    let readme = read("README.md");
    assert!(readme.to_lowercase().contains("webhook"));
}

/// The tests' check of every request against `rbac.yaml` reads the API group off the URL:
/// events written through core/v1, which the ClusterRole does not grant, would be refused
/// there as a real API server refuses them, while events.k8s.io's pass.
#[test]
fn the_rbac_check_tells_the_two_event_apis_apart() {
    let event = |group: &str| kant_testkit::RequestRecord {
        seq: 0,
        verb: "create".into(),
        group: group.into(),
        resource: "events".into(),
        namespace: Some("ml".into()),
        name: None,
        code: 201,
    };
    let grants = Grants::of_manifests();
    assert!(grants.refused(&[event("events.k8s.io")]).is_empty());
    assert_eq!(
        grants.refused(&[event("")]),
        BTreeSet::from(["create /events in ml".to_owned()])
    );
}
