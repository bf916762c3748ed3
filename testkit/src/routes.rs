//! HTTP routing: parses request paths the way the real server lays them out
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, `namespaces/{ns}/...`, subresources),
//! resolves the verb (get, list, watch, create, update, patch, delete, deletecollection),
//! applies injected latency and faults (a refusal, a lost answer, or none at all), records
//! every request, and calls the verb handlers.
//! Also answers `/version`, `/healthz`, and the discovery documents (`/api`, `/apis`,
//! `/api/v1`, `/apis/{group}/{version}`) from the resource table.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use crate::handle::Shared;
use crate::ops::{self, Target, Writer};
use crate::patch::PatchType;
use crate::pods;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::status::{ApiError, json_response, success_status};
use crate::store::{Obj, ResId};
use crate::util::lock;
use crate::watch::{self, WatchSpec};

/// Request bodies larger than this are refused.
const MAX_BODY: usize = 64 << 20;

/// Default `timeoutSeconds` of a watch that sets none (the real server picks 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The one axum handler: every path comes here.
pub(crate) async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let latency = shared.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::bad_request(format!("reading the request body: {e}")).into_response();
        }
    };
    let binding = parts.method == Method::POST && parts.uri.path().ends_with("/binding");
    if let Some(delay) = binding.then(|| shared.take_late_binding()).flatten() {
        // Carried out later; the client hears nothing.
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            dispatch(&shared, &parts.method, &parts.uri, &parts.headers, &body);
        });
        return std::future::pending().await;
    }
    let response = dispatch(&shared, &parts.method, &parts.uri, &parts.headers, &body);
    if response.extensions().get::<Unanswered>().is_some() {
        // The connection stays open and silent until the client gives up.
        std::future::pending::<()>().await;
    }
    response
}

/// Marks a response that is never sent (an injected fault without an answer).
#[derive(Clone, Copy)]
struct Unanswered;

/// Decoded query parameters.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(q: Option<&str>) -> Self {
        Self(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

enum PathKind<'a> {
    Version,
    Health,
    ApiVersions,
    ApiGroups,
    ResourceList {
        group: &'a str,
        version: &'a str,
    },
    Resource {
        group: &'a str,
        version: &'a str,
        ns: Option<&'a str>,
        plural: &'a str,
        name: Option<&'a str>,
        sub: Option<&'a str>,
    },
}

fn parse_path(path: &str) -> Option<PathKind<'_>> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Some(PathKind::Version),
        ["healthz" | "readyz" | "livez"] => return Some(PathKind::Health),
        ["api"] => return Some(PathKind::ApiVersions),
        ["apis"] => return Some(PathKind::ApiGroups),
        ["api", v] => {
            return Some(PathKind::ResourceList {
                group: "",
                version: v,
            });
        }
        ["apis", g, v] => {
            return Some(PathKind::ResourceList {
                group: g,
                version: v,
            });
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (ns, plural, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] => (Some(*ns), *plural, tail),
        [plural, tail @ ..] => (None, *plural, tail),
        [] => return None,
    };
    if tail.len() > 2 {
        return None;
    }
    Some(PathKind::Resource {
        group,
        version,
        ns,
        plural,
        name: tail.first().copied(),
        sub: tail.get(1).copied(),
    })
}

/// Everything a verb handler needs.
struct Ctx<'a> {
    shared: &'a Arc<Shared>,
    id: ResId,
    def: Arc<ResourceDef>,
    ns: Option<String>,
    name: String,
    query: &'a Query,
    headers: &'a HeaderMap,
    body: &'a Bytes,
}

