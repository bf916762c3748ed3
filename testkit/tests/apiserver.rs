//! The API server exercised through the real kube client: lists, watches, pagination,
//! selectors, bindings, patches, status subresources, a CRD, evictions, events, leases,
//! reflectors surviving dropped watches and compaction, and the dedicated runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod, PodSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kant_testkit::ApiServer;
use kube::api::{
    Api, DeleteParams, EvictParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut p = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![
                serde_json::from_value(json!({"name": "main", "image": "busybox"})).unwrap(),
            ],
            ..Default::default()
        }),
        status: None,
    };
    if !labels.is_empty() {
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    p
}

fn binding(pod: &str, node: &str, annotations: &[(&str, &str)]) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    }
}

fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn no_retry_client(server: &ApiServer) -> Client {
    let mut cfg = server.config();
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap()
}

async fn next<K, S>(s: &mut S) -> WatchEvent<K>
where
    S: Stream<Item = Result<WatchEvent<K>, kube::Error>> + Unpin,
{
    tokio::time::timeout(WAIT, s.next())
        .await
        .expect("a watch event in time")
        .expect("the stream is open")
        .expect("a well-formed event")
}

/// A watch of the pods from the server's current resourceVersion.
async fn watch_from_now(
    server: &ApiServer,
    pods: &Api<Pod>,
) -> futures::stream::BoxStream<'static, Result<WatchEvent<Pod>, kube::Error>> {
    pods.watch(
        &WatchParams::default(),
        &server.resource_version().to_string(),
    )
    .await
    .unwrap()
    .boxed()
}

/// The next non-bookmark event.
async fn next_change<K, S>(s: &mut S) -> WatchEvent<K>
where
    S: Stream<Item = Result<WatchEvent<K>, kube::Error>> + Unpin,
{
    loop {
        match next(s).await {
            WatchEvent::Bookmark(_) => continue,
            e => return e,
        }
    }
}

fn describe(e: &WatchEvent<Pod>) -> (String, String) {
    match e {
        WatchEvent::Added(p) => ("ADDED".into(), p.name_any()),
        WatchEvent::Modified(p) => ("MODIFIED".into(), p.name_any()),
        WatchEvent::Deleted(p) => ("DELETED".into(), p.name_any()),
        WatchEvent::Bookmark(_) => ("BOOKMARK".into(), String::new()),
        WatchEvent::Error(s) => ("ERROR".into(), s.message.clone()),
    }
}

fn rv_of(e: &WatchEvent<Pod>) -> u64 {
    match e {
        WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
            p.resource_version().unwrap().parse().unwrap()
        }
        _ => panic!("no object in {e:?}"),
    }
}

#[tokio::test]
async fn list_then_watch_resumes_without_gap() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    for i in 0..3 {
        pods.create(&pp, &pod(&format!("p{i}"), &[])).await.unwrap();
    }
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 3);
    let list_rv = list.metadata.resource_version.unwrap();
    assert_eq!(list_rv, server.resource_version().to_string());

    // Changes between the list and the watch must all arrive.
    pods.create(&pp, &pod("p3", &[])).await.unwrap();
    server.set_pod_phase("default", "p0", "Running");
    pods.delete("p1", &DeleteParams::default()).await.unwrap();

    let mut w = pods
        .watch(&WatchParams::default(), &list_rv)
        .await
        .unwrap()
        .boxed();
    let e1 = next_change(&mut w).await;
    let e2 = next_change(&mut w).await;
    let e3 = next_change(&mut w).await;
    assert_eq!(describe(&e1), ("ADDED".into(), "p3".into()));
    assert_eq!(describe(&e2), ("MODIFIED".into(), "p0".into()));
    assert_eq!(describe(&e3), ("DELETED".into(), "p1".into()));
    if let WatchEvent::Modified(p) = &e2 {
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    }
    // A change after the watch started.
    pods.create(&pp, &pod("p4", &[])).await.unwrap();
    let e4 = next_change(&mut w).await;
    assert_eq!(describe(&e4), ("ADDED".into(), "p4".into()));
    let rvs = [rv_of(&e1), rv_of(&e2), rv_of(&e3), rv_of(&e4)];
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");

    // Resuming from the middle replays exactly what followed.
    let mut w2 = pods
        .watch(&WatchParams::default(), &rv_of(&e2).to_string())
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next_change(&mut w2).await),
        ("DELETED".into(), "p1".into())
    );
    assert_eq!(
        describe(&next_change(&mut w2).await),
        ("ADDED".into(), "p4".into())
    );

    // resourceVersion "0": the current state as synthetic ADDED events.
    let mut w3 = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut names = BTreeSet::new();
    for _ in 0..4 {
        let (ty, name) = describe(&next_change(&mut w3).await);
        assert_eq!(ty, "ADDED");
        names.insert(name);
    }
    assert_eq!(
        names,
        ["p0", "p2", "p3", "p4"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_set_up_during_writes_misses_nothing() {
    let server = ApiServer::start().await;
    let writer = server.clone();
    const N: usize = 300;
    let task = tokio::spawn(async move {
        for i in 0..N {
            writer.create(&pod(&format!("w{i:03}"), &[]));
            if i % 10 == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    tokio::time::sleep(Duration::from_millis(2)).await;
    let list = pods.list(&ListParams::default().limit(7)).await.unwrap();
    let mut seen: BTreeSet<String> = list.items.iter().map(|p| p.name_any()).collect();
    let mut token = list.metadata.continue_.clone();
    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = pods
            .list(&ListParams::default().limit(7).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(list_rv.to_string().as_str())
        );
        for p in &page.items {
            assert!(seen.insert(p.name_any()), "duplicate {}", p.name_any());
        }
        token = page.metadata.continue_;
    }
    let mut w = pods
        .watch(&WatchParams::default(), &list_rv.to_string())
        .await
        .unwrap()
        .boxed();
    let mut last = list_rv;
    while seen.len() < N {
        let e = next_change(&mut w).await;
        let (ty, name) = describe(&e);
        assert_eq!(ty, "ADDED");
        let rv = rv_of(&e);
        assert!(rv > last, "out of order: {rv} after {last}");
        last = rv;
        assert!(seen.insert(name.clone()), "duplicate {name}");
    }
    task.await.unwrap();
    assert_eq!(seen.len(), N);
    assert_eq!(last, server.resource_version());
}

#[tokio::test]
async fn bookmarks_arrive_with_the_current_resource_version() {
    let server = ApiServer::start().await;
    server.set_bookmark_interval(Duration::from_millis(50));
    server.create(&pod("a", &[]));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut w = pods
        .watch(&WatchParams::default().timeout(5), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next(&mut w).await), ("ADDED".into(), "a".into()));
    match next(&mut w).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata.resource_version,
                server.resource_version().to_string()
            );
            assert_eq!(b.types.kind, "Pod");
            assert_eq!(b.types.api_version, "v1");
        }
        e => panic!("expected a bookmark, got {e:?}"),
    }
    // Without allowWatchBookmarks, none.
    let mut quiet = pods
        .watch(&WatchParams::default().disable_bookmarks().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next(&mut quiet).await),
        ("ADDED".into(), "a".into())
    );
    // timeoutSeconds ends the stream cleanly.
    let end = tokio::time::timeout(WAIT, quiet.next()).await.unwrap();
    assert!(end.is_none(), "{end:?}");
}

