//! Pod-specific rules: `pods/binding` (the scheduler's bind, with the real server's checks
//! and effects), `pods/eviction` (the Eviction API, with PodDisruptionBudgets evaluated like
//! the disruption controller would), graceful deletion, plus the phase helper for tests.
//!
//! Deletion follows the pod strategy: a pod bound to a node and not finished is not removed
//! by a DELETE or an eviction but marked terminating (`deletionTimestamp` set to now plus its
//! grace period: `gracePeriodSeconds` of the delete options, else its
//! `terminationGracePeriodSeconds`, else 30), and stays until its kubelet is done with it
//! ([`finish_termination`], which the server calls in the kubelet's place, see
//! `ApiServer::set_termination_delay`); an unbound or finished pod, or a grace period of 0,
//! is removed at once. A pod already terminating keeps its deadline (the real server may
//! shorten it) unless deleted with a grace period of 0. A terminating pod cannot be bound. An
//! eviction first marks the pod with the `DisruptionTarget` condition, as the real one does.
//!
//! Simplifications: PodDisruptionBudget status is not maintained; the budget is computed from
//! the live pods at each eviction: healthy = matching pods in phase `Running` (the real rule
//! is "Ready"), expected = number of matching pods (the real controller uses the owning
//! controllers' scale for percentages and `maxUnavailable`; a test can declare that count
//! by setting the PDB's `status.expectedPods`, which is then used instead); the PDB's
//! `observedGeneration`, `unhealthyPodEvictionPolicy` and `disruptedPods` are not consulted.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::ops;
use crate::resources::ResourceDef;
use crate::selectors::{label_selector_matches, labels_of};
use crate::status::ApiError;
use crate::store::{Key, Obj, ResId, Store, meta_mut, meta_str};
use crate::util;

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `POST pods/{name}/binding`. On success the pod has `spec.nodeName`, the binding's
/// annotations and `PodScheduled=True`, and the binding is recorded.
pub(crate) fn bind(
    store: &mut Store,
    pods: ResId,
    ns: &str,
    name: &str,
    binding: &Value,
) -> Result<(), ApiError> {
    let def = store.def(pods);
    if meta_str(binding, "name") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let target_kind = str_at(binding, &["target", "kind"]);
    if !target_kind.is_empty() && target_kind != "Node" {
        return Err(invalid_binding(
            name,
            "target.kind",
            "Invalid value: must be empty or 'Node'",
        ));
    }
    let node = str_at(binding, &["target", "name"]).to_string();
    if node.is_empty() {
        return Err(invalid_binding(name, "target.name", "Required value"));
    }
    let uid = meta_str(binding, "uid").to_string();
    let rv = meta_str(binding, "resourceVersion").to_string();
    let annotations = binding
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let key = store.key(pods, Some(ns), name);
    let node_for_pod = node.clone();
    ops::update_with(store, pods, key, |old, pod| {
        if !uid.is_empty() && uid != old.meta_str("uid") {
            return Err(ApiError::conflict(
                &def,
                "pods",
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old.meta_str("uid")
                ),
            ));
        }
        if !rv.is_empty() && rv != old.meta_str("resourceVersion") {
            return Err(ApiError::stale(&def, name));
        }
        if !old.meta_str("deletionTimestamp").is_empty() {
            return Err(ApiError::conflict(
                &def,
                "pods/binding",
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        let assigned = str_at(pod, &["spec", "nodeName"]);
        if !assigned.is_empty() {
            return Err(ApiError::conflict(
                &def,
                "pods/binding",
                name,
                &format!("pod {name} is already assigned to node {assigned:?}"),
            ));
        }
        let gated = pod
            .get("spec")
            .and_then(|s| s.get("schedulingGates"))
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        if gated {
            return Err(ApiError::conflict(
                &def,
                "pods/binding",
                name,
                &format!("pod {name} has non-empty .spec.schedulingGates"),
            ));
        }
        if let Some(m) = pod.as_object_mut() {
            let spec = m.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("nodeName".into(), Value::String(node_for_pod));
            }
        }
        if !annotations.is_empty() {
            let meta = meta_mut(pod);
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            if !ann.is_object() {
                *ann = json!({});
            }
            if let Some(ann) = ann.as_object_mut() {
                ann.extend(annotations);
            }
        }
        set_condition(pod, "PodScheduled", "True", "", "");
        Ok(())
    })?;
    store
        .bindings
        .push((ns.to_string(), name.to_string(), node));
    Ok(())
}

fn invalid_binding(name: &str, field: &str, what: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("Binding \"{name}\" is invalid: {field}: {what}"),
    )
}