fn dispatch(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let query = Query::parse(uri.query());
    let Some(path) = parse_path(uri.path()) else {
        return ApiError::path_not_found().into_response();
    };
    let (group, version, ns, plural, name, sub) = match path {
        PathKind::Version => return version_response(),
        PathKind::Health => return (StatusCode::OK, "ok").into_response(),
        PathKind::ApiVersions => return api_versions(shared, headers),
        PathKind::ApiGroups => return api_groups(shared),
        PathKind::ResourceList { group, version } => return resource_list(shared, group, version),
        PathKind::Resource {
            group,
            version,
            ns,
            plural,
            name,
            sub,
        } => (group, version, ns, plural, name, sub),
    };

    // `POST /api/v1/namespaces/{ns}/bindings`: the Binding resource itself.
    if group.is_empty() && plural == "bindings" && name.is_none() && ns.is_some() {
        if method != Method::POST {
            return ApiError::method_not_allowed(method.as_str()).into_response();
        }
        let parsed = ops::parse_body(body);
        let pod = parsed
            .as_ref()
            .map(|b| crate::store::meta_str(b, "name").to_string())
            .unwrap_or_default();
        return run(
            shared,
            group,
            "create",
            "pods/binding",
            ns,
            Some(&pod),
            || {
                let binding = parsed.clone()?;
                binding_handler(shared, ns.unwrap_or(""), &pod, &binding)
            },
        );
    }

    let found = {
        let store = lock(&shared.store);
        store
            .lookup(group, version, plural)
            .map(|id| (id, store.def(id)))
    };
    let Some((id, def)) = found else {
        return ApiError::path_not_found().into_response();
    };
    if (def.namespaced && ns.is_none() && name.is_some()) || (!def.namespaced && ns.is_some()) {
        return ApiError::path_not_found().into_response();
    }
    let resource = match sub {
        Some(s) => format!("{}/{s}", def.plural),
        None => def.plural.clone(),
    };
    let verb = match (method.clone(), name, sub) {
        (Method::GET, None, None) if query.flag("watch") => "watch",
        (Method::GET, None, None) => "list",
        (Method::POST, None, None) if ns.is_some() || !def.namespaced => "create",
        (Method::DELETE, None, None) if ns.is_some() || !def.namespaced => "deletecollection",
        (Method::GET, Some(_), _) => "get",
        (Method::PUT, Some(_), _) => "update",
        (Method::PATCH, Some(_), _) => "patch",
        (Method::DELETE, Some(_), None) => "delete",
        (Method::POST, Some(_), Some(_)) => "create",
        _ => return ApiError::method_not_allowed(method.as_str()).into_response(),
    };
    let subresource_ok = match sub {
        None => true,
        Some("status") => def.status_subresource && matches!(verb, "get" | "update" | "patch"),
        Some("binding" | "eviction") => def.is_pod() && verb == "create",
        Some(_) => false,
    };
    if !subresource_ok {
        return ApiError::path_not_found().into_response();
    }
    let ctx = Ctx {
        shared,
        id,
        def,
        ns: ns.map(str::to_string),
        name: name.unwrap_or("").to_string(),
        query: &query,
        headers,
        body,
    };
    run(shared, group, verb, &resource, ns, name, || {
        match (verb, sub) {
            ("watch", _) => watch_handler(&ctx),
            ("list", _) => list_handler(&ctx),
            ("create", None) => create_handler(&ctx),
            ("deletecollection", _) => delete_collection_handler(&ctx),
            ("get", _) => get_handler(&ctx),
            ("update", sub) => update_handler(&ctx, target(sub)),
            ("patch", sub) => patch_handler(&ctx, target(sub)),
            ("delete", _) => delete_handler(&ctx),
            ("create", Some("binding")) => {
                let binding = ops::parse_body(body)?;
                binding_handler(shared, ns.unwrap_or(""), &ctx.name, &binding)
            }
            ("create", Some("eviction")) => eviction_handler(&ctx),
            _ => Err(ApiError::path_not_found()),
        }
    })
}

fn target(sub: Option<&str>) -> Target {
    if sub == Some("status") {
        Target::Status
    } else {
        Target::Main
    }
}

