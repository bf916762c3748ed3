//! What `manifests/rbac.yaml` grants the scheduler, and which of the requests it made it
//! does not: every test that runs the scheduler against the in-process API server checks
//! that it asked for nothing its manifests would refuse it on a real cluster.

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kant_testkit::RequestRecord;
use serde_json::Value;

/// The ClusterRole's rules, and the Role's with its namespace.
pub struct Grants {
    pub cluster: Vec<PolicyRule>,
    pub namespace: String,
    pub namespaced: Vec<PolicyRule>,
}

impl Grants {
    /// The grants of `manifests/rbac.yaml`.
    pub fn of_manifests() -> Grants {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/rbac.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("manifests/rbac.yaml does not parse: {e}"));
        let of_kind = |kind: &str| {
            let doc = (docs.iter()).find(|d| d["kind"] == kind);
            doc.unwrap_or_else(|| panic!("manifests/rbac.yaml: no {kind}"))
                .clone()
        };
        let cluster: ClusterRole = serde_json::from_value(of_kind("ClusterRole")).unwrap();
        let role: Role = serde_json::from_value(of_kind("Role")).unwrap();
        Grants {
            cluster: cluster.rules.unwrap_or_default(),
            namespace: role.metadata.namespace.unwrap_or_default(),
            namespaced: role.rules.unwrap_or_default(),
        }
    }

    /// The requests among these that the grants do not allow, as `verb group/resource in
    /// namespace`.
    pub fn refused(&self, requests: &[RequestRecord]) -> BTreeSet<String> {
        (requests.iter())
            .filter(|r| !self.allow(r))
            .map(|r| {
                let ns = r.namespace.as_deref().unwrap_or("(cluster)");
                format!("{} {}/{} in {ns}", r.verb, r.group, r.resource)
            })
            .collect()
    }

    fn allow(&self, request: &RequestRecord) -> bool {
        let group = request.group.as_str();
        let granted = |rules: &[PolicyRule]| {
            (rules.iter()).any(|rule| grants(rule, group, &request.resource, &request.verb))
        };
        granted(&self.cluster)
            || (request.namespace.as_deref() == Some(&self.namespace) && granted(&self.namespaced))
    }
}

/// Whether a rule grants `verb` on `group`/`resource`.
pub fn grants(rule: &PolicyRule, group: &str, resource: &str, verb: &str) -> bool {
    let any = |list: &Option<Vec<String>>, item: &str| {
        list.as_ref()
            .is_some_and(|l| l.iter().any(|x| x == item || x == "*"))
    };
    any(&rule.api_groups, group)
        && any(&rule.resources, resource)
        && (rule.verbs.iter().any(|v| v == verb || v == "*"))
}