/// A `continue` token carries the resourceVersion of its first page: the real server
/// refuses a resourceVersion (other than "0") or a resourceVersionMatch beside it, and an
/// exact match at "0". (kube's client never sends these; the raw requests do.)
#[tokio::test]
async fn a_continued_list_takes_no_resource_version_of_its_own() {
    let server = ApiServer::start().await;
    let client = no_retry_client(&server);
    for i in 0..3 {
        server.create(&pod(&format!("p{i}"), &[]));
    }
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let first = pods.list(&ListParams::default().limit(1)).await.unwrap();
    let token = first.metadata.continue_.unwrap();
    let list = |query: String| {
        let request = axum::http::Request::get(format!("/api/v1/namespaces/default/pods?{query}"))
            .body(Vec::new())
            .unwrap();
        let client = client.clone();
        async move { client.request::<serde_json::Value>(request).await }
    };
    let refused = [
        (format!("limit=1&continue={token}&resourceVersion=5"), 400),
        (
            format!("limit=1&continue={token}&resourceVersion=0&resourceVersionMatch=NotOlderThan"),
            422,
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact".to_string(),
            422,
        ),
    ];
    for (query, code) in refused {
        assert_eq!(api_error(list(query.clone()).await).code, code, "{query}");
    }
    let page = list(format!("limit=1&continue={token}&resourceVersion=0"))
        .await
        .unwrap();
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn compaction_expires_watches_and_continue_tokens() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    for i in 0..5 {
        server.create(&pod(&format!("p{i}"), &[]));
    }
    let old_rv = server.resource_version();
    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    server.create(&pod("p5", &[]));
    server.compact();

    let mut w = pods
        .watch(&WatchParams::default(), &old_rv.to_string())
        .await
        .unwrap()
        .boxed();
    match next(&mut w).await {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
            assert!(
                s.message.contains("too old resource version"),
                "{}",
                s.message
            );
        }
        e => panic!("expected a 410 ERROR event, got {e:?}"),
    }
    assert!(
        tokio::time::timeout(WAIT, w.next())
            .await
            .unwrap()
            .is_none()
    );

    let s = api_error(
        pods.list(&ListParams::default().limit(2).continue_token(&token))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));

    // From the current resourceVersion the watch works.
    let mut w = watch_from_now(&server, &pods).await;
    server.create(&pod("p6", &[]));
    assert_eq!(
        describe(&next_change(&mut w).await),
        ("ADDED".into(), "p6".into())
    );
}

#[tokio::test]
async fn pagination_is_a_consistent_snapshot() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    for i in 0..25 {
        server.create(&pod(&format!("p{i:02}"), &[]));
    }
    let lp = ListParams::default().limit(10);
    let p1 = pods.list(&lp).await.unwrap();
    assert_eq!(p1.items.len(), 10);
    assert_eq!(p1.metadata.remaining_item_count, Some(15));
    let rv = p1.metadata.resource_version.clone();
    // Changes between pages do not show.
    server.delete::<Pod>(Some("default"), "p15");
    server.create(&pod("p99", &[]));
    let p2 = pods
        .list(
            &lp.clone()
                .continue_token(p1.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let p3 = pods
        .list(
            &lp.clone()
                .continue_token(p2.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(p2.items.len(), 10);
    assert_eq!(p3.items.len(), 5);
    assert!(p3.metadata.continue_.is_none());
    assert_eq!(p2.metadata.resource_version, rv);
    let names: Vec<String> = [p1, p2, p3]
        .iter()
        .flat_map(|l| l.items.iter().map(|p| p.name_any()))
        .collect();
    let expected: Vec<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    assert_eq!(names, expected);
    // A fresh list sees the changes.
    let all = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 25);
    assert!(all.items.iter().any(|p| p.name_any() == "p99"));
    // A malformed token is a 400.
    let s = api_error(
        pods.list(&ListParams::default().continue_token("garbage"))
            .await,
    );
    assert_eq!(s.code, 400);
}

#[tokio::test]
async fn label_and_field_selectors_on_list_and_watch() {
    let server = ApiServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    server.create(&pod("web1", &[("app", "web"), ("tier", "front")]));
    server.create(&pod("web2", &[("app", "web")]));
    server.create(&pod("db1", &[("app", "db"), ("tier", "back")]));
    let mut other = pod("db2", &[("app", "db")]);
    other.metadata.namespace = Some("other".into());
    server.create(&other);

    let names = |l: kube::core::ObjectList<Pod>| -> Vec<String> {
        l.items.iter().map(|p| p.name_any()).collect()
    };
    let list = |sel: &str| list_with(&pods, ListParams::default().labels(sel));
    assert_eq!(names(list("app=web").await.unwrap()), ["web1", "web2"]);
    assert_eq!(
        names(list("app in (web,db),tier!=back").await.unwrap()),
        ["web1", "web2"]
    );
    assert_eq!(names(list("!tier").await.unwrap()), ["web2"]);
    assert_eq!(names(list("tier").await.unwrap()), ["db1", "web1"]);
    assert_eq!(names(list("app notin (web)").await.unwrap()), ["db1"]);
    let all: Api<Pod> = Api::all(client.clone());
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("app=db"))
                .await
                .unwrap()
        ),
        ["db1", "db2"]
    );
    assert_eq!(api_error(list("app in web").await).code, 400);

    pods.create_subresource::<_, Status>(
        "binding",
        "web1",
        &PostParams::default(),
        &binding("web1", "n1", &[]),
    )
    .await
    .unwrap();
    let fields = |sel: &str| list_with(&all, ListParams::default().fields(sel));
    assert_eq!(names(fields("spec.nodeName=n1").await.unwrap()), ["web1"]);
    assert_eq!(
        names(
            fields("spec.nodeName=,metadata.namespace=default")
                .await
                .unwrap()
        ),
        ["db1", "web2"]
    );
    assert_eq!(
        names(
            fields("spec.nodeName!=n1,metadata.name==db2")
                .await
                .unwrap()
        ),
        ["db2"]
    );
    assert_eq!(
        names(
            fields("spec.schedulerName=default-scheduler,status.phase=Pending")
                .await
                .unwrap()
        )
        .len(),
        4
    );
    let s = api_error(fields("spec.priority=5").await);
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(
        s.message.contains("field label not supported"),
        "{}",
        s.message
    );
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(
        api_error(
            nodes
                .list(&ListParams::default().fields("spec.nodeName=x"))
                .await
        )
        .code,
        400
    );

    // A label-selected watch: objects entering and leaving the selection.
    let mut w = pods
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await
        .unwrap()
        .boxed();
    let mut initial = BTreeSet::new();
    initial.insert(describe(&next_change(&mut w).await));
    initial.insert(describe(&next_change(&mut w).await));
    assert_eq!(
        initial,
        [
            ("ADDED".to_string(), "web1".to_string()),
            ("ADDED".into(), "web2".into())
        ]
        .into()
    );
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    pods.patch("db1", &PatchParams::default(), &json_patch_noop())
        .await
        .unwrap();
    pods.patch("web2", &PatchParams::default(), &relabel("db"))
        .await
        .unwrap();
    let left = next_change(&mut w).await;
    assert_eq!(describe(&left), ("DELETED".into(), "web2".into()));
    if let WatchEvent::Deleted(p) = &left {
        // The previous state, at the event's resourceVersion.
        assert_eq!(p.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(
            p.resource_version(),
            server
                .get::<Pod>(Some("default"), "web2")
                .unwrap()
                .resource_version()
        );
    }
    pods.patch("db1", &PatchParams::default(), &relabel("web"))
        .await
        .unwrap();
    assert_eq!(
        describe(&next_change(&mut w).await),
        ("ADDED".into(), "db1".into())
    );
    pods.patch(
        "db1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        describe(&next_change(&mut w).await),
        ("MODIFIED".into(), "db1".into())
    );

    // A field-selected watch sees a pod once it is bound.
    let mut wf = all
        .watch(&WatchParams::default().fields("spec.nodeName=n2"), "0")
        .await
        .unwrap()
        .boxed();
    pods.create_subresource::<_, Status>(
        "binding",
        "web2",
        &PostParams::default(),
        &binding("web2", "n2", &[]),
    )
    .await
    .unwrap();
    assert_eq!(
        describe(&next_change(&mut wf).await),
        ("ADDED".into(), "web2".into())
    );
}

