//! Patch application: JSON merge patch (RFC 7386), strategic merge patch (merge patch plus
//! element-wise merging of lists that have a known merge key, and the `$patch` directives),
//! server-side apply (approximated by the strategic merge, see below) and JSON patch
//! (RFC 6902).
//!
//! Strategic merge keys are looked up by the path of field names from the object root (list
//! levels do not add a segment), from the Kubernetes types' `patchMergeKey` tags:
//! `metadata.ownerReferences` by `uid`, `metadata.finalizers` as a set, `status.conditions`
//! and `status.addresses` by `type`, `status.podIPs`/`hostIPs` by `ip`,
//! `spec.{containers,initContainers,ephemeralContainers}` by `name` (their `ports` by
//! `containerPort`, `env` by `name`, `volumeMounts` by `mountPath`, `volumeDevices` by
//! `devicePath`, `resizePolicy` by `resourceName`), `spec.volumes`, `spec.imagePullSecrets`,
//! `spec.resourceClaims`, `spec.schedulingGates` by `name`, `spec.hostAliases` by `ip`,
//! `spec.topologySpreadConstraints` by `topologyKey`, `spec.podCIDRs` as a set. Every other
//! list (`spec.tolerations`, `spec.taints`, `status.containerStatuses`, ...) is replaced.
//! Supported directives: `$patch: replace|delete` on maps and list elements,
//! `$retainKeys`, `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is ignored
//! (merged elements keep their order, new ones are appended).

use serde_json::{Map, Value};

/// The patch types, from the request's `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Strategic,
    Apply,
    Json,
}

impl PatchType {
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            "application/json-patch+json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListStrategy {
    Replace,
    MergeKey(&'static str),
    Set,
}

fn list_strategy(path: &[String]) -> ListStrategy {
    use ListStrategy::*;
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["metadata", "ownerReferences"] => MergeKey("uid"),
        ["metadata", "finalizers"] => Set,
        ["status", "conditions"] | ["status", "addresses"] => MergeKey("type"),
        ["status", "podIPs"] | ["status", "hostIPs"] => MergeKey("ip"),
        [
            "spec",
            "containers" | "initContainers" | "ephemeralContainers",
        ] => MergeKey("name"),
        [
            "spec",
            "containers" | "initContainers" | "ephemeralContainers",
            field,
        ] => match *field {
            "ports" => MergeKey("containerPort"),
            "env" => MergeKey("name"),
            "volumeMounts" => MergeKey("mountPath"),
            "volumeDevices" => MergeKey("devicePath"),
            "resizePolicy" => MergeKey("resourceName"),
            _ => Replace,
        },
        [
            "spec",
            "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates",
        ] => MergeKey("name"),
        ["spec", "hostAliases"] => MergeKey("ip"),
        ["spec", "topologySpreadConstraints"] => MergeKey("topologyKey"),
        ["spec", "podCIDRs"] => Set,
        _ => Replace,
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

/// A patch subtree as it lands where the target has nothing: directives and nulls removed.
fn cleaned(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), cleaned(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| directive(e).is_none())
                .map(cleaned)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Strategic merge patch. Errors become 422 (as the real server's patch errors do).
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(p) = patch else {
        return Err("strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    match target {
        Value::Object(t) => smp_map(t, p, &mut path),
        _ => Ok(()),
    }
}

fn smp_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            if let Value::Object(m) = cleaned(&Value::Object(patch.clone())) {
                *target = m;
            }
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type: {other:?}")),
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        target.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k.as_str())));
    }
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        path.push(k.clone());
        match pv {
            Value::Null => {
                target.remove(k);
            }
            Value::Object(pm) => {
                if directive(pv) == Some("delete") {
                    target.remove(k);
                } else {
                    let entry = target
                        .entry(k.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !entry.is_object() {
                        *entry = Value::Object(Map::new());
                    }
                    if let Value::Object(tm) = entry {
                        smp_map(tm, pm, path)?;
                    }
                }
            }
            Value::Array(pl) => {
                let strategy = list_strategy(path);
                match (strategy, target.get_mut(k)) {
                    (ListStrategy::MergeKey(key), Some(Value::Array(tl))) => {
                        merge_keyed(tl, pl, key, path)?;
                    }
                    (ListStrategy::Set, Some(Value::Array(tl))) => {
                        for v in pl {
                            if !tl.contains(v) {
                                tl.push(v.clone());
                            }
                        }
                    }
                    (ListStrategy::MergeKey(key), _) => {
                        for e in pl {
                            if e.is_object() && e.get(key).is_none() && directive(e).is_none() {
                                return Err(format!(
                                    "map: {e} does not contain declared merge key: {key}"
                                ));
                            }
                        }
                        target.insert(k.clone(), cleaned(pv));
                    }
                    _ => {
                        target.insert(k.clone(), cleaned(pv));
                    }
                }
            }
            scalar => {
                target.insert(k.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    // Deletions from primitive lists apply after the merge, so they win.
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(tl)), Some(del)) = (target.get_mut(field), pv.as_array())
        {
            tl.retain(|x| !del.contains(x));
        }
    }
    Ok(())
}

