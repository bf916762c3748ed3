//! Object lifecycle semantics shared by the HTTP routes and the typed helpers: create
//! (names, `generateName`, server-owned metadata, status on create, pod defaults), replace,
//! patch (all four patch types), status-subresource writes, delete with preconditions, and
//! generic read-modify-write. All functions run under the store lock.
//!
//! Rules that follow the real server: `uid`, `creationTimestamp`, `resourceVersion`,
//! `generation` are server-owned (the body's values are ignored, but a body or patch naming
//! another `metadata.uid` is refused, 409); `generation` starts at 1 and
//! grows when anything outside `metadata` and `status` changes; a write that changes nothing
//! stores nothing (no new resourceVersion, no event); a body or patch carrying
//! `metadata.resourceVersion` is a precondition (409 Conflict when stale); writes to the main
//! resource of a resource with a status subresource keep the stored status, writes to
//! `/status` change only the status; pod updates may not change the pod spec except
//! container images, `activeDeadlineSeconds`, `terminationGracePeriodSeconds`, additions to
//! `tolerations` and removals from `schedulingGates` (so `spec.nodeName` is set only by a
//! binding). Simplified: `managedFields` are not tracked, server-side apply is a strategic
//! merge of the applied configuration (no field ownership, no conflicts, fields a manager
//! stops applying are not removed), and few defaults are applied (pods: `schedulerName`
//! `default-scheduler`, `restartPolicy` `Always`, `status.phase` `Pending`).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::patch::{self, PatchType};
use crate::resources::{ResourceDef, StatusOnCreate};
use crate::status::ApiError;
use crate::store::{Key, Obj, ResId, Store, meta_mut, meta_str};
use crate::util;

/// Who writes: the HTTP API (all rules) or a typed test helper (status written as given and
/// pod spec immutability not enforced, so tests can set up any state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    Api,
    Direct,
}

/// The main resource or its `status` subresource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Main,
    Status,
}

/// Server-owned metadata fields restored from the stored object on every update.
const SERVER_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "name",
    "namespace",
];

fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(v)
}

/// Parses a JSON object body (400 otherwise).
pub(crate) fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    parse_object(body)
}

/// Checks and sets `apiVersion`/`kind`.
fn check_type_meta(def: &ResourceDef, v: &mut Value) -> Result<(), ApiError> {
    let api_version = def.api_version();
    let Some(m) = v.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    if let Some(av) = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && av != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = m
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        && k != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    m.insert("apiVersion".into(), Value::String(api_version));
    m.insert("kind".into(), Value::String(def.kind.clone()));
    Ok(())
}