async fn list_with(
    api: &Api<Pod>,
    lp: ListParams,
) -> Result<kube::core::ObjectList<Pod>, kube::Error> {
    api.list(&lp).await
}

/// A merge patch that changes nothing (and so stores nothing).
fn json_patch_noop() -> Patch<serde_json::Value> {
    Patch::Merge(json!({}))
}

#[tokio::test]
async fn binding_semantics() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(&server));
    let pp = PostParams::default();
    pods.create(&pp, &pod("p", &[])).await.unwrap();
    let mut gated = pod("g", &[]);
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![
        serde_json::from_value(json!({"name": "kant.io/wait"})).unwrap(),
    ]);
    pods.create(&pp, &gated).await.unwrap();

    let s: Status = pods
        .create_subresource(
            "binding",
            "p",
            &pp,
            &binding("p", "n1", &[("kant.io/devices", "gpu0,gpu1")]),
        )
        .await
        .unwrap();
    assert!(s.is_success());
    assert_eq!(s.code, 201);
    let bound = pods.get("p").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    assert_eq!(
        bound
            .annotations()
            .get("kant.io/devices")
            .map(String::as_str),
        Some("gpu0,gpu1")
    );
    let conds = bound.status.as_ref().unwrap().conditions.clone().unwrap();
    let sched: Vec<_> = conds.iter().filter(|c| c.type_ == "PodScheduled").collect();
    assert_eq!(sched.len(), 1);
    assert_eq!(sched[0].status, "True");
    assert!(sched[0].last_transition_time.is_some());

    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "p", &pp, &binding("p", "n2", &[]))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("is already assigned to node \"n1\""),
        "{}",
        s.message
    );

    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "g", &pp, &binding("g", "n1", &[]))
            .await,
    );
    assert_eq!(s.code, 409);
    assert!(
        s.message.contains("non-empty .spec.schedulingGates"),
        "{}",
        s.message
    );

    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "nope", &pp, &binding("nope", "n1", &[]))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));

    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "g", &pp, &binding("other", "n1", &[]))
            .await,
    );
    assert_eq!(s.code, 400);

    // A uid precondition.
    pods.create(&pp, &pod("q", &[])).await.unwrap();
    let mut b = binding("q", "n2", &[]);
    b.metadata.uid = Some("not-the-uid".into());
    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "q", &pp, &b)
            .await,
    );
    assert_eq!(s.code, 409);

    // Injected failures, then success.
    server.fail_next_bindings("default", "q", 2, 409);
    for _ in 0..2 {
        let s = api_error(
            pods.create_subresource::<_, Status>("binding", "q", &pp, &binding("q", "n2", &[]))
                .await,
        );
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    }
    assert!(
        server
            .get::<Pod>(Some("default"), "q")
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .is_none()
    );
    let q_uid = server.get::<Pod>(Some("default"), "q").unwrap().uid();
    let mut b = binding("q", "n2", &[]);
    b.metadata.uid = q_uid;
    pods.create_subresource::<_, Status>("binding", "q", &pp, &b)
        .await
        .unwrap();
    // A retried 503 is invisible to a client with kube's default retry policy.
    pods.create(&pp, &pod("r", &[])).await.unwrap();
    server.fail_next_bindings("default", "r", 1, 503);
    let retrying: Api<Pod> = Api::default_namespaced(server.client());
    retrying
        .create_subresource::<_, Status>("binding", "r", &pp, &binding("r", "n3", &[]))
        .await
        .unwrap();

    assert_eq!(
        server.bindings(),
        vec![
            ("default".to_string(), "p".to_string(), "n1".to_string()),
            ("default".into(), "q".into(), "n2".into()),
            ("default".into(), "r".into(), "n3".into()),
        ]
    );
    assert_eq!(server.request_count("create", "pods/binding"), 11);
    let recorded: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "pods/binding" && r.code == 201)
        .map(|r| r.name.unwrap())
        .collect();
    assert_eq!(recorded, ["p", "q", "r"]);
    // Only a binding sets spec.nodeName: a patch that tries is refused.
    let s = api_error(
        pods.patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    // Removing a scheduling gate is allowed, and then the pod binds.
    pods.patch(
        "g",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"schedulingGates": null}})),
    )
    .await
    .unwrap();
    pods.create_subresource::<_, Status>("binding", "g", &pp, &binding("g", "n1", &[]))
        .await
        .unwrap();
}

