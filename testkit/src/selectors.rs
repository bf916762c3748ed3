//! Label and field selectors: parsing the query-string forms (`labelSelector`,
//! `fieldSelector`) with the real server's grammar, matching them against stored objects,
//! and matching a structured `metav1.LabelSelector` (PodDisruptionBudget `spec.selector`).

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::resources::ResourceDef;

#[derive(Clone, Debug, PartialEq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

#[derive(Clone, Debug, PartialEq)]
struct LabelReq {
    key: String,
    op: LabelOp,
}

/// A parsed `labelSelector`: every requirement must hold (comma = AND).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LabelSelector {
    reqs: Vec<LabelReq>,
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn check_value(v: &str) -> Result<String, String> {
    if v.len() > 63 || !v.chars().all(is_value_char) {
        return Err(format!("invalid label value: {v:?}"));
    }
    Ok(v.to_string())
}

/// Splits at commas outside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected '(' values ')', found {rest:?}"))?;
    inner
        .split(',')
        .map(|v| check_value(v.trim()))
        .collect::<Result<Vec<_>, _>>()
}

impl LabelSelector {
    /// Parses the string form (`a=b,c!=d,e in (x,y),!f,g`); errors are the messages of a 400.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for term in split_top_level(s)? {
            let term = term.trim();
            if term.is_empty() {
                return Err(format!("unable to parse requirement: empty term in {s:?}"));
            }
            if let Some(key) = term.strip_prefix('!') {
                let key = key.trim();
                if key.is_empty() || !key.chars().all(is_key_char) {
                    return Err(format!("invalid label key: {key:?}"));
                }
                reqs.push(LabelReq {
                    key: key.to_string(),
                    op: LabelOp::NotExists,
                });
                continue;
            }
            let end = term.find(|c: char| !is_key_char(c)).unwrap_or(term.len());
            let key = &term[..end];
            if key.is_empty() {
                return Err(format!("unable to parse requirement: {term:?}"));
            }
            let rest = term[end..].trim_start();
            let op = if rest.is_empty() {
                LabelOp::Exists
            } else if let Some(v) = rest.strip_prefix("!=") {
                LabelOp::NotEq(check_value(v.trim())?)
            } else if let Some(v) = rest.strip_prefix("==") {
                LabelOp::Eq(check_value(v.trim())?)
            } else if let Some(v) = rest.strip_prefix('=') {
                LabelOp::Eq(check_value(v.trim())?)
            } else if let Some(v) = rest.strip_prefix('>') {
                LabelOp::Gt(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("invalid number {v:?}"))?,
                )
            } else if let Some(v) = rest.strip_prefix('<') {
                LabelOp::Lt(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("invalid number {v:?}"))?,
                )
            } else if let Some(v) = rest.strip_prefix("notin") {
                LabelOp::NotIn(parse_set(v)?)
            } else if let Some(v) = rest.strip_prefix("in") {
                LabelOp::In(parse_set(v)?)
            } else {
                return Err(format!("unable to parse requirement: {term:?}"));
            };
            reqs.push(LabelReq {
                key: key.to_string(),
                op,
            });
        }
        Ok(Self { reqs })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether an object with these labels is selected.
    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.reqs.iter().all(|r| {
            let v = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match &r.op {
                LabelOp::Eq(x) => v == Some(x.as_str()),
                LabelOp::NotEq(x) => v != Some(x.as_str()),
                LabelOp::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                LabelOp::NotIn(xs) => !v.is_some_and(|v| xs.iter().any(|x| x == v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
                LabelOp::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                LabelOp::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            }
        })
    }
}

/// How a supported field reads when the object lacks it.
#[derive(Clone, Copy, Debug)]
enum Missing {
    Empty,
    False,
}

