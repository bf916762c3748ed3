//! An in-process Kubernetes API server for Kant's tests and benchmarks.
//!
//! [`ApiServer::start`] runs it on the test's Tokio runtime at `http://127.0.0.1:PORT`; the
//! real `kube::Client` ([`ApiServer::client`]) talks to it over plain HTTP, so watchers,
//! reflectors, bindings, status patches, events, evictions and leases go through exactly the
//! code paths they take against a real cluster. [`ApiServer::start_dedicated`] runs it on its
//! own runtime so a benchmark can measure its CPU time apart ([`ApiServer::cpu_time`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube::Error> {
//! use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
//! use kube::api::{Api, ObjectMeta, PostParams};
//! let server = kant_testkit::ApiServer::start().await;
//! let pods: Api<Pod> = Api::namespaced(server.client(), "default");
//! # let pod = Pod::default();
//! server.create(&pod); // typed setup without HTTP, same watch events
//! let binding = Binding {
//!     metadata: ObjectMeta { name: Some("p".into()), ..Default::default() },
//!     target: ObjectReference { kind: Some("Node".into()), name: Some("n1".into()), ..Default::default() },
//! };
//! let _: kube::core::Status = pods
//!     .create_subresource("binding", "p", &PostParams::default(), &binding)
//!     .await?;
//! assert_eq!(server.bindings(), vec![("default".into(), "p".into(), "n1".into())]);
//! # Ok(()) }
//! ```
//!
//! # Client calls that work as against a real server
//!
//! - **Binding**: `Api::<Pod>::namespaced(c, ns).create_subresource::<Binding, kube::core::Status>("binding", pod, &PostParams::default(), &binding)`
//!   with `binding.metadata.name == pod` (optionally `metadata.uid` as a precondition and
//!   `metadata.annotations`, which are copied onto the pod) and `target.kind = "Node"`,
//!   `target.name = node`. The answer is a `Status` (`status: Success`, code 201), as from the
//!   real server; asking for `T = Binding` fails to decode, against either. Errors: 404 (no
//!   pod), 409 Conflict (already assigned, non-empty `schedulingGates`, stale uid), 400 (name
//!   mismatch). `POST /api/v1/namespaces/{ns}/bindings` is served too.
//! - **Status**: `Api::<Pod>::patch_status(name, &PatchParams::default(), &Patch::Strategic(json!({"status": {"conditions": [..]}})))`
//!   (conditions merge by `type`) or `Patch::Merge` (replaces the whole `conditions` list).
//!   For the CRDs (PodGroup, Queue) use `Patch::Merge` or `Patch::Apply`: a strategic merge
//!   patch on a custom resource is refused with 415, as by the real server. Only `status` of
//!   the patch result is kept; put `metadata.resourceVersion` in the patch for optimistic
//!   concurrency (409 when stale).
//! - **Events**: `kube::runtime::events::Recorder::new(client, reporter).publish(&event, &object_ref)`
//!   (events.k8s.io/v1; create, then merge patch for repeats), or plain
//!   `Api::<k8s_openapi::api::core::v1::Event>` / `Api::<k8s_openapi::api::events::v1::Event>` creates.
//! - **Eviction**: `Api::<Pod>::namespaced(c, ns).evict(name, &EvictParams::default())` → `Status`
//!   (201); the pod gets the `DisruptionTarget` condition, then is deleted as a DELETE would. A disruption-budget refusal is 429 `TooManyRequests`, which kube's default client
//!   retries by itself up to 15 times with exponential backoff (minutes in all), exactly as it
//!   would against a real server: a caller that wants to see the 429 at once builds its client
//!   from a `kube::Config` with `default_retry = false`.
//! - **Leases**: `kube-lease-manager` 0.13 works unchanged (get, create, strategic merge and
//!   apply patches on coordination.k8s.io/v1 leases).
//! - **Watches**: `kube::runtime::watcher` with the default config (paginated list at
//!   resourceVersion 0, then watch with bookmarks) or `Config::streaming_lists()`.
//!
//! # Semantics and simplifications relative to kube-apiserver
//!
//! Matched: one global resourceVersion (etcd revision) over all resources, bumped by every
//! write (deletes included) and never by a no-op write; server-owned `uid`,
//! `creationTimestamp` (RFC 3339), `resourceVersion`, `generation` (grows when anything
//! outside metadata and status changes); `generateName`; Status error bodies and codes;
//! status-subresource rules (main-resource writes keep the stored status, `/status` writes
//! change only the status; status dropped on create, pods reset to `Pending`); pod spec
//! immutability (only a binding sets `spec.nodeName`); graceful deletion of pods (a pod
//! bound to a node and not finished gets `deletionTimestamp` and stays until its kubelet,
//! played by the server after [`ApiServer::set_termination_delay`], removes it; a
//! terminating pod cannot be bound); watches that miss nothing, with
//! selector transitions sent as ADDED/DELETED, bookmarks, `timeoutSeconds`, and a 410
//! `Expired` ERROR event for a too-old resourceVersion; paginated lists over a consistent
//! snapshot, 410 for a `continue` token older than a compaction.
//!
//! Simplified (each also noted where implemented):
//! - **Deletion** is immediate for everything but pods (see above; `deletecollection`
//!   removes pods at once too): no finalizers or garbage collection; DELETE answers 200 with
//!   the object for every resource (the real server answers a Status for some).
//!   `propagationPolicy` is ignored, `gracePeriodSeconds` counts for pods only (a terminating
//!   pod is removed after the termination delay, whatever its grace period);
//!   `preconditions` (uid, resourceVersion) are honoured.
//! - **Server-side apply** is a strategic merge of the applied object (JSON bodies only; no
//!   `managedFields`, no field ownership or apply conflicts; `force` ignored; fields a
//!   manager stops applying are not removed). `fieldManager` is required for apply, as real.
//! - **Strategic merge** knows the merge keys of the common core types (see the `patch`
//!   module); other lists are replaced. `$setElementOrder` is ignored.
//! - **Lists**: `resourceVersion`/`resourceVersionMatch` are validated but every list is
//!   served at the current revision; `limit` is honoured for every resourceVersion (the
//!   real server may ignore it for resourceVersion 0); a `continue` page reuses the first
//!   page's selectors; the last 64 paginated lists are kept for their tokens. List items
//!   carry `kind`/`apiVersion` (the real server omits them for built-in types; harmless).
//! - **Watches**: a resourceVersion newer than the current one is served as current (the
//!   real server waits for it); default `timeoutSeconds` 1800. History is bounded per
//!   resource ([`DEFAULT_HISTORY_LIMIT`] events) and [`ApiServer::compact`] drops it.
//! - **Field selectors**: `metadata.name`, `metadata.namespace` everywhere; pods:
//!   `spec.nodeName`, `spec.schedulerName`, `spec.restartPolicy`, `spec.serviceAccountName`,
//!   `spec.hostNetwork`, `status.phase`, `status.podIP`, `status.nominatedNodeName`; nodes:
//!   `spec.unschedulable`; events: `involvedObject.*`/`regarding.*`, `reason`, `type`, ...;
//!   anything else is 400 `field label not supported`.
//! - **Defaults**: only pod `spec.schedulerName` (`default-scheduler`), `spec.restartPolicy`
//!   (`Always`) and `status.phase` (`Pending`); namespaces get `status.phase: Active`.
//!   Names must be DNS subdomains; no other validation or admission (namespaces need not
//!   exist, a binding's node need not exist, no quota, no priority admission).
//! - **Eviction**: PDB status is not maintained; budgets are computed live with Running
//!   standing in for Ready, and the number of matching pods as the expected count unless
//!   the PDB's `status.expectedPods` is set (see the `pods` module). Pending, Succeeded and Failed pods are always evictable (real rule).
//! - **Volumes**: PersistentVolumeClaims, PersistentVolumes and StorageClasses are plain
//!   stored objects: no volume controller binds a claim and no provisioner makes a volume
//!   (a test does either by writing the objects).
//! - Core v1 `events` and `events.k8s.io/v1` `events` are stored separately (the real
//!   server stores them once); `dryRun` is refused with 400; no authentication,
//!   authorization, protobuf, CBOR, YAML bodies, table output or `/metrics`.

mod handle;
mod ops;
mod patch;
mod pods;
mod resources;
mod routes;
mod selectors;
mod status;
mod store;
mod util;
mod watch;

pub use handle::{ApiServer, DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY_LIMIT, RequestRecord};
pub use resources::ResourceDef;