#[tokio::test]
async fn status_patches_and_optimistic_concurrency() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let created = pods
        .create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());

    let pp = PatchParams::default();
    let unsched = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}});
    let after = pods
        .patch_status("p", &pp, &Patch::Strategic(unsched.clone()))
        .await
        .unwrap();
    let rv1 = after.resource_version().unwrap();
    // The same patch again changes nothing: no new resourceVersion.
    let again = pods
        .patch_status("p", &pp, &Patch::Strategic(unsched))
        .await
        .unwrap();
    assert_eq!(again.resource_version().unwrap(), rv1);
    pods.patch_status(
        "p",
        &pp,
        &Patch::Strategic(
            json!({"status": {"conditions": [{"type": "kant.io/Queued", "status": "True"}]}}),
        ),
    )
    .await
    .unwrap();
    let p = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Strategic(json!({"status": {"conditions": [{"type": "PodScheduled", "message": "1/3 nodes"}]}})),
        )
        .await
        .unwrap();
    let conds = p.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 2, "{conds:?}");
    assert_eq!(conds[0].type_, "PodScheduled");
    assert_eq!(conds[0].reason.as_deref(), Some("Unschedulable"));
    assert_eq!(conds[0].message.as_deref(), Some("1/3 nodes"));
    assert_eq!(conds[1].type_, "kant.io/Queued");
    // A merge patch replaces the list.
    let p = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().conditions.unwrap().len(), 1);
    // The status subresource ignores everything but status; the main resource ignores status.
    let p = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}}),
            ),
        )
        .await
        .unwrap();
    assert!(p.labels().is_empty());
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let p = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Failed"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.labels().get("x").map(String::as_str), Some("y"));
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(p.metadata.generation, Some(1));

    // A stale resourceVersion in a patch or a replace is a 409; the current one works.
    let stale = rv1;
    let s = api_error(
        pods.patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": stale, "labels": {"z": "1"}}})),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("the object has been modified"),
        "{}",
        s.message
    );
    let current = pods.get("p").await.unwrap();
    let ok = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": current.resource_version(), "labels": {"z": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(ok.labels().get("z").map(String::as_str), Some("1"));
    let s = api_error(pods.replace("p", &PostParams::default(), &current).await);
    assert_eq!(s.code, 409);
    // A patch naming another uid (the pod deleted and created again) is a 409 too.
    let s = api_error(
        pods.patch_status(
            "p",
            &pp,
            &Patch::Strategic(
                json!({"metadata": {"uid": "another"}, "status": {"nominatedNodeName": "n"}}),
            ),
        )
        .await,
    );
    assert_eq!(s.code, 409);
    assert!(
        s.message.contains("UID in precondition: another"),
        "{}",
        s.message
    );
    let s = api_error(
        pods.replace_status("p", &PostParams::default(), &current)
            .await,
    );
    assert_eq!(s.code, 409);
    // JSON patch: test + add.
    let p = pods
        .patch(
            "p",
            &pp,
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/labels/z", "value": "1"},
                    {"op": "add", "path": "/metadata/labels/w", "value": "2"}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.labels().get("w").map(String::as_str), Some("2"));
    let s = api_error(
        pods.patch(
            "p",
            &pp,
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "test", "path": "/metadata/labels/z", "value": "9"}]),
                )
                .unwrap(),
            ),
        )
        .await,
    );
    assert_eq!(s.code, 422);
    // A spec change bumps generation (tolerations may be added).
    let p = pods
        .patch(
            "p",
            &pp,
            &Patch::Strategic(
                json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    // PATCH of a missing object is a 404.
    let s = api_error(pods.patch("nope", &pp, &json_patch_noop()).await);
    assert_eq!(s.code, 404);
}

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.x-k8s.io",
    version = "v1alpha1",
    kind = "PodGroup",
    namespaced,
    status = "PodGroupStatus"
)]
pub struct PodGroupSpec {
    #[serde(rename = "minMember")]
    pub min_member: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PodGroupStatus {
    pub phase: Option<String>,
    pub scheduled: Option<i32>,
}

#[tokio::test]
async fn custom_resource_round_trip() {
    let server = ApiServer::start().await;
    let groups: Api<PodGroup> = Api::namespaced(server.client(), "team-a");
    let mut pg = PodGroup::new("train", PodGroupSpec { min_member: 4 });
    pg.status = Some(PodGroupStatus {
        phase: Some("Ignored".into()),
        scheduled: None,
    });
    let created = groups.create(&PostParams::default(), &pg).await.unwrap();
    assert_eq!(created.spec.min_member, 4);
    assert!(created.status.is_none(), "status is dropped on create");
    assert_eq!(created.namespace().as_deref(), Some("team-a"));

    let mut w = groups
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match next_change(&mut w).await {
        WatchEvent::Added(g) => assert_eq!(g.name_any(), "train"),
        e => panic!("{e:?}"),
    }
    let list = groups.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let all: Api<PodGroup> = Api::all(server.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    let patched = groups
        .patch_status(
            "train",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running", "scheduled": 4}, "spec": {"minMember": 1}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.status,
        Some(PodGroupStatus {
            phase: Some("Running".into()),
            scheduled: Some(4)
        })
    );
    assert_eq!(patched.spec.min_member, 4);
    match next_change(&mut w).await {
        WatchEvent::Modified(g) => assert_eq!(g.status.unwrap().scheduled, Some(4)),
        e => panic!("{e:?}"),
    }
    // Server-side apply of the status works too.
    groups
        .patch_status(
            "train",
            &PatchParams::apply("kant"),
            &Patch::Apply(json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "status": {"phase": "Finished"}})),
        )
        .await
        .unwrap();
    match next_change(&mut w).await {
        WatchEvent::Modified(g) => assert_eq!(g.status.unwrap().phase.as_deref(), Some("Finished")),
        e => panic!("{e:?}"),
    }
    let stored: PodGroup = server.get(Some("team-a"), "train").unwrap();
    assert_eq!(stored.status.unwrap().phase.as_deref(), Some("Finished"));
    // Strategic merge patches are not supported for custom resources.
    let s = api_error(
        groups
            .patch_status(
                "train",
                &PatchParams::default(),
                &Patch::Strategic(json!({"status": {"phase": "X"}})),
            )
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
    // Typed helpers see and write the same objects.
    let mut direct = PodGroup::new("eval", PodGroupSpec { min_member: 1 });
    direct.metadata.namespace = Some("team-a".into());
    server.create(&direct);
    match next_change(&mut w).await {
        WatchEvent::Added(g) => assert_eq!(g.name_any(), "eval"),
        e => panic!("{e:?}"),
    }
    assert_eq!(server.list::<PodGroup>().len(), 2);
    groups
        .delete("eval", &DeleteParams::default())
        .await
        .unwrap();
    match next_change(&mut w).await {
        WatchEvent::Deleted(g) => assert_eq!(g.name_any(), "eval"),
        e => panic!("{e:?}"),
    }
}

fn pdb(
    name: &str,
    app: &str,
    min_available: Option<serde_json::Value>,
    max_unavailable: Option<serde_json::Value>,
) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    if let Some(m) = min_available {
        spec["minAvailable"] = m;
    }
    if let Some(m) = max_unavailable {
        spec["maxUnavailable"] = m;
    }
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

#[tokio::test]
async fn eviction_honours_disruption_budgets() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(&server));
    let ep = EvictParams::default();
    for i in 1..=3 {
        server.create(&pod(&format!("a{i}"), &[("app", "a")]));
        server.set_pod_phase("default", &format!("a{i}"), "Running");
    }
    // No budget: evicted.
    let s = pods.evict("a1", &ep).await.unwrap();
    assert!(s.is_success());
    assert_eq!(s.code, 201);
    assert!(server.get::<Pod>(Some("default"), "a1").is_none());

    // minAvailable 2 with 2 running: refused.
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(server.client());
    budgets
        .create(
            &PostParams::default(),
            &pdb("a-pdb", "a", Some(json!(2)), None),
        )
        .await
        .unwrap();
    let s = api_error(pods.evict("a2", &ep).await);
    assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
    assert!(s.message.contains("disruption budget"), "{}", s.message);
    assert!(server.get::<Pod>(Some("default"), "a2").is_some());

    // A pending pod does not count and may always go.
    server.create(&pod("a4", &[("app", "a")]));
    pods.evict("a4", &ep).await.unwrap();

    // A third running pod makes room for one eviction.
    server.create(&pod("a5", &[("app", "a")]));
    server.set_pod_phase("default", "a5", "Running");
    pods.evict("a2", &ep).await.unwrap();
    assert_eq!(api_error(pods.evict("a3", &ep).await).code, 429);

    // maxUnavailable as a percentage: 50% of 2 rounds up to 1 → one may go.
    budgets
        .delete("a-pdb", &DeleteParams::default())
        .await
        .unwrap();
    budgets
        .create(
            &PostParams::default(),
            &pdb("a-pdb", "a", None, Some(json!("50%"))),
        )
        .await
        .unwrap();
    pods.evict("a3", &ep).await.unwrap();
    // With one pod left, 50% of 1 rounds up to 1 unavailable: allowed, unless the budget's
    // status declares more expected pods (as the disruption controller would from the
    // owner's scale): then 2 - 1 = 1 must stay healthy.
    let mut budget: PodDisruptionBudget = server.get(Some("default"), "a-pdb").unwrap();
    budget.status = Some(serde_json::from_value(json!({"expectedPods": 2, "currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0})).unwrap());
    server.update(&budget);
    assert_eq!(api_error(pods.evict("a5", &ep).await).code, 429);
    budget.metadata.resource_version = None;
    budget.status = None;
    server.update(&budget);
    pods.evict("a5", &ep).await.unwrap();

    // Pods outside the selector are not affected; a missing pod is a 404.
    server.create(&pod("b1", &[("app", "b")]));
    server.set_pod_phase("default", "b1", "Running");
    pods.evict("b1", &ep).await.unwrap();
    assert_eq!(api_error(pods.evict("b1", &ep).await).code, 404);
    assert_eq!(server.request_count("create", "pods/eviction"), 10);
}

/// A bound pod, running.
async fn running_on(server: &ApiServer, pods: &Api<Pod>, name: &str, node: &str) {
    server.create(&pod(name, &[]));
    let _: Status = pods
        .create_subresource(
            "binding",
            name,
            &PostParams::default(),
            &binding(name, node, &[]),
        )
        .await
        .unwrap();
    server.set_pod_phase("default", name, "Running");
}

/// A bound pod that is deleted or evicted terminates: it is marked with `deletionTimestamp`
/// (and, evicted, the `DisruptionTarget` condition), cannot be bound, and goes only once its
/// kubelet is done with it. An unbound pod goes at once.
#[tokio::test]
async fn a_bound_pod_terminates_before_it_goes() {
    let server = ApiServer::start().await;
    // Long enough for the requests made while the pods terminate, on a loaded machine.
    server.set_termination_delay(Duration::from_secs(2));
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(&server));
    let mut events = watch_from_now(&server, &pods).await;
    running_on(&server, &pods, "victim", "n1").await;
    running_on(&server, &pods, "deleted", "n1").await;
    for _ in 0..6 {
        next_change(&mut events).await;
    }

    pods.evict("victim", &EvictParams::default()).await.unwrap();
    let WatchEvent::Modified(marked) = next_change(&mut events).await else {
        panic!("the evicted pod is marked first");
    };
    let condition = marked.status.unwrap().conditions.unwrap();
    let disruption = condition
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(disruption.reason.as_deref(), Some("EvictionByEvictionAPI"));
    let WatchEvent::Modified(terminating) = next_change(&mut events).await else {
        panic!("then it terminates");
    };
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let WatchEvent::Deleted(gone) = next_change(&mut events).await else {
        panic!("and goes once its kubelet is done");
    };
    assert_eq!(gone.name_any(), "victim");

    // A delete with its own grace period; meanwhile the pod cannot be bound again.
    let params = DeleteParams::default().grace_period(5);
    let answered = pods.delete("deleted", &params).await.unwrap();
    let still_there = answered
        .left()
        .expect("a terminating pod is answered, not a Status");
    assert_eq!(still_there.metadata.deletion_grace_period_seconds, Some(5));
    let refused = pods
        .create_subresource::<_, Status>(
            "binding",
            "deleted",
            &PostParams::default(),
            &binding("deleted", "n2", &[]),
        )
        .await;
    let refused = api_error(refused);
    assert_eq!(refused.code, 409);
    assert!(
        refused.message.contains("being deleted"),
        "{}",
        refused.message
    );
    tokio::time::timeout(WAIT, async {
        while server.get::<Pod>(Some("default"), "deleted").is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the deleted pod goes");

    // Not bound: gone at once.
    server.create(&pod("pending", &[]));
    pods.delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    assert!(server.get::<Pod>(Some("default"), "pending").is_none());
}

#[tokio::test]
async fn recorder_events_are_accepted() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = ApiServer::start().await;
    let client = server.client();
    let p = server.create(&pod("p", &[]));
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kant".into(),
            instance: Some("kant-0".into()),
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "FailedScheduling".into(),
        note: Some("0/3 nodes are available".into()),
        action: "Scheduling".into(),
        secondary: None,
    };
    let reference = p.object_ref(&());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events = server.list::<k8s_openapi::api::events::v1::Event>();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(e.regarding.as_ref().unwrap().name.as_deref(), Some("p"));
    assert_eq!(e.series.as_ref().unwrap().count, 2);
    assert_eq!(server.request_count("create", "events"), 1);
    assert_eq!(server.request_count("patch", "events"), 1);
    // Core v1 events are served as well.
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client);
    core.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"generateName": "p."}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled"}))
            .unwrap(),
    )
    .await
    .unwrap();
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=p"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(listed.items[0].name_any().starts_with("p."));
}