/// The object path behind a field label, or `None` where the resource does not support it
/// (the real server answers 400 `field label not supported`).
fn field_path(def: &ResourceDef, field: &str) -> Option<(&'static [&'static str], Missing)> {
    use Missing::*;
    let p: (&'static [&'static str], Missing) = match field {
        "metadata.name" => (&["metadata", "name"], Empty),
        "metadata.namespace" => (&["metadata", "namespace"], Empty),
        _ => match (def.group.as_str(), def.plural.as_str(), field) {
            ("", "pods", "spec.nodeName") => (&["spec", "nodeName"], Empty),
            ("", "pods", "spec.schedulerName") => (&["spec", "schedulerName"], Empty),
            ("", "pods", "spec.restartPolicy") => (&["spec", "restartPolicy"], Empty),
            ("", "pods", "spec.serviceAccountName") => (&["spec", "serviceAccountName"], Empty),
            ("", "pods", "spec.hostNetwork") => (&["spec", "hostNetwork"], False),
            ("", "pods", "status.phase") => (&["status", "phase"], Empty),
            ("", "pods", "status.podIP") => (&["status", "podIP"], Empty),
            ("", "pods", "status.nominatedNodeName") => (&["status", "nominatedNodeName"], Empty),
            ("", "nodes", "spec.unschedulable") => (&["spec", "unschedulable"], False),
            ("", "namespaces", "status.phase") => (&["status", "phase"], Empty),
            ("", "events", "involvedObject.kind") => (&["involvedObject", "kind"], Empty),
            ("", "events", "involvedObject.namespace") => (&["involvedObject", "namespace"], Empty),
            ("", "events", "involvedObject.name") => (&["involvedObject", "name"], Empty),
            ("", "events", "involvedObject.uid") => (&["involvedObject", "uid"], Empty),
            ("", "events", "involvedObject.apiVersion") => {
                (&["involvedObject", "apiVersion"], Empty)
            }
            ("", "events", "involvedObject.fieldPath") => (&["involvedObject", "fieldPath"], Empty),
            ("", "events", "reason") => (&["reason"], Empty),
            ("", "events", "type") => (&["type"], Empty),
            ("", "events", "reportingComponent") => (&["reportingComponent"], Empty),
            ("events.k8s.io", "events", "regarding.kind") => (&["regarding", "kind"], Empty),
            ("events.k8s.io", "events", "regarding.namespace") => {
                (&["regarding", "namespace"], Empty)
            }
            ("events.k8s.io", "events", "regarding.name") => (&["regarding", "name"], Empty),
            ("events.k8s.io", "events", "regarding.uid") => (&["regarding", "uid"], Empty),
            ("events.k8s.io", "events", "reason") => (&["reason"], Empty),
            ("events.k8s.io", "events", "type") => (&["type"], Empty),
            ("events.k8s.io", "events", "reportingController") => (&["reportingController"], Empty),
            _ => return None,
        },
    };
    Some(p)
}

fn field_value<'a>(obj: &'a Value, path: &[&str], missing: Missing) -> Cow<'a, str> {
    let mut v = obj;
    for k in path {
        match v.get(*k) {
            Some(x) => v = x,
            None => {
                return Cow::Borrowed(match missing {
                    Missing::Empty => "",
                    Missing::False => "false",
                });
            }
        }
    }
    match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Value::Number(n) => Cow::Owned(n.to_string()),
        _ => Cow::Borrowed(match missing {
            Missing::Empty => "",
            Missing::False => "false",
        }),
    }
}

#[derive(Clone, Debug)]
struct FieldReq {
    path: &'static [&'static str],
    missing: Missing,
    value: String,
    equal: bool,
}

/// A parsed `fieldSelector` for one resource.
#[derive(Clone, Debug, Default)]
pub(crate) struct FieldSelector {
    reqs: Vec<FieldReq>,
}

/// Splits at unescaped commas and unescapes `\,`, `\=`, `\\`.
fn split_escaped(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the first unescaped occurrence of `pat`.
fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if s[i..].starts_with(pat) {
            return Some(i);
        }
        i += 1;
    }
    None
}

