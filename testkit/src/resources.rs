//! The resource table: which group/version/plural the server answers for, with each
//! resource's kind, scope and status subresource, and the per-resource rules that follow
//! from them (what happens to `status` on create, the qualified name used in error messages).

/// One served resource, as its CRD or built-in registration would describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group; `""` for the core group (`/api/v1`).
    pub group: String,
    /// API version, e.g. `v1` or `v1alpha1`.
    pub version: String,
    /// Lower-case plural, the URL path segment, e.g. `pods`.
    pub plural: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Namespaced (`true`) or cluster-scoped (`false`).
    pub namespaced: bool,
    /// Whether the resource has a `status` subresource (then writes to the main resource keep
    /// the stored status, and writes to `/status` change nothing but the status).
    pub status_subresource: bool,
    /// A custom resource (CRD): strategic-merge patches are refused with 415, as the real
    /// server does for custom resources.
    pub custom: bool,
}

impl ResourceDef {
    /// A custom resource definition (`custom: true`).
    pub fn custom(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            kind: kind.to_string(),
            namespaced,
            status_subresource,
            custom: true,
        }
    }

    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        Self {
            custom: false,
            ..Self::custom(group, version, plural, kind, namespaced, status_subresource)
        }
    }

    /// `apiVersion` as objects carry it: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified resource name used in error messages: `pods`, `leases.coordination.k8s.io`.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn is_pod(&self) -> bool {
        self.group.is_empty() && self.plural == "pods"
    }

    /// What a create through the API does to the body's `status`.
    pub(crate) fn status_on_create(&self) -> StatusOnCreate {
        if self.is_pod() {
            StatusOnCreate::PodPending
        } else if self.group.is_empty() && self.plural == "namespaces" {
            StatusOnCreate::NamespaceActive
        } else if self.status_subresource && !(self.group.is_empty() && self.plural == "nodes") {
            StatusOnCreate::Drop
        } else {
            StatusOnCreate::Keep
        }
    }
}

/// See [`ResourceDef::status_on_create`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusOnCreate {
    /// Nodes (the kubelet registers them with a status) and resources without a status subresource.
    Keep,
    /// Pods: status reset to `{"phase": "Pending"}` (podStrategy.PrepareForCreate).
    PodPending,
    /// Namespaces: status reset to `{"phase": "Active"}`.
    NamespaceActive,
    /// Everything else with a status subresource (PDBs, CRDs): status dropped.
    Drop,
}

/// The resources every server starts with.
pub(crate) fn builtin() -> Vec<ResourceDef> {
    vec![
        ResourceDef::builtin("", "v1", "pods", "Pod", true, true),
        ResourceDef::builtin("", "v1", "nodes", "Node", false, true),
        ResourceDef::builtin("", "v1", "events", "Event", true, false),
        ResourceDef::builtin("", "v1", "namespaces", "Namespace", false, true),
        ResourceDef::builtin("events.k8s.io", "v1", "events", "Event", true, false),
        ResourceDef::builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            true,
        ),
        ResourceDef::builtin("coordination.k8s.io", "v1", "leases", "Lease", true, false),
        ResourceDef::builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            true,
        ),
        ResourceDef::builtin(
            "",
            "v1",
            "persistentvolumes",
            "PersistentVolume",
            false,
            true,
        ),
        ResourceDef::builtin(
            "storage.k8s.io",
            "v1",
            "storageclasses",
            "StorageClass",
            false,
            false,
        ),
        ResourceDef::custom(
            "scheduling.x-k8s.io",
            "v1alpha1",
            "podgroups",
            "PodGroup",
            true,
            true,
        ),
        ResourceDef::custom("kant.io", "v1alpha1", "queues", "Queue", false, true),
    ]
}