#[tokio::test]
async fn lease_manager_acquires_and_releases_a_lease() {
    use kube_lease_manager::LeaseManagerBuilder;
    let server = ApiServer::start().await;
    let manager = LeaseManagerBuilder::new(server.client(), "kant-shard-0")
        .with_namespace("default")
        .with_identity("kant-0")
        .with_duration(10)
        .with_grace(2)
        .build()
        .await
        .unwrap();
    let locked = tokio::time::timeout(WAIT, manager.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(locked);
    let lease: Lease = server.get(Some("default"), "kant-shard-0").unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("kant-0"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, Some(10));
    assert!(server.request_count("patch", "leases") >= 2);

    // A second identity sees it held.
    let other = LeaseManagerBuilder::new(server.client(), "kant-shard-0")
        .with_namespace("default")
        .with_identity("kant-1")
        .with_duration(10)
        .with_grace(2)
        .build()
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), other.changed())
            .await
            .is_err()
    );

    manager.release().await.unwrap();
    let lease: Lease = server.get(Some("default"), "kant-shard-0").unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_none());

    // An apply patch creates a missing lease (201) and needs a field manager.
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "direct"}, "spec": {"holderIdentity": "x"}});
    let created = leases
        .patch(
            "direct",
            &PatchParams::apply("kant"),
            &Patch::Apply(body.clone()),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.unwrap().holder_identity.as_deref(), Some("x"));
    let s = api_error(
        leases
            .patch("direct", &PatchParams::default(), &Patch::Apply(body))
            .await,
    );
    assert_eq!(s.code, 422);
}