/// Applies an injected fault or runs the handler, then records the request (code 0 when it
/// is never answered).
fn run(
    shared: &Arc<Shared>,
    group: &str,
    verb: &str,
    resource: &str,
    ns: Option<&str>,
    name: Option<&str>,
    f: impl FnOnce() -> Result<Response, ApiError>,
) -> Response {
    let resp = match shared.take_fault(verb, resource, ns, name) {
        None => f().unwrap_or_else(IntoResponse::into_response),
        Some(fault) => {
            if fault.applied {
                let _ = f();
            }
            match fault.error {
                Some(e) => e.into_response(),
                None => {
                    shared.record(group, verb, resource, ns, name, 0);
                    let mut silent = Response::default();
                    silent.extensions_mut().insert(Unanswered);
                    return silent;
                }
            }
        }
    };
    shared.record(group, verb, resource, ns, name, resp.status().as_u16());
    resp
}

fn object_response(code: StatusCode, obj: &Obj) -> Response {
    json_response(code, obj.json.clone())
}

fn selectors(ctx: &Ctx) -> Result<Selectors, ApiError> {
    let labels = LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(&ctx.def, ctx.query.get("fieldSelector").unwrap_or(""))
        .map_err(|e| {
            ApiError::bad_request(format!("\"{e}\": unknown field selector or invalid value"))
        })?;
    Ok(Selectors { labels, fields })
}

/// resourceVersion as a number: `None` for unset, empty or "0".
fn parse_rv(q: &Query) -> Result<Option<u64>, ApiError> {
    match q.get("resourceVersion") {
        None | Some("") | Some("0") => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
    }
}

/// A list's `resourceVersion`, `resourceVersionMatch` and `continue` checked together, as
/// the real server's list options validation and storage check them: a `continue` token
/// carries its own resourceVersion, so it takes no match and no resourceVersion but "0".
fn check_list_versions(ctx: &Ctx) -> Result<(), ApiError> {
    let nonempty = |k: &str| ctx.query.get(k).filter(|v| !v.is_empty());
    let (rv, continued) = (nonempty("resourceVersion"), nonempty("continue").is_some());
    let forbidden = |why: &str| {
        ApiError::invalid(
            &ctx.def,
            "",
            "resourceVersionMatch",
            &format!("Forbidden: {why}"),
        )
    };
    match nonempty("resourceVersionMatch") {
        None => {}
        Some(matching @ ("NotOlderThan" | "Exact")) => {
            if rv.is_none() {
                return Err(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continued {
                return Err(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching == "Exact" && rv == Some("0") {
                return Err(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid resourceVersionMatch: {other:?}"
            )));
        }
    }
    if continued && rv.is_some_and(|rv| rv != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    parse_rv(ctx.query).map(|_| ())
}

fn list_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    let sel = selectors(ctx)?;
    check_list_versions(ctx)?;
    let limit = match ctx.query.get("limit") {
        None | Some("") => None,
        Some(s) => Some(
            s.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {s:?}")))?,
        ),
    }
    .filter(|l| *l > 0);
    if let Some(token) = ctx.query.get("continue").filter(|t| !t.is_empty()) {
        let (sid, offset) = parse_token(token).ok_or_else(|| {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion",
            )
        })?;
        let snap = lock(&ctx.shared.store).snapshot(sid);
        let Some((rv, items)) = snap else {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            ));
        };
        return Ok(page(&ctx.def, &items, offset, limit, rv, sid));
    }
    let mut store = lock(&ctx.shared.store);
    let rv = store.rv;
    let items: Vec<Arc<Obj>> = store
        .res(ctx.id)
        .iter_ns(ctx.ns.as_deref())
        .filter(|o| sel.is_empty() || sel.matches(&o.value))
        .cloned()
        .collect();
    match limit {
        Some(l) if items.len() > l => {
            let items = Arc::new(items);
            let sid = store.save_snapshot(items.clone());
            drop(store);
            Ok(page(&ctx.def, &items, 0, Some(l), rv, sid))
        }
        _ => {
            drop(store);
            Ok(list_response(&ctx.def, &items, rv, None))
        }
    }
}