/// Checks the body's namespace against the request's and sets it (namespaced) or drops it
/// (cluster-scoped).
fn check_namespace(def: &ResourceDef, v: &mut Value, ns: Option<&str>) -> Result<(), ApiError> {
    let meta = meta_mut(v);
    if def.namespaced {
        let ns = ns.unwrap_or("default");
        let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta.insert("namespace".into(), Value::String(ns.to_string()));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

/// The few defaults the real server's defaulting applies that the scheduler can observe.
fn apply_defaults(def: &ResourceDef, v: &mut Value) {
    if !def.is_pod() {
        return;
    }
    if let Some(m) = v.as_object_mut() {
        let spec = m.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut() {
            if spec
                .get("schedulerName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                spec.insert("schedulerName".into(), json!("default-scheduler"));
            }
            if spec
                .get("restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                spec.insert("restartPolicy".into(), json!("Always"));
            }
        }
        let status = m.entry("status").or_insert_with(|| json!({}));
        if let Some(status) = status.as_object_mut()
            && status
                .get("phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        {
            status.insert("phase".into(), json!("Pending"));
        }
    }
}

/// Creates an object. `ns` is the request's namespace (typed helpers: the object's own, or
/// `default`).
pub(crate) fn create(
    store: &mut Store,
    id: ResId,
    ns: Option<&str>,
    mut v: Value,
    writer: Writer,
) -> Result<Arc<Obj>, ApiError> {
    let def = store.def(id);
    check_type_meta(&def, &mut v)?;
    check_namespace(&def, &mut v, ns)?;
    let ns = meta_str(&v, "namespace").to_string();
    let mut name = meta_str(&v, "name").to_string();
    if name.is_empty() {
        let prefix = meta_str(&v, "generateName").to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &def,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        loop {
            name = format!("{prefix}{}", util::generate_suffix());
            if store.get(id, &store.key(id, Some(&ns), &name)).is_none() {
                break;
            }
        }
    }
    if !util::is_dns_subdomain(&name) {
        return Err(ApiError::invalid(
            &def,
            &name,
            "metadata.name",
            &format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    let key = store.key(id, Some(&ns), &name);
    if store.get(id, &key).is_some() {
        return Err(ApiError::already_exists(&def, &name));
    }
    let meta = meta_mut(&mut v);
    meta.insert("name".into(), Value::String(name));
    meta.insert("uid".into(), Value::String(util::new_uid()));
    meta.insert(
        "creationTimestamp".into(),
        Value::String(util::now_rfc3339()),
    );
    meta.insert("generation".into(), json!(1));
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ] {
        meta.remove(f);
    }
    if writer == Writer::Api
        && let Some(m) = v.as_object_mut()
    {
        match def.status_on_create() {
            StatusOnCreate::Keep => {}
            StatusOnCreate::Drop => {
                m.remove("status");
            }
            StatusOnCreate::PodPending => {
                m.insert("status".into(), json!({"phase": "Pending"}));
            }
            StatusOnCreate::NamespaceActive => {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
        }
    }
    apply_defaults(&def, &mut v);
    Ok(store.commit_put(id, key, v, None))
}

fn rv_precondition(
    def: &ResourceDef,
    name: &str,
    candidate: &Value,
    stored: &Obj,
) -> Result<(), ApiError> {
    let rv = meta_str(candidate, "resourceVersion");
    if !rv.is_empty() && rv != stored.meta_str("resourceVersion") {
        return Err(ApiError::stale(def, name));
    }
    Ok(())
}

/// Whether anything outside `metadata`, `status`, `kind`, `apiVersion` differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let skip = |k: &str| matches!(k, "metadata" | "status" | "kind" | "apiVersion");
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    o.iter().any(|(k, v)| !skip(k) && n.get(k) != Some(v))
        || n.iter().any(|(k, _)| !skip(k) && !o.contains_key(k))
}

/// Pod spec fields an update may change, removed before comparing.
fn mutable_pod_spec_stripped(spec: Option<&Value>) -> Value {
    let mut s = spec.cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = s.as_object_mut() {
        for f in [
            "activeDeadlineSeconds",
            "tolerations",
            "schedulingGates",
            "terminationGracePeriodSeconds",
        ] {
            m.remove(f);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = m.get_mut(list) {
                for c in cs {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
    }
    s
}

fn validate_pod_update(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let (os, ns) = (old.get("spec"), new.get("spec"));
    if mutable_pod_spec_stripped(os) != mutable_pod_spec_stripped(ns) {
        return Err(ApiError::invalid(
            def,
            name,
            "spec",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, \
             `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` \
             (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` \
             (allow it to be set to 1 if it was previously negative)",
        ));
    }
    let list = |s: Option<&Value>, f: &str| -> Vec<Value> {
        s.and_then(|s| s.get(f))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (og, ng) = (list(os, "schedulingGates"), list(ns, "schedulingGates"));
    if let Some(g) = ng.iter().find(|g| !og.contains(g)) {
        return Err(ApiError::invalid(
            def,
            name,
            "spec.schedulingGates",
            &format!("Forbidden: only deletion is allowed, but found new scheduling gate {g}"),
        ));
    }
    let (ot, nt) = (list(os, "tolerations"), list(ns, "tolerations"));
    if ot.iter().any(|t| !nt.contains(t)) {
        return Err(ApiError::invalid(
            def,
            name,
            "spec.tolerations",
            "Forbidden: existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    Ok(())
}

/// Turns a candidate new state into what is stored: status rules for the target, restored
/// server-owned metadata, type meta, defaults, pod update validation, generation.
fn finalize_update(
    def: &ResourceDef,
    old: &Obj,
    cand: Value,
    target: Target,
    writer: Writer,
) -> Result<Value, ApiError> {
    let name = old.meta_str("name").to_string();
    // A body naming another uid is for an object deleted and created again under its
    // name: a precondition, as the real server reads it.
    let uid = meta_str(&cand, "uid");
    let have = old.meta_str("uid");
    if writer == Writer::Api && !uid.is_empty() && uid != have {
        return Err(ApiError::conflict(
            def,
            &def.plural,
            &name,
            &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
        ));
    }
    let mut new = match target {
        Target::Status => {
            let mut v = old.value.clone();
            if let Some(m) = v.as_object_mut() {
                match cand.get("status") {
                    Some(s) if !s.is_null() => {
                        m.insert("status".into(), s.clone());
                    }
                    _ => {
                        m.remove("status");
                    }
                }
            }
            v
        }
        Target::Main => {
            let mut v = cand;
            if !v.is_object() {
                return Err(ApiError::bad_request("the object must be a JSON object"));
            }
            if def.status_subresource
                && writer == Writer::Api
                && let Some(m) = v.as_object_mut()
            {
                match old.value.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.remove("status");
                    }
                }
            }
            v
        }
    };
    if let Some(m) = new.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(def.api_version()));
        m.insert("kind".into(), Value::String(def.kind.clone()));
    }
    let old_meta = old.value.get("metadata").and_then(Value::as_object);
    let meta = meta_mut(&mut new);
    for f in SERVER_META {
        match old_meta.and_then(|m| m.get(*f)) {
            Some(x) => {
                meta.insert((*f).to_string(), x.clone());
            }
            None => {
                meta.remove(*f);
            }
        }
    }
    meta.remove("managedFields");
    meta.remove("selfLink");
    meta.insert(
        "resourceVersion".into(),
        Value::String(old.meta_str("resourceVersion").to_string()),
    );
    if !def.namespaced {
        meta.remove("namespace");
    }
    apply_defaults(def, &mut new);
    if def.is_pod() && writer == Writer::Api && target == Target::Main {
        validate_pod_update(def, &name, &old.value, &new)?;
    }
    let old_gen = old
        .value
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let generation = if spec_changed(&old.value, &new) {
        old_gen + 1
    } else {
        old_gen
    };
    meta_mut(&mut new).insert("generation".into(), json!(generation));
    Ok(new)
}

/// Stores `new` over `old` unless nothing changed (the real server skips no-op writes).
fn store_update(store: &mut Store, id: ResId, key: Key, old: Arc<Obj>, new: Value) -> Arc<Obj> {
    if new == old.value {
        return old;
    }
    store.commit_put(id, key, new, Some(old))
}

/// PUT: replaces the object (or only its status).
pub(crate) fn replace(
    store: &mut Store,
    id: ResId,
    ns: Option<&str>,
    name: &str,
    mut body: Value,
    target: Target,
    writer: Writer,
) -> Result<Arc<Obj>, ApiError> {
    let def = store.def(id);
    check_type_meta(&def, &mut body)?;
    let body_name = meta_str(&body, "name");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(&def, &mut body, ns)?;
    let key = store.key(id, ns, name);
    let old = store
        .get(id, &key)
        .ok_or_else(|| ApiError::not_found(&def, name))?;
    rv_precondition(&def, name, &body, &old)?;
    let new = finalize_update(&def, &old, body, target, writer)?;
    Ok(store_update(store, id, key, old, new))
}

/// PATCH: applies a patch to the object (or only to its status). Returns the result and
/// whether an apply patch created the object.
#[allow(clippy::too_many_arguments)]
pub(crate) fn patch(
    store: &mut Store,
    id: ResId,
    ns: Option<&str>,
    name: &str,
    pt: PatchType,
    body: &[u8],
    target: Target,
    field_manager: Option<&str>,
) -> Result<(Arc<Obj>, bool), ApiError> {
    let def = store.def(id);
    if pt == PatchType::Strategic && def.custom {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json (strategic merge patch is not supported for custom resources)",
        ));
    }
    if pt == PatchType::Apply && field_manager.is_none_or(str::is_empty) {
        return Err(ApiError::invalid(
            &def,
            name,
            "fieldManager",
            "Required value: is required for apply patch",
        ));
    }
    let patch_doc: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(match pt {
            PatchType::Apply => format!(
                "error decoding apply patch (kant-testkit accepts the JSON form of YAML only): {e}"
            ),
            _ => format!("error decoding patch: {e}"),
        })
    })?;
    if pt == PatchType::Apply {
        for field in ["apiVersion", "kind"] {
            if patch_doc
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::bad_request(format!(
                    "invalid object: {field} must be set in an apply patch"
                )));
            }
        }
        let mut probe = patch_doc.clone();
        check_type_meta(&def, &mut probe)?;
        let body_name = meta_str(&patch_doc, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
    }
    let key = store.key(id, ns, name);
    let Some(old) = store.get(id, &key) else {
        if pt == PatchType::Apply && target == Target::Main {
            let mut v = patch_doc;
            meta_mut(&mut v).insert("name".into(), Value::String(name.to_string()));
            return create(store, id, ns, v, Writer::Api).map(|o| (o, true));
        }
        return Err(ApiError::not_found(&def, name));
    };
    let mut cand = old.value.clone();
    let invalid = |e: String| ApiError::with_code(422, e);
    match pt {
        PatchType::Merge => {
            if !patch_doc.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            patch::merge_patch(&mut cand, &patch_doc);
        }
        PatchType::Strategic | PatchType::Apply => {
            patch::strategic_merge(&mut cand, &patch_doc).map_err(invalid)?;
        }
        PatchType::Json => patch::json_patch(&mut cand, &patch_doc).map_err(invalid)?,
    }
    rv_precondition(&def, name, &cand, &old)?;
    let new = finalize_update(&def, &old, cand, target, Writer::Api)?;
    Ok((store_update(store, id, key, old, new), false))
}

/// Checks `DeleteOptions.preconditions` (`uid`, `resourceVersion`) against the stored object.
pub(crate) fn check_preconditions(
    def: &ResourceDef,
    name: &str,
    pre: Option<&Value>,
    obj: &Obj,
) -> Result<(), ApiError> {
    let Some(pre) = pre else { return Ok(()) };
    if let Some(uid) = pre.get("uid").and_then(Value::as_str) {
        let have = obj.meta_str("uid");
        if uid != have {
            return Err(ApiError::conflict(
                def,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                ),
            ));
        }
    }
    if let Some(rv) = pre.get("resourceVersion").and_then(Value::as_str) {
        let have = obj.meta_str("resourceVersion");
        if rv != have {
            return Err(ApiError::conflict(
                def,
                &def.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                ),
            ));
        }
    }
    Ok(())
}

/// DELETE: removes the object at once (no graceful termination, no finalizers).
pub(crate) fn delete(
    store: &mut Store,
    id: ResId,
    ns: Option<&str>,
    name: &str,
    options: Option<&Value>,
) -> Result<Arc<Obj>, ApiError> {
    let def = store.def(id);
    let key = store.key(id, ns, name);
    let old = store
        .get(id, &key)
        .ok_or_else(|| ApiError::not_found(&def, name))?;
    check_preconditions(
        &def,
        name,
        options.and_then(|o| o.get("preconditions")),
        &old,
    )?;
    store
        .commit_delete(id, &key)
        .ok_or_else(|| ApiError::not_found(&def, name))
}

/// Read-modify-write of one object by a server-side rule (binding, test helpers). `f` may
/// refuse with an error; a change that changes nothing stores nothing.
pub(crate) fn update_with(
    store: &mut Store,
    id: ResId,
    key: Key,
    f: impl FnOnce(&Obj, &mut Value) -> Result<(), ApiError>,
) -> Result<Arc<Obj>, ApiError> {
    let def = store.def(id);
    let old = store
        .get(id, &key)
        .ok_or_else(|| ApiError::not_found(&def, &key.1))?;
    let mut v = old.value.clone();
    f(&old, &mut v)?;
    Ok(store_update(store, id, key, old, v))
}

/// The status map of an object, created when absent.
pub(crate) fn status_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    let Value::Object(m) = v else {
        unreachable!("just made an object")
    };
    let s = m.entry("status").or_insert_with(|| json!({}));
    if !s.is_object() {
        *s = json!({});
    }
    match s {
        Value::Object(s) => s,
        _ => unreachable!("just made an object"),
    }
}