impl FieldSelector {
    /// Parses `a=b,c!=d,e==f` for resource `def`; unknown fields are an error.
    pub(crate) fn parse(def: &ResourceDef, s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for term in split_escaped(s) {
            let term = term.trim().to_string();
            let (field, value, equal) = if let Some(i) = find_unescaped(&term, "!=") {
                (&term[..i], &term[i + 2..], false)
            } else if let Some(i) = find_unescaped(&term, "==") {
                (&term[..i], &term[i + 2..], true)
            } else if let Some(i) = find_unescaped(&term, "=") {
                (&term[..i], &term[i + 1..], true)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            let (path, missing) = field_path(def, field)
                .ok_or_else(|| format!("field label not supported: {field}"))?;
            reqs.push(FieldReq {
                path,
                missing,
                value: unescape(value.trim()),
                equal,
            });
        }
        Ok(Self { reqs })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.reqs
            .iter()
            .all(|r| (field_value(obj, r.path, r.missing) == r.value.as_str()) == r.equal)
    }
}

/// Both selectors of a list or watch request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(labels_of(obj))) && self.fields.matches(obj)
    }
}

/// `metadata.labels` of an object.
pub(crate) fn labels_of(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.get("labels")?.as_object()
}

/// Matches a structured `metav1.LabelSelector`. A missing/null selector selects nothing and
/// an empty one everything (the policy/v1 PodDisruptionBudget rule). An unknown operator
/// selects nothing.
pub(crate) fn label_selector_matches(
    selector: Option<&Value>,
    labels: Option<&Map<String, Value>>,
) -> bool {
    let Some(sel) = selector.filter(|s| s.is_object()) else {
        return false;
    };
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            if get(k) != v.as_str() {
                return false;
            }
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let v = get(key);
            let ok = match e.get("operator").and_then(Value::as_str) {
                Some("In") => v.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => !v.is_some_and(|v| values.contains(&v)),
                Some("Exists") => v.is_some(),
                Some("DoesNotExist") => v.is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn label_grammar() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5"}));
        let m = |s: &str| LabelSelector::parse(s).map(|sel| sel.matches(Some(&l)));
        assert_eq!(m("app=web"), Ok(true));
        assert_eq!(m("app==web,tier=front"), Ok(true));
        assert_eq!(m("app!=web"), Ok(false));
        assert_eq!(m("missing!=x"), Ok(true));
        assert_eq!(m("app"), Ok(true));
        assert_eq!(m("!app"), Ok(false));
        assert_eq!(m("!missing"), Ok(true));
        assert_eq!(m("app in (db, web)"), Ok(true));
        assert_eq!(m("app notin (web)"), Ok(false));
        assert_eq!(m("missing notin (web)"), Ok(true));
        assert_eq!(m("tier in (back),app=web"), Ok(false));
        assert_eq!(m("n>4,n<6"), Ok(true));
        assert_eq!(m(""), Ok(true));
        assert!(m("app in web").is_err());
        assert!(m("app=we b").is_err());
        assert!(m("a,,b").is_err());
        assert!(m("app in (x").is_err());
    }

    #[test]
    fn field_grammar() {
        let pods = crate::resources::builtin().remove(0);
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let m = |s: &str| FieldSelector::parse(&pods, s).map(|f| f.matches(&pod));
        assert_eq!(m("spec.nodeName=n1").ok(), Some(true));
        assert_eq!(m("spec.nodeName!=").ok(), Some(true));
        assert_eq!(m("spec.nodeName==n2").ok(), Some(false));
        assert_eq!(
            m("status.phase=Running,metadata.namespace=ns").ok(),
            Some(true)
        );
        assert_eq!(m("spec.schedulerName=").ok(), Some(true));
        assert_eq!(m("spec.hostNetwork=false").ok(), Some(true));
        assert_eq!(
            m("spec.bogus=1").err(),
            Some("field label not supported: spec.bogus".to_string())
        );
    }

    #[test]
    fn structured_selector() {
        let l = labels(json!({"app": "web"}));
        assert!(!label_selector_matches(None, Some(&l)));
        assert!(label_selector_matches(Some(&json!({})), Some(&l)));
        assert!(label_selector_matches(
            Some(&json!({"matchLabels": {"app": "web"}})),
            Some(&l)
        ));
        assert!(!label_selector_matches(
            Some(&json!({"matchLabels": {"app": "db"}})),
            Some(&l)
        ));
        let e = json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}, {"key": "x", "operator": "DoesNotExist"}]});
        assert!(label_selector_matches(Some(&e), Some(&l)));
    }
}