fn parse_token(t: &str) -> Option<(u64, usize)> {
    let mut it = t.split('-');
    let _rv: u64 = it.next()?.parse().ok()?;
    let sid = it.next()?.parse().ok()?;
    let offset = it.next()?.parse().ok()?;
    it.next().is_none().then_some((sid, offset))
}

fn page(
    def: &ResourceDef,
    items: &[Arc<Obj>],
    offset: usize,
    limit: Option<usize>,
    rv: u64,
    sid: u64,
) -> Response {
    let start = offset.min(items.len());
    let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
    let cont = (end < items.len()).then(|| (format!("{rv}-{sid}-{end}"), items.len() - end));
    list_response(def, &items[start..end], rv, cont)
}

fn list_response(
    def: &ResourceDef,
    items: &[Arc<Obj>],
    rv: u64,
    cont: Option<(String, usize)>,
) -> Response {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some((token, remaining)) = cont {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(remaining);
    }
    let head = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        def.kind,
        def.api_version()
    );
    let size: usize = items.iter().map(|o| o.json.len() + 1).sum();
    let mut b = BytesMut::with_capacity(head.len() + size + 2);
    b.put_slice(head.as_bytes());
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            b.put_u8(b',');
        }
        b.put_slice(&o.json);
    }
    b.put_slice(b"]}");
    json_response(StatusCode::OK, b.freeze())
}

fn watch_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    let sel = selectors(ctx)?;
    let from = parse_rv(ctx.query)?;
    let timeout = match ctx.query.get("timeoutSeconds") {
        None | Some("") => DEFAULT_WATCH_TIMEOUT,
        Some(s) => Duration::from_secs(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {s:?}")))?,
        ),
    };
    Ok(watch::start(
        ctx.shared,
        WatchSpec {
            id: ctx.id,
            ns: ctx.ns.clone(),
            selectors: sel,
            from,
            bookmarks: ctx.query.flag("allowWatchBookmarks"),
            send_initial_events: ctx.query.flag("sendInitialEvents"),
            timeout,
        },
    ))
}

fn reject_dry_run(ctx: &Ctx) -> Result<(), ApiError> {
    if ctx.query.get("dryRun").is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by kant-testkit",
        ));
    }
    Ok(())
}

fn create_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    reject_dry_run(ctx)?;
    let body = ops::parse_body(ctx.body)?;
    let mut store = lock(&ctx.shared.store);
    let obj = ops::create(&mut store, ctx.id, ctx.ns.as_deref(), body, Writer::Api)?;
    drop(store);
    Ok(object_response(StatusCode::CREATED, &obj))
}

fn get_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    let store = lock(&ctx.shared.store);
    let key = store.key(ctx.id, ctx.ns.as_deref(), &ctx.name);
    let obj = store
        .get(ctx.id, &key)
        .ok_or_else(|| ApiError::not_found(&ctx.def, &ctx.name))?;
    drop(store);
    Ok(object_response(StatusCode::OK, &obj))
}

fn update_handler(ctx: &Ctx, target: Target) -> Result<Response, ApiError> {
    reject_dry_run(ctx)?;
    let body = ops::parse_body(ctx.body)?;
    let mut store = lock(&ctx.shared.store);
    let obj = ops::replace(
        &mut store,
        ctx.id,
        ctx.ns.as_deref(),
        &ctx.name,
        body,
        target,
        Writer::Api,
    )?;
    drop(store);
    Ok(object_response(StatusCode::OK, &obj))
}

fn patch_handler(ctx: &Ctx, target: Target) -> Result<Response, ApiError> {
    reject_dry_run(ctx)?;
    let ct = ctx
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let pt =
        PatchType::from_content_type(ct).ok_or_else(|| ApiError::unsupported_media_type(ct))?;
    let mut store = lock(&ctx.shared.store);
    let (obj, created) = ops::patch(
        &mut store,
        ctx.id,
        ctx.ns.as_deref(),
        &ctx.name,
        pt,
        ctx.body,
        target,
        ctx.query.get("fieldManager"),
    )?;
    drop(store);
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(object_response(code, &obj))
}