fn snapshot(pods: &[std::sync::Arc<Pod>]) -> BTreeMap<(String, String), Pod> {
    pods.iter()
        .map(|p| {
            (
                (p.namespace().unwrap_or_default(), p.name_any()),
                (**p).clone(),
            )
        })
        .collect()
}

fn server_snapshot(server: &ApiServer) -> BTreeMap<(String, String), Pod> {
    server
        .list::<Pod>()
        .into_iter()
        .map(|p| ((p.namespace().unwrap_or_default(), p.name_any()), p))
        .collect()
}

async fn converge(server: &ApiServer, reader: &reflector::Store<Pod>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if snapshot(&reader.state()) == server_snapshot(server) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reflector did not converge"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn reflector_survives_dropped_watches_and_compaction() {
    let server = ApiServer::start().await;
    server.set_bookmark_interval(Duration::from_millis(100));
    for i in 0..10 {
        server.create(&pod(&format!("p{i}"), &[]));
    }
    let pods: Api<Pod> = Api::all(server.client());
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(pods, watcher::Config::default().page_size(3)),
    )
    .default_backoff()
    .touched_objects();
    let task = tokio::spawn(async move {
        stream.for_each(|_| futures::future::ready(())).await;
    });
    reader.wait_until_ready().await.unwrap();
    converge(&server, &reader).await;
    assert!(server.wait_for_watches(1, WAIT).await);

    let lists_initial = server.request_count("list", "pods");

    // Dropped watches: the watcher resumes from its last resourceVersion. (No await between
    // the drop and the writes, so the watcher misses them and must catch up on resume.)
    server.drop_watches();
    for i in 10..15 {
        server.create(&pod(&format!("p{i}"), &[]));
    }
    server.delete::<Pod>(Some("default"), "p0");
    server.set_pod_phase("default", "p1", "Running");
    converge(&server, &reader).await;
    let watches_before = server.request_count("watch", "pods");
    assert!(watches_before >= 2, "{watches_before}");
    assert_eq!(
        server.request_count("list", "pods"),
        lists_initial,
        "resumed without a relist"
    );

    // Compaction while disconnected: the resume gets 410 and the watcher relists.
    assert!(server.wait_for_watches(1, WAIT).await);
    let lists_before = server.request_count("list", "pods");
    server.drop_watches();
    server.delete::<Pod>(Some("default"), "p2");
    server.delete::<Pod>(Some("default"), "p3");
    server.create(&pod("p20", &[]));
    server.set_pod_phase("default", "p4", "Failed");
    server.compact();
    converge(&server, &reader).await;
    assert!(server.request_count("list", "pods") > lists_before);
    // And it keeps following.
    assert!(server.wait_for_watches(1, WAIT).await);
    server.create(&pod("p21", &[]));
    converge(&server, &reader).await;
    assert_eq!(reader.state().len(), 14);
    task.abort();
}

#[tokio::test]
async fn streaming_list_watcher_gets_the_initial_state() {
    let server = ApiServer::start().await;
    for i in 0..4 {
        server.create(&pod(&format!("p{i}"), &[]));
    }
    let pods: Api<Pod> = Api::all(server.client());
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(pods, watcher::Config::default().streaming_lists()),
    )
    .default_backoff()
    .touched_objects();
    let task = tokio::spawn(async move {
        stream.for_each(|_| futures::future::ready(())).await;
    });
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 4);
    server.create(&pod("p4", &[]));
    converge(&server, &reader).await;
    assert_eq!(server.request_count("list", "pods"), 0);
    task.abort();
}