fn merge_keyed(
    tl: &mut Vec<Value>,
    pl: &[Value],
    key: &str,
    path: &mut Vec<String>,
) -> Result<(), String> {
    if pl.iter().any(|e| directive(e) == Some("replace")) {
        *tl = pl
            .iter()
            .filter(|e| directive(e).is_none())
            .map(cleaned)
            .collect();
        return Ok(());
    }
    for pe in pl {
        let Value::Object(pm) = pe else {
            return Err(format!(
                "expected a map in a list merged by {key:?}, found {pe}"
            ));
        };
        let Some(kv) = pm.get(key) else {
            return Err(format!(
                "map: {pe} does not contain declared merge key: {key}"
            ));
        };
        let pos = tl.iter().position(|te| te.get(key) == Some(kv));
        if directive(pe) == Some("delete") {
            if let Some(i) = pos {
                tl.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => {
                if !tl[i].is_object() {
                    tl[i] = Value::Object(Map::new());
                }
                if let Value::Object(tm) = &mut tl[i] {
                    smp_map(tm, pm, path)?;
                }
            }
            None => tl.push(cleaned(pe)),
        }
    }
    Ok(())
}

fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer {p:?}"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn pointer_get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn pointer_get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get_mut(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(move |i| a.get_mut(i)),
        _ => None,
    })
}

fn jp_add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let tokens = parse_pointer(path)?;
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match pointer_get_mut(doc, parent) {
        Some(Value::Object(m)) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            match last.parse::<usize>() {
                Ok(i) if i <= a.len() => {
                    a.insert(i, value);
                    Ok(())
                }
                _ => Err(format!(
                    "add operation: index {last:?} out of bounds at {path:?}"
                )),
            }
        }
        _ => Err(format!(
            "add operation does not apply: doc is missing path: {path:?}"
        )),
    }
}

fn jp_remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let tokens = parse_pointer(path)?;
    let Some((last, parent)) = tokens.split_last() else {
        return Err("remove operation cannot remove the whole document".into());
    };
    let missing = || format!("remove operation does not apply: doc is missing path: {path:?}");
    match pointer_get_mut(doc, parent) {
        Some(Value::Object(m)) => m.remove(last).ok_or_else(missing),
        Some(Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// RFC 6902 JSON patch (`add`, `remove`, `replace`, `move`, `copy`, `test`).
pub(crate) fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let Some(ops) = ops.as_array() else {
        return Err("a JSON patch must be an array of operations".into());
    };
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("operation {op} has no \"path\""))?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("operation {op} has no \"value\""))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("operation {op} has no \"from\""))
        };
        match name {
            "add" => jp_add(doc, path, value()?)?,
            "remove" => {
                jp_remove(doc, path)?;
            }
            "replace" => {
                let v = value()?;
                let tokens = parse_pointer(path)?;
                match pointer_get_mut(doc, &tokens) {
                    Some(slot) => *slot = v,
                    None => {
                        return Err(format!(
                            "replace operation does not apply: doc is missing key: {path:?}"
                        ));
                    }
                }
            }
            "move" => {
                let v = jp_remove(doc, from()?)?;
                jp_add(doc, path, v)?;
            }
            "copy" => {
                let tokens = parse_pointer(from()?)?;
                let v = pointer_get(doc, &tokens).cloned().ok_or_else(|| {
                    format!("copy operation does not apply: doc is missing from path: {path:?}")
                })?;
                jp_add(doc, path, v)?;
            }
            "test" => {
                let tokens = parse_pointer(path)?;
                let v = value()?;
                if pointer_get(doc, &tokens) != Some(&v) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            other => return Err(format!("unexpected kind: {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(
            &mut t,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": null, "y": 1}}),
        );
        assert_eq!(
            t,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"y": 1}})
        );
    }

    #[test]
    fn strategic_conditions_merge_by_type() {
        let mut pod = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            {"type": "Ready", "status": "False"}
        ]}, "spec": {"tolerations": [{"key": "a"}]}});
        strategic_merge(
            &mut pod,
            &json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "reason": null},
            {"type": "Initialized", "status": "True"}
        ]}, "spec": {"tolerations": [{"key": "b"}]}}),
        )
        .unwrap();
        assert_eq!(
            pod["status"]["conditions"],
            json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False"},
                {"type": "Initialized", "status": "True"}
            ])
        );
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "b"}]));
    }

    #[test]
    fn strategic_directives() {
        let mut o = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1"}, {"uid": "2"}]},
            "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}]}});
        strategic_merge(
            &mut o,
            &json!({"metadata": {"finalizers": ["b", "a"],
            "ownerReferences": [{"uid": "1", "$patch": "delete"}],
            "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}],
                     "$setElementOrder/containers": [{"name": "c"}]}}),
        )
        .unwrap();
        assert_eq!(o["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(o["metadata"]["ownerReferences"], json!([{"uid": "2"}]));
        assert_eq!(o["spec"]["containers"][0]["image"], "x");
        assert_eq!(
            o["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert!(
            strategic_merge(
                &mut o,
                &json!({"status": {"conditions": [{"status": "x"}]}})
            )
            .is_err()
        );
        strategic_merge(&mut o, &json!({"spec": {"$patch": "replace", "x": 1}})).unwrap();
        assert_eq!(o["spec"], json!({"x": 1}));
    }

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"a": {"b": [1, 2]}, "c": "x"});
        json_patch(
            &mut d,
            &json!([
                {"op": "test", "path": "/c", "value": "x"},
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "add", "path": "/a/b/0", "value": 0},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/e~1f"},
                {"op": "remove", "path": "/a/b/1"}
            ]),
        )
        .unwrap();
        assert_eq!(d, json!({"a": {"b": [0, 2, 3]}, "c": "y", "e/f": "y"}));
        assert!(json_patch(&mut d, &json!([{"op": "test", "path": "/c", "value": "z"}])).is_err());
        assert!(json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(
            json_patch(
                &mut d,
                &json!([{"op": "replace", "path": "/nope", "value": 1}])
            )
            .is_err()
        );
    }
}