/// `podutil.UpdatePodCondition`: replaces the condition of that type (an empty reason or
/// message is left out), keeping `lastTransitionTime` when the status is unchanged.
pub(crate) fn set_condition(pod: &mut Value, ty: &str, status: &str, reason: &str, message: &str) {
    let now = util::now_rfc3339();
    let st = ops::status_mut(pod);
    let conds = st.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(conds) = conds.as_array_mut() else {
        return;
    };
    let mut cond =
        json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    for (field, text) in [("reason", reason), ("message", message)] {
        if !text.is_empty() {
            cond[field] = json!(text);
        }
    }
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
    {
        Some(old) => {
            if old.get("status").and_then(Value::as_str) == Some(status)
                && let Some(t) = old.get("lastTransitionTime")
            {
                cond["lastTransitionTime"] = t.clone();
            }
            *old = cond;
        }
        None => conds.push(cond),
    }
}

fn phase(pod: &Value) -> &str {
    str_at(pod, &["status", "phase"])
}

/// An `IntOrString` scaled against `total`, rounding up (`GetScaledValueFromIntOrPercent`).
fn scaled(v: &Value, total: i64) -> Result<i64, ApiError> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| ApiError::internal(format!("invalid int or percent value {v}"))),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => {
                let p: i64 = p
                    .parse()
                    .map_err(|_| ApiError::internal(format!("invalid value for IntOrString: invalid value {s:?}")))?;
                Ok((p * total + 99) / 100)
            }
            None => s
                .parse()
                .map_err(|_| ApiError::internal(format!("invalid value for IntOrString: invalid type: string is not a percentage ({s:?})"))),
        },
        _ => Err(ApiError::internal(format!("invalid int or percent value {v}"))),
    }
}

/// `POST pods/{name}/eviction`: the disruption budget is consulted first, then the delete
/// options' preconditions, as the real server orders them.
pub(crate) fn evict(
    store: &mut Store,
    pods: ResId,
    pdbs: Option<ResId>,
    ns: &str,
    name: &str,
    eviction: &Value,
) -> Result<Deletion, ApiError> {
    if meta_str(eviction, "name") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let (def, key, pod) = existing(store, pods, ns, name)?;
    let options = eviction.get("deleteOptions");
    let can_ignore_pdb = matches!(phase(&pod.value), "Succeeded" | "Failed" | "Pending")
        || !pod.meta_str("deletionTimestamp").is_empty();
    if !can_ignore_pdb && let Some(pdb_id) = pdbs {
        let pod_labels = labels_of(&pod.value);
        let budgets: Vec<_> = store
            .res(pdb_id)
            .iter_ns(Some(ns))
            .filter(|b| {
                label_selector_matches(
                    b.value.get("spec").and_then(|s| s.get("selector")),
                    pod_labels,
                )
            })
            .cloned()
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = budgets.first() {
            let selector = pdb.value.get("spec").and_then(|s| s.get("selector"));
            let (mut expected, mut healthy) = (0i64, 0i64);
            for p in store.res(pods).iter_ns(Some(ns)) {
                if label_selector_matches(selector, labels_of(&p.value)) {
                    expected += 1;
                    if phase(&p.value) == "Running" && p.meta_str("deletionTimestamp").is_empty() {
                        healthy += 1;
                    }
                }
            }
            // The real controller takes the expected count from the owners' scale and
            // publishes it as status.expectedPods; a test may set that to stand in for it.
            if let Some(declared) = pdb
                .value
                .get("status")
                .and_then(|s| s.get("expectedPods"))
                .and_then(Value::as_i64)
                .filter(|e| *e > 0)
            {
                expected = declared;
            }
            let spec = pdb.value.get("spec");
            let desired = if let Some(max) = spec
                .and_then(|s| s.get("maxUnavailable"))
                .filter(|v| !v.is_null())
            {
                (expected - scaled(max, expected)?).max(0)
            } else if let Some(min) = spec
                .and_then(|s| s.get("minAvailable"))
                .filter(|v| !v.is_null())
            {
                scaled(min, expected)?
            } else {
                0
            };
            if healthy - desired < 1 {
                let pdb_name = pdb.meta_str("name");
                return Err(ApiError::new(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )
                .with_details(json!({"causes": [{
                    "reason": "DisruptionBudget",
                    "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently"),
                }]})));
            }
        }
    }
    ops::check_preconditions(&def, name, preconditions(options), &pod)?;
    let marked = ops::update_with(store, pods, key.clone(), |_, pod| {
        let (reason, message) = ("EvictionByEvictionAPI", "Eviction API: evicting");
        set_condition(pod, "DisruptionTarget", "True", reason, message);
        Ok(())
    })?;
    let grace = grace_period(&marked.value, options);
    remove_or_terminate(store, pods, key, &marked, grace)
}