#[tokio::test]
async fn errors_are_status_objects() {
    let server = ApiServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();
    let s = api_error(pods.get("nope").await);
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "pods \"nope\" not found");
    assert!(pods.get_opt("nope").await.unwrap().is_none());

    pods.create(&pp, &pod("dup", &[])).await.unwrap();
    let s = api_error(pods.create(&pp, &pod("dup", &[])).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));

    let mut generated = pod("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("worker-".into());
    let g = pods.create(&pp, &generated).await.unwrap();
    assert!(g.name_any().starts_with("worker-") && g.name_any().len() == "worker-".len() + 5);
    generated.metadata.generate_name = None;
    assert_eq!(api_error(pods.create(&pp, &generated).await).code, 422);
    assert_eq!(
        api_error(pods.create(&pp, &pod("Upper", &[])).await).code,
        422
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let s = api_error(leases.get("x").await);
    assert_eq!(s.message, "leases.coordination.k8s.io \"x\" not found");

    // Delete: returns the object, honours preconditions, 404 when absent.
    let s = api_error(
        pods.delete(
            "dup",
            &DeleteParams::default().preconditions(kube::api::Preconditions {
                uid: Some("wrong".into()),
                resource_version: None,
            }),
        )
        .await,
    );
    assert_eq!(s.code, 409);
    let deleted = pods.delete("dup", &DeleteParams::default()).await.unwrap();
    assert_eq!(deleted.left().unwrap().name_any(), "dup");
    assert_eq!(
        api_error(pods.delete("dup", &DeleteParams::default()).await).code,
        404
    );

    // Raw requests: unknown paths and bad bodies.
    let raw = |method: &str, path: &str, body: &str| {
        axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
            .unwrap()
    };
    let s = api_error(
        client
            .request::<serde_json::Value>(raw("GET", "/apis/nope.io/v1/things", ""))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    let s = api_error(
        client
            .request::<serde_json::Value>(raw("GET", "/api/v1/namespaces/default/pods/a/b/c", ""))
            .await,
    );
    assert_eq!(s.code, 404);
    let s = api_error(
        client
            .request::<serde_json::Value>(raw("POST", "/api/v1/namespaces/default/pods", "{"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    let s = api_error(
        client
            .request::<serde_json::Value>(raw(
                "POST",
                "/api/v1/namespaces/default/pods/dup/binding",
                "[]",
            ))
            .await,
    );
    assert_eq!(s.code, 400);
    let s = api_error(
        client
            .request::<serde_json::Value>(raw(
                "GET",
                "/api/v1/namespaces/default/leases/x/status",
                "",
            ))
            .await,
    );
    assert_eq!(s.code, 404);
    let s = api_error(
        client
            .request::<serde_json::Value>(raw(
                "GET",
                "/api/v1/namespaces/default/pods?watch=1&resourceVersion=abc",
                "",
            ))
            .await,
    );
    assert_eq!(s.code, 400);

    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));

    // Injected faults on any verb.
    server.fail_next("patch", "pods/status", None, Some("other"), 1, 500);
    pods.patch_status(&g.name_any(), &PatchParams::default(), &json_patch_noop())
        .await
        .unwrap();
    let s = api_error(
        pods.patch_status("other", &PatchParams::default(), &json_patch_noop())
            .await,
    );
    assert_eq!(
        (s.code, s.reason.as_str()),
        (500, "InternalError"),
        "the fault comes before the 404"
    );
    assert_eq!(
        api_error(
            pods.patch_status("other", &PatchParams::default(), &json_patch_noop())
                .await
        )
        .code,
        404
    );
    server.fail_next("get", "pods", Some("default"), None, 1, 500);
    assert_eq!(api_error(pods.get(&g.name_any()).await).code, 500);
    pods.get(&g.name_any()).await.unwrap();
}

#[tokio::test]
async fn typed_helpers_cluster_scoped_resources_and_kubeconfig() {
    let server = ApiServer::start().await;
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"pool": "a100"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}
    }))
    .unwrap();
    let created = server.create(&node);
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created
            .status
            .as_ref()
            .unwrap()
            .allocatable
            .as_ref()
            .unwrap()["nvidia.com/gpu"]
            .0,
        "8"
    );

    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(cfg.default_namespace, "default");
    let client = Client::try_from(cfg).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut w = nodes
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match next_change(&mut w).await {
        WatchEvent::Added(n) => assert_eq!(n.name_any(), "n1"),
        e => panic!("{e:?}"),
    }
    // A node created through the API keeps its status (the kubelet registers it so).
    let n2: Node = serde_json::from_value(
        json!({"metadata": {"name": "n2"}, "status": {"capacity": {"cpu": "4"}}}),
    )
    .unwrap();
    let n2 = nodes.create(&PostParams::default(), &n2).await.unwrap();
    assert!(n2.status.unwrap().capacity.is_some());
    let mut updated = server.get::<Node>(None, "n1").unwrap();
    updated.spec = Some(serde_json::from_value(json!({"unschedulable": true})).unwrap());
    let updated = server.update(&updated);
    assert_eq!(updated.metadata.generation, Some(2));
    match next_change(&mut w).await {
        WatchEvent::Added(n) => assert_eq!(n.name_any(), "n2"),
        e => panic!("{e:?}"),
    }
    match next_change(&mut w).await {
        WatchEvent::Modified(n) => assert_eq!(n.spec.unwrap().unschedulable, Some(true)),
        e => panic!("{e:?}"),
    }
    let cordoned = nodes
        .list(&ListParams::default().fields("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(cordoned.items.len(), 1);
    assert_eq!(server.list::<Node>().len(), 2);
    assert!(server.delete::<Node>(None, "n1").is_some());
    assert!(server.delete::<Node>(None, "n1").is_none());
    match next_change(&mut w).await {
        WatchEvent::Deleted(n) => assert_eq!(n.name_any(), "n1"),
        e => panic!("{e:?}"),
    }
    // Discovery finds the served resources.
    let queue = kube::discovery::pinned_kind(
        &client,
        &kube::core::GroupVersionKind::gvk("kant.io", "v1alpha1", "Queue"),
    )
    .await
    .unwrap();
    assert_eq!(queue.0.plural, "queues");
    assert_eq!(queue.1.scope, kube::discovery::Scope::Cluster);
    assert!(
        queue
            .1
            .subresources
            .iter()
            .any(|(r, _)| r.plural == "queues/status" || r.plural == "status")
    );
    // A namespaced path for a cluster-scoped resource does not exist.
    let req = axum::http::Request::get("/api/v1/namespaces/default/nodes/n2")
        .body(Vec::new())
        .unwrap();
    assert_eq!(api_error(client.request::<Node>(req).await).code, 404);
}

#[test]
fn dedicated_server_reports_its_cpu_time() {
    let server = ApiServer::start_dedicated(2);
    let before = server.cpu_time();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = server.clone();
    rt.block_on(async move {
        let pods: Api<Pod> = Api::default_namespaced(s.client());
        for i in 0..200 {
            pods.create(&PostParams::default(), &pod(&format!("p{i}"), &[]))
                .await
                .unwrap();
        }
        let listed: Vec<Pod> = pods.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(listed.len(), 200);
        let mut w = pods
            .watch(&WatchParams::default(), "0")
            .await
            .unwrap()
            .boxed();
        let mut n = 0;
        while n < 200 {
            if let WatchEvent::Added(_) = next(&mut w).await {
                n += 1;
            }
        }
    });
    let cpu = server.cpu_time();
    assert!(cpu > before, "{cpu:?}");
    assert!(cpu >= Duration::from_micros(100), "{cpu:?}");
    let _ = rt.block_on(async {
        Api::<Pod>::default_namespaced(server.client())
            .list(&ListParams::default())
            .await
            .map(|l| l.items.len())
    });
    assert!(server.cpu_time() >= cpu);
    drop(server);
}

#[tokio::test]
async fn latency_injection_delays_requests() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    pods.list(&ListParams::default()).await.unwrap();
    server.set_latency(Duration::from_millis(100));
    let t = std::time::Instant::now();
    pods.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(100));
    server.set_latency(Duration::ZERO);
    let _ = pods.list(&ListParams::default()).await.unwrap();
    let _: Vec<Pod> = pods
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .try_filter_map(|e| {
            futures::future::ready(Ok(match e {
                WatchEvent::Added(p) => Some(p),
                _ => None,
            }))
        })
        .try_collect()
        .await
        .unwrap();
}