fn delete_options(body: &Bytes) -> Result<Option<Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    ops::parse_body(body).map(Some)
}

fn delete_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    reject_dry_run(ctx)?;
    let options = delete_options(ctx.body)?;
    let ns = ctx.ns.as_deref();
    let mut store = lock(&ctx.shared.store);
    if !ctx.def.is_pod() {
        let obj = ops::delete(&mut store, ctx.id, ns, &ctx.name, options.as_ref())?;
        drop(store);
        return Ok(object_response(StatusCode::OK, &obj));
    }
    let deletion = pods::delete(
        &mut store,
        ctx.id,
        ns.unwrap_or(""),
        &ctx.name,
        options.as_ref(),
    )?;
    drop(store);
    ctx.shared.kubelet_finishes(ctx.id, &deletion);
    Ok(object_response(StatusCode::OK, deletion.object()))
}

fn delete_collection_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    reject_dry_run(ctx)?;
    let sel = selectors(ctx)?;
    let mut store = lock(&ctx.shared.store);
    let keys: Vec<_> = store
        .res(ctx.id)
        .iter_ns(ctx.ns.as_deref())
        .filter(|o| sel.is_empty() || sel.matches(&o.value))
        .map(|o| {
            (
                o.meta_str("namespace").to_string(),
                o.meta_str("name").to_string(),
            )
        })
        .collect();
    let mut deleted = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(o) = store.commit_delete(ctx.id, &k) {
            deleted.push(o);
        }
    }
    let rv = store.rv;
    drop(store);
    Ok(list_response(&ctx.def, &deleted, rv, None))
}

fn binding_handler(
    shared: &Arc<Shared>,
    ns: &str,
    pod: &str,
    binding: &Value,
) -> Result<Response, ApiError> {
    let mut store = lock(&shared.store);
    let pods_id = store
        .lookup("", "v1", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    pods::bind(&mut store, pods_id, ns, pod, binding)?;
    drop(store);
    Ok(success(201))
}

fn eviction_handler(ctx: &Ctx) -> Result<Response, ApiError> {
    let eviction = ops::parse_body(ctx.body)?;
    let mut store = lock(&ctx.shared.store);
    let pdbs = store.lookup("policy", "v1", "poddisruptionbudgets");
    let deletion = pods::evict(
        &mut store,
        ctx.id,
        pdbs,
        ctx.ns.as_deref().unwrap_or(""),
        &ctx.name,
        &eviction,
    )?;
    drop(store);
    ctx.shared.kubelet_finishes(ctx.id, &deletion);
    Ok(success(201))
}

fn success(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    json_response(status, Bytes::from(success_status(code).to_string()))
}

fn version_response() -> Response {
    let v = json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0-kant-testkit",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    });
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}

fn api_versions(shared: &Arc<Shared>, headers: &HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| shared.addr_string());
    let v = json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    });
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}

fn api_groups(shared: &Arc<Shared>) -> Response {
    let defs = lock(&shared.store).defs();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for d in defs.iter().filter(|d| !d.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == d.group) {
            Some((_, vs)) => {
                if !vs.contains(&d.version) {
                    vs.push(d.version.clone());
                }
            }
            None => groups.push((d.group.clone(), vec![d.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    let v = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups});
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}

fn resource_list(shared: &Arc<Shared>, group: &str, version: &str) -> Response {
    let defs = lock(&shared.store).defs();
    let mut resources = Vec::new();
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        resources.push(json!({
            "name": d.plural,
            "singularName": d.kind.to_lowercase(),
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        }));
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.is_pod() {
            resources.push(json!({"name": "pods/binding", "singularName": "", "namespaced": true, "kind": "Binding", "verbs": ["create"]}));
            resources.push(json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}));
        }
    }
    if resources.is_empty() {
        return ApiError::path_not_found().into_response();
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let v = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources});
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}