/// What a pod's deletion did.
pub(crate) enum Deletion {
    /// Removed: its last state.
    Gone(Arc<Obj>),
    /// Marked terminating (or already so): its state now.
    Terminating(Arc<Obj>),
}

impl Deletion {
    pub(crate) fn object(&self) -> &Arc<Obj> {
        match self {
            Deletion::Gone(obj) | Deletion::Terminating(obj) => obj,
        }
    }
}

/// What `terminationGracePeriodSeconds` defaults to.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The pod, its resource's definition and its key; 404 when absent.
fn existing(
    store: &Store,
    pods: ResId,
    ns: &str,
    name: &str,
) -> Result<(Arc<ResourceDef>, Key, Arc<Obj>), ApiError> {
    let def = store.def(pods);
    let key = store.key(pods, Some(ns), name);
    let pod = store
        .get(pods, &key)
        .ok_or_else(|| ApiError::not_found(&def, name))?;
    Ok((def, key, pod))
}

fn preconditions(options: Option<&Value>) -> Option<&Value> {
    options.and_then(|o| o.get("preconditions"))
}

/// The grace period a deletion gives the pod (`CheckGracefulDelete`): 0 for a pod not bound
/// to a node or finished.
fn grace_period(pod: &Value, options: Option<&Value>) -> i64 {
    let unbound = str_at(pod, &["spec", "nodeName"]).is_empty();
    if unbound || matches!(phase(pod), "Succeeded" | "Failed") {
        return 0;
    }
    let asked = options
        .and_then(|o| o.get("gracePeriodSeconds"))
        .or_else(|| pod.get("spec")?.get("terminationGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    // A negative period is taken as the shortest graceful one.
    if asked < 0 { 1 } else { asked }
}

/// `DELETE pods/{name}` (see the module docs).
pub(crate) fn delete(
    store: &mut Store,
    pods: ResId,
    ns: &str,
    name: &str,
    options: Option<&Value>,
) -> Result<Deletion, ApiError> {
    let (def, key, pod) = existing(store, pods, ns, name)?;
    ops::check_preconditions(&def, name, preconditions(options), &pod)?;
    remove_or_terminate(store, pods, key, &pod, grace_period(&pod.value, options))
}

/// Removes the pod (a grace period of 0) or marks it terminating.
fn remove_or_terminate(
    store: &mut Store,
    pods: ResId,
    key: Key,
    pod: &Arc<Obj>,
    grace: i64,
) -> Result<Deletion, ApiError> {
    if grace == 0 {
        let gone = store.commit_delete(pods, &key);
        return Ok(Deletion::Gone(gone.unwrap_or_else(|| pod.clone())));
    }
    if !pod.meta_str("deletionTimestamp").is_empty() {
        return Ok(Deletion::Terminating(pod.clone()));
    }
    let marked = ops::update_with(store, pods, key, |_, pod| {
        let meta = meta_mut(pod);
        let deadline = util::rfc3339_after(grace.unsigned_abs());
        meta.insert("deletionTimestamp".into(), json!(deadline));
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
        // The deletion changes what the pod is for: its generation grows, as the real
        // server's first graceful deletion does.
        let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
        if generation > 0 {
            meta.insert("generation".into(), json!(generation + 1));
        }
        Ok(())
    })?;
    Ok(Deletion::Terminating(marked))
}

/// The kubelet's part once a terminating pod's containers have stopped: the pod is removed,
/// if it is still the one that started terminating (`uid`).
pub(crate) fn finish_termination(store: &mut Store, pods: ResId, key: &Key, uid: &str) {
    let terminating = store.get(pods, key).is_some_and(|pod| {
        pod.meta_str("uid") == uid && !pod.meta_str("deletionTimestamp").is_empty()
    });
    if terminating {
        store.commit_delete(pods, key);
    }
}

/// Test helper: sets `status.phase`.
pub(crate) fn set_phase(
    store: &mut Store,
    pods: ResId,
    ns: &str,
    name: &str,
    phase: &str,
) -> Result<(), ApiError> {
    let key = store.key(pods, Some(ns), name);
    ops::update_with(store, pods, key, |_, pod| {
        ops::status_mut(pod).insert("phase".into(), Value::String(phase.to_string()));
        Ok(())
    })
    .map(|_| ())
}