#[tokio::test]
async fn lost_answers_and_silent_requests() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(&server));
    let pp = PostParams::default();
    for name in ["p", "q"] {
        pods.create(&pp, &pod(name, &[])).await.unwrap();
    }
    let node_of = |name: &str| {
        server
            .get::<Pod>(Some("default"), name)
            .and_then(|p| p.spec?.node_name)
    };

    // Never answered, and nothing changes.
    server.hang_next("create", "pods/binding", None, Some("p"), 1);
    let silent = tokio::time::timeout(
        Duration::from_millis(300),
        pods.create_subresource::<_, Status>("binding", "p", &pp, &binding("p", "n1", &[])),
    )
    .await;
    assert!(silent.is_err(), "answered: {silent:?}");
    assert_eq!(node_of("p"), None);
    let last = server.requests().pop().unwrap();
    assert_eq!((last.resource.as_str(), last.code), ("pods/binding", 0));

    // Carried out, then answered with an error: a client retrying gets 409.
    server.lose_next_answers("create", "pods/binding", None, Some("p"), 1, Some(504));
    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "p", &pp, &binding("p", "n1", &[]))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
    assert_eq!(node_of("p").as_deref(), Some("n1"));
    let s = api_error(
        pods.create_subresource::<_, Status>("binding", "p", &pp, &binding("p", "n1", &[]))
            .await,
    );
    assert_eq!(s.code, 409);

    // Carried out and never answered.
    server.lose_next_answers("create", "pods/binding", None, Some("q"), 1, None);
    let silent = tokio::time::timeout(
        Duration::from_millis(300),
        pods.create_subresource::<_, Status>("binding", "q", &pp, &binding("q", "n2", &[])),
    )
    .await;
    assert!(silent.is_err(), "answered: {silent:?}");
    assert_eq!(node_of("q").as_deref(), Some("n2"));
    // The server goes on answering other requests.
    pods.get("q").await.unwrap();
}

#[tokio::test]
async fn paused_watches_hold_events_back_in_order() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    pods.create(&pp, &pod("a", &[])).await.unwrap();
    let rv = server.resource_version().to_string();
    let mut stream = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    server.pause_watches();
    pods.create(&pp, &pod("b", &[])).await.unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    // Writes and reads are current; the watch is behind.
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let held = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(held.is_err(), "delivered while paused: {held:?}");
    server.resume_watches();
    assert_eq!(
        describe(&next_change(&mut stream).await),
        ("ADDED".into(), "b".into())
    );
    assert_eq!(
        describe(&next_change(&mut stream).await),
        ("DELETED".into(), "a".into())
    );
}

/// A smoke test at benchmark scale (run with `--ignored --release`): 5,000 nodes, 10,000
/// pods, a pod watcher and a node watcher, every pod bound over HTTP.
#[test]
#[ignore]
fn benchmark_scale_smoke() {
    let server = ApiServer::start_dedicated(1);
    for i in 0..5_000 {
        server.create(
            &serde_json::from_value::<Node>(json!({"metadata": {"name": format!("node-{i:05}")}}))
                .unwrap(),
        );
    }
    for i in 0..10_000 {
        server.create(&pod(&format!("p{i:05}"), &[("app", "bench")]));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let s = server.clone();
    let t0 = std::time::Instant::now();
    rt.block_on(async move {
        let client = s.client();
        let nodes: Api<Node> = Api::all(client.clone());
        let (nreader, nwriter) = reflector::store();
        let nstream = reflector(nwriter, watcher(nodes, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        tokio::spawn(nstream.for_each(|_| futures::future::ready(())));
        let pods_all: Api<Pod> = Api::all(client.clone());
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(pods_all, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen2 = seen.clone();
        tokio::spawn(stream.for_each(move |_| {
            seen2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            futures::future::ready(())
        }));
        reader.wait_until_ready().await.unwrap();
        nreader.wait_until_ready().await.unwrap();
        println!("initial sync: {:?}", t0.elapsed());
        let pods: Api<Pod> = Api::default_namespaced(client);
        let t1 = std::time::Instant::now();
        let mut tasks = Vec::new();
        for chunk in 0..8 {
            let pods = pods.clone();
            tasks.push(tokio::spawn(async move {
                for i in (chunk..10_000).step_by(8) {
                    let name = format!("p{i:05}");
                    pods.create_subresource::<_, Status>(
                        "binding",
                        &name,
                        &PostParams::default(),
                        &binding(
                            &name,
                            &format!("node-{:05}", i % 5000),
                            &[("kant.io/devices", "0")],
                        ),
                    )
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        println!("10k bindings: {:?}", t1.elapsed());
        let target = 20_000;
        while seen.load(std::sync::atomic::Ordering::Relaxed) < target {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        println!("watch caught up: {:?}", t1.elapsed());
        let t2 = std::time::Instant::now();
        let l = Api::<Node>::all(s.client())
            .list(&ListParams::default())
            .await
            .unwrap();
        assert_eq!(l.items.len(), 5_000);
        println!("list 5000 nodes: {:?}", t2.elapsed());
    });
    println!(
        "server cpu: {:?}, total {:?}",
        server.cpu_time(),
        t0.elapsed()
    );
    assert_eq!(server.bindings().len(), 10_000);
}
