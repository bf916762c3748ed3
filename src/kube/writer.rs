//! Carries the world's outputs to the API server, off the scheduling loop.
//!
//! - Bindings and evictions run concurrently, at most `max_in_flight` at once; each answer
//!   goes back to the loop as an input. A binding whose pod has claims not bound yet first
//!   has them bound (annotated with its node for their provisioner, or an existing volume
//!   bound to each), then waits for the volume controller to finish, holding no slot
//!   meanwhile (see [`VolumeBinding`]).
//! - A binding, eviction or status write still waiting for its turn when this replica
//!   stops leading is not sent: another replica may lead by the time its turn comes.
//! - Every call is bounded by a timeout: an API server that takes a request and never
//!   answers cannot hold a binding's devices, an eviction, or the status writes queued
//!   behind one. A call past it reads as one that got no answer.
//! - A binding whose answer does not tell whether it landed (no answer, a 5xx, a 409,
//!   which is also what kube's retry of a binding that landed gets, or a 429 that ends
//!   those retries) is settled by reading the pod: bound to the planned node is a
//!   success. Until the read is answered, the binding's devices stay reserved; one
//!   unanswered, a 5xx or a 429, read as not landed keeps
//!   them for the timeout again before a last read, as the API server may still carry
//!   it out.
//! - Status writes (pod conditions, nominated nodes, events, PodGroup and Queue status)
//!   are coalesced per object and field (the latest wins: a pod's condition and its
//!   nominated node are apart) and sent at a bounded rate, a few at once but never two of
//!   one key, so a storm of unschedulable pods can neither flood the API server nor slow
//!   scheduling, and one slow answer holds up no other write. A pod's condition that could not
//!   be written goes back to the loop as an input, to be written again. Events past a
//!   backlog are dropped; events are written by [`EventRecorder`].

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};

use super::convert::GPU_IDS_ANNOTATION;
use super::crd::{PodGroup, Queue};
use super::events::{EventRecorder, Regarding, fit_note};
use super::run::RunOptions;
use super::world::{
    ClaimBinding, Condition, Input, Output, PodRef, SELECTED_NODE_ANNOTATION, Unwritten, WriteError,
};

/// Where the loop sends its outputs.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    /// Without kube's retries: an eviction a disruption budget refuses is answered at once.
    eviction_client: Client,
    inputs: Sender<Input>,
    slots: Arc<Semaphore>,
    /// Bindings and evictions sent and not yet answered (or given up).
    in_flight: Arc<AtomicUsize>,
    /// Whether this replica leads its shard: bindings and evictions are sent only then.
    leading: Arc<AtomicBool>,
    status: mpsc::UnboundedSender<StatusWork>,
    runtime: tokio::runtime::Handle,
    /// The longest any one call waits for its answer.
    timeout: Duration,
}

impl Writer {
    /// A writer whose status task sends at most `options.status_qps` writes per second,
    /// which runs at most `options.max_in_flight` bindings and evictions at once while
    /// `leading` holds, and whose calls wait at most `options.api_timeout` for an answer.
    pub fn start(
        (client, eviction_client): (Client, Client),
        inputs: Sender<Input>,
        leading: Arc<AtomicBool>,
        reporter: Reporter,
        options: &RunOptions,
    ) -> Writer {
        let (status_qps, timeout) = (options.status_qps, options.api_timeout);
        let (status, queue) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Handle::current();
        runtime.spawn(write_status(
            client.clone(),
            reporter,
            queue,
            inputs.clone(),
            leading.clone(),
            status_qps.max(1),
            timeout,
        ));
        Writer {
            client,
            eviction_client,
            inputs,
            slots: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            in_flight: Arc::new(AtomicUsize::new(0)),
            leading,
            status,
            runtime,
            timeout,
        }
    }

    /// Carries one output out; never blocks.
    pub fn send(&self, output: Output) {
        match output {
            Output::Bind {
                job,
                pod,
                round,
                target,
                node,
                annotations,
                claims,
            } => {
                // Why the pod waited is stale now: its binding sets its condition.
                let _ = self.status.send(StatusWork::Forget(target.clone()));
                let (client, inputs, slots) =
                    (self.client.clone(), self.inputs.clone(), self.slots.clone());
                let (timeout, leading) = (self.timeout, self.leading.clone());
                let in_flight = InFlight::new(&self.in_flight);
                self.runtime.spawn(async move {
                    let _in_flight = in_flight;
                    let volumes = VolumeBinding {
                        client: &client,
                        slots: &slots,
                        leading: &leading,
                        timeout,
                    };
                    let provisioned = volumes.run(&target, &claims, &node).await;
                    let _slot = slots.acquire_owned().await;
                    let started = Instant::now();
                    let outcome = match provisioned.and_then(|()| still_leading(&leading)) {
                        Ok(()) => bind(client, &target, &node, annotations, timeout).await,
                        Err(e) => Err(e),
                    };
                    let _ = inputs.send(Input::Bound {
                        job,
                        pod,
                        round,
                        outcome,
                        latency: started.elapsed(),
                    });
                });
            }
            Output::Evict { job, pod, target } => {
                let (client, inputs, slots) = (
                    self.eviction_client.clone(),
                    self.inputs.clone(),
                    self.slots.clone(),
                );
                let (timeout, leading) = (self.timeout, self.leading.clone());
                let in_flight = InFlight::new(&self.in_flight);
                self.runtime.spawn(async move {
                    let _in_flight = in_flight;
                    let _slot = slots.acquire_owned().await;
                    let outcome = match still_leading(&leading) {
                        Ok(()) => evict(client, &target, timeout).await,
                        Err(e) => Err(e),
                    };
                    let _ = inputs.send(Input::Evicted { job, pod, outcome });
                });
            }
            status => {
                let _ = self.status.send(StatusWork::Write(status));
            }
        }
    }

    /// Waits, at most `within`, until every binding and eviction sent is answered or
    /// given up; says whether they all were. A leader stopping gives its Lease up only
    /// then, so that the next leader cannot place onto devices a binding of this one is
    /// still taking.
    pub async fn drained(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.in_flight.load(Ordering::Acquire) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One binding or eviction counted in flight while it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A binding or eviction whose turn came once this replica no longer leads is not sent:
/// the next leader may have placed onto the same devices meanwhile.
fn still_leading(leading: &AtomicBool) -> Result<(), WriteError> {
    if leading.load(Ordering::Acquire) {
        return Ok(());
    }
    Err(WriteError {
        code: None,
        message: "not sent: this replica no longer leads its shard".into(),
    })
}

fn write_error(error: kube::Error) -> WriteError {
    match error {
        kube::Error::Api(status) => WriteError {
            code: Some(status.code),
            message: status.message,
        },
        other => WriteError {
            code: None,
            message: other.to_string(),
        },
    }
}

/// The call's answer, or, past `timeout`, an error without a code: no answer.
async fn within<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, WriteError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer.map_err(write_error),
        Err(_) => Err(WriteError {
            code: None,
            message: format!("no answer within {timeout:?}"),
        }),
    }
}

/// The longest a binding waits for its pod's claims to be bound, as kube-scheduler's
/// `bindTimeoutSeconds` (600 s).
const CLAIMS_BOUND_TIMEOUT: Duration = Duration::from_secs(600);

/// How often a claim being bound is read.
const CLAIM_POLL: Duration = Duration::from_secs(1);

/// The annotation the volume controller (and kube-scheduler) sets on a volume whose
/// `claimRef` it set.
const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";

/// Has a pod's claims bound before the pod is, as kube-scheduler's `VolumeBinding` does in
/// PreBind.
struct VolumeBinding<'a> {
    client: &'a Client,
    slots: &'a Semaphore,
    leading: &'a AtomicBool,
    timeout: Duration,
}

impl VolumeBinding<'_> {
    /// Using a slot while this replica leads: annotates each claim to provision
    /// `volume.kubernetes.io/selected-node` with `node` (guarded by its resourceVersion),
    /// which its class's provisioner waits for, and binds each volume chosen to its claim (its `claimRef`, guarded by
    /// its resourceVersion), which the volume controller finishes. Then waits, holding
    /// none, until every claim is bound. A claim or volume that cannot be written or read,
    /// a node the provisioner gives up (the annotation gone, or another node's), a volume
    /// bound to another claim, or a claim not bound within [`CLAIMS_BOUND_TIMEOUT`] fails
    /// the binding, and the pod is placed again.
    async fn run(
        &self,
        target: &PodRef,
        claims: &[ClaimBinding],
        node: &str,
    ) -> Result<(), WriteError> {
        if claims.is_empty() {
            return Ok(());
        }
        let claim_api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &target.namespace);
        let volume_api: Api<PersistentVolume> = Api::all(self.client.clone());
        {
            let _slot = self.slots.acquire().await;
            still_leading(self.leading)?;
            for binding in claims {
                let claim = binding.claim();
                match binding {
                    ClaimBinding::Provision { .. } => {
                        self.select_node(&claim_api, claim, node)
                            .await
                            .map_err(|e| about_claim(claim, e))?;
                    }
                    ClaimBinding::Volume { volume, .. } => {
                        self.bind_volume(&claim_api, &volume_api, claim, volume)
                            .await
                            .map_err(|e| about_claim(claim, e))?;
                    }
                }
            }
        }
        let deadline = Instant::now() + CLAIMS_BOUND_TIMEOUT;
        for binding in claims {
            let claim = binding.claim();
            loop {
                still_leading(self.leading)?;
                let polled = self.poll(&claim_api, &volume_api, binding, node).await;
                let waits = match polled {
                    Ok(Claim::Bound) => break,
                    Ok(Claim::Waits(waits)) => waits,
                    Ok(Claim::GivenUp(why)) => return Err(about_claim(claim, refusal(why))),
                    // Read again until the deadline: the API server or the network may
                    // come back.
                    Err(e) if transient(&e) => e.message,
                    Err(e) => return Err(about_claim(claim, e)),
                };
                if Instant::now() >= deadline {
                    let message = format!("not bound within {CLAIMS_BOUND_TIMEOUT:?} ({waits})");
                    return Err(about_claim(claim, refusal(message)));
                }
                tokio::time::sleep(CLAIM_POLL).await;
            }
        }
        Ok(())
    }

    /// Reads a claim being bound (and the volume chosen for it), or the error reading it.
    async fn poll(
        &self,
        claim_api: &Api<PersistentVolumeClaim>,
        volume_api: &Api<PersistentVolume>,
        binding: &ClaimBinding,
        node: &str,
    ) -> Result<Claim, WriteError> {
        let claim = binding.claim();
        let read = within(self.timeout, claim_api.get(claim)).await?;
        let volume_name = read.spec.as_ref().and_then(|s| s.volume_name.as_deref());
        if volume_name.is_some_and(|v| !v.is_empty()) {
            return Ok(Claim::Bound);
        }
        match binding {
            ClaimBinding::Provision { .. } => {
                let annotations = read.metadata.annotations.as_ref();
                let selected = annotations.and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
                if selected.map(String::as_str) != Some(node) {
                    return Ok(Claim::GivenUp(format!(
                        "its provisioner gave node {node} up"
                    )));
                }
                Ok(Claim::Waits(format!("a volume provisioned on node {node}")))
            }
            ClaimBinding::Volume { volume, .. } => {
                let bound = within(self.timeout, volume_api.get(volume)).await;
                let bound = bound.map_err(|e| about_volume(volume, e))?;
                if !names_claim(&bound, &read) {
                    let why = format!("persistentvolume {volume} is no longer bound to it");
                    return Ok(Claim::GivenUp(why));
                }
                let waits = format!("the volume controller to bind persistentvolume {volume}");
                Ok(Claim::Waits(waits))
            }
        }
    }

    /// Annotates `claim` `volume.kubernetes.io/selected-node` with `node`, patched with
    /// the claim's resourceVersion, so that a claim changed meanwhile refuses it (409) and
    /// is read again: one annotated with `node` by then (another pod of the claim bound
    /// alongside) is left as it is; one annotated with another node, or bound without
    /// being annotated with `node`, fails the binding (the pod is placed again, as the
    /// claim is now).
    async fn select_node(
        &self,
        claim_api: &Api<PersistentVolumeClaim>,
        claim: &str,
        node: &str,
    ) -> Result<(), WriteError> {
        self.write_after_reading(|| async {
            let read = within(self.timeout, claim_api.get(claim)).await?;
            let bound = read.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            let annotations = read.metadata.annotations.as_ref();
            let selected = annotations.and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
            match selected.map(String::as_str) {
                Some(selected) if selected == node => return Ok(None),
                _ if bound.is_some_and(|v| !v.is_empty()) => {
                    return Err(refusal("bound meanwhile".into()));
                }
                Some(other) => return Err(refusal(format!("selected for node {other} meanwhile"))),
                None => {}
            }
            let patch = Patch::Merge(json!({"metadata": {
                "resourceVersion": read.metadata.resource_version,
                "annotations": {SELECTED_NODE_ANNOTATION: node},
            }}));
            let params = PatchParams::default();
            Ok(Some(
                within(self.timeout, claim_api.patch(claim, &params, &patch)).await,
            ))
        })
        .await
    }

    /// Binds `volume` to `claim` as kube-scheduler does: its `claimRef` names the claim,
    /// patched with the volume's resourceVersion, so that a volume changed meanwhile
    /// refuses it (409) and is read again. A volume bound to the claim by then is left as
    /// it is; one bound to another claim, or a claim bound to another volume, fails the
    /// binding.
    async fn bind_volume(
        &self,
        claim_api: &Api<PersistentVolumeClaim>,
        volume_api: &Api<PersistentVolume>,
        claim: &str,
        volume: &str,
    ) -> Result<(), WriteError> {
        self.write_after_reading(|| async {
            let read_claim = within(self.timeout, claim_api.get(claim)).await?;
            let read = within(self.timeout, volume_api.get(volume)).await;
            let read = read.map_err(|e| about_volume(volume, e))?;
            if names_claim(&read, &read_claim) {
                return Ok(None);
            }
            let claim_volume = read_claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref());
            if let Some(other) = claim_volume.filter(|v| !v.is_empty()) {
                return Err(refusal(format!(
                    "bound to persistentvolume {other} meanwhile"
                )));
            }
            if read
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some()
            {
                let message = format!("persistentvolume {volume} is bound to another claim");
                return Err(refusal(message));
            }
            let patch = Patch::Merge(json!({
                "metadata": {
                    "resourceVersion": read.metadata.resource_version,
                    "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"},
                },
                "spec": {"claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": read_claim.metadata.namespace,
                    "name": claim,
                    "uid": read_claim.metadata.uid,
                    "resourceVersion": read_claim.metadata.resource_version,
                }},
            }));
            let params = PatchParams::default();
            let patched = within(self.timeout, volume_api.patch(volume, &params, &patch)).await;
            Ok(Some(patched.map_err(|e| about_volume(volume, e))))
        })
        .await
    }

    /// Runs `attempt` (a read, and the write it decides on, guarded by what it read) until
    /// the write is not refused as stale (409), at most [`STALE_WRITES`] times: `None`
    /// from the attempt is nothing to write.
    async fn write_after_reading<T, F>(&self, attempt: impl Fn() -> F) -> Result<(), WriteError>
    where
        F: Future<Output = Result<Option<Result<T, WriteError>>, WriteError>>,
    {
        let mut tries = 0;
        loop {
            tries += 1;
            match attempt().await? {
                None | Some(Ok(_)) => return Ok(()),
                Some(Err(e)) if e.code == Some(409) && tries < STALE_WRITES => continue,
                Some(Err(e)) => return Err(e),
            }
        }
    }
}

/// A claim being bound, as read.
enum Claim {
    Bound,
    /// Not bound yet: what it waits for.
    Waits(String),
    /// It will not be bound as the binding meant: why.
    GivenUp(String),
}

/// How many times a write guarded by what was read is tried when it finds that changed.
const STALE_WRITES: u32 = 3;

/// An error that is the binding's own judgement, not the API server's answer.
fn refusal(message: String) -> WriteError {
    WriteError {
        code: None,
        message,
    }
}

/// Whether the volume's `claimRef` names the claim (`IsVolumeBoundToClaim`).
fn names_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    claim_ref.is_some_and(|r| {
        let uid = r.uid.as_deref().unwrap_or_default();
        r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
            && (uid.is_empty() || Some(uid) == claim.metadata.uid.as_deref())
    })
}

/// An error about one object (`kind` and name) a pod's binding writes or reads.
fn about(kind: &str, name: &str, e: WriteError) -> WriteError {
    WriteError {
        message: format!("{kind} {name}: {}", e.message),
        ..e
    }
}

/// An error about one claim of a pod being bound.
fn about_claim(claim: &str, e: WriteError) -> WriteError {
    about("persistentvolumeclaim", claim, e)
}

/// An error about the volume chosen for a claim.
fn about_volume(volume: &str, e: WriteError) -> WriteError {
    about("persistentvolume", volume, e)
}

/// `pods/binding` with the device annotations, which the API server copies onto the pod;
/// the pod's uid guards against binding a pod recreated under the same name. An answer
/// that does not tell whether the binding landed is settled by reading the pod.
async fn bind(
    client: Client,
    target: &PodRef,
    node: &str,
    annotations: BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(), WriteError> {
    let api: Api<Pod> = Api::namespaced(client, &target.namespace);
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": target.name,
            "namespace": target.namespace,
            "uid": target.uid,
            "annotations": annotations,
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let params = PostParams::default();
    let call =
        api.create_subresource::<_, kube::core::Status>("binding", &target.name, &params, &binding);
    let Err(error) = within(timeout, call).await else {
        return Ok(());
    };
    // Landed means on the planned node with the planned devices: an earlier binding of the
    // pod that landed late may have put it there with others.
    let planned = (
        node.to_owned(),
        annotations.get(GPU_IDS_ANNOTATION).cloned(),
    );
    // A 429 is the last of the client's own retries (it retries 429, 503 and 504), the
    // first of which may have landed answered 504.
    let unsettled = error
        .code
        .is_none_or(|code| code == 409 || code == 429 || code >= 500);
    if !unsettled {
        return Err(error);
    }
    match bound_where(&api, target, timeout).await {
        Some(bound) if bound == planned => return Ok(()),
        Some(_) => return Err(error),
        None => {}
    }
    // Unanswered, a server error or too many requests: the API server may still carry the
    // binding out (its handler goes on after the request timed out; an etcd write in
    // flight commits). Its devices stay this job's for as long again before the pod is
    // read a last time, so that they go to no other pod meanwhile.
    if error.code != Some(409) {
        tokio::time::sleep(timeout).await;
        if bound_where(&api, target, timeout).await == Some(planned) {
            return Ok(());
        }
    }
    Err(error)
}

/// The longest pause between two reads of a pod whose binding is unsettled.
const MAX_READ_PAUSE: Duration = Duration::from_secs(30);

/// Whether an error may go away on its own (no answer, too many requests, a server
/// error), so that the same request is worth sending again.
fn transient(error: &WriteError) -> bool {
    error.code.is_none_or(|code| code == 429 || code >= 500)
}

/// The node the pod is bound to and the devices it carries (`kant.io/gpu-ids`), as the
/// API server has them now; `None` when the pod is not bound, is gone (or recreated under its name), or cannot be read: a transient error is
/// read again, with a doubling pause, for up to four times the write timeout; any other
/// (403 where the role lacks `get` on pods) at once. `None` leaves the binding's own error
/// standing: the job is requeued, and a binding that did land is adopted from the watch.
async fn bound_where(
    api: &Api<Pod>,
    target: &PodRef,
    timeout: Duration,
) -> Option<(String, Option<String>)> {
    let give_up_at = Instant::now() + timeout * 4;
    let mut pause = Duration::from_secs(1);
    loop {
        match within(timeout, api.get(&target.name)).await {
            Ok(pod) if pod.metadata.uid.as_deref() == Some(target.uid.as_str()) => {
                let node = pod.spec?.node_name.filter(|node| !node.is_empty())?;
                let devices = pod
                    .metadata
                    .annotations
                    .and_then(|mut a| a.remove(GPU_IDS_ANNOTATION));
                return Some((node, devices));
            }
            Ok(_) => return None,
            Err(e) if e.code == Some(404) => return None,
            Err(e) if transient(&e) && Instant::now() + pause < give_up_at => {
                tracing::warn!(
                    "pod {target}: cannot read whether its binding landed ({e}); reading again in {pause:?}"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_READ_PAUSE);
            }
            Err(e) => {
                tracing::warn!(
                    "pod {target}: cannot read whether its binding landed ({e}); taking it as failed"
                );
                return None;
            }
        }
    }
}

/// The Eviction API, so that PodDisruptionBudgets hold; a refusal comes back as 429, or as
/// 409 where the budget's update kept conflicting (the pod is read then). The
/// eviction names the victim's uid, so that a pod created again under its name is not
/// evicted in its place. (The body is written here: kube's `Api::evict` sends its delete
/// options as `delete_options`, which the API server ignores, preconditions included.)
async fn evict(client: Client, target: &PodRef, timeout: Duration) -> Result<(), WriteError> {
    let api: Api<Pod> = Api::namespaced(client, &target.namespace);
    let eviction = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": target.name, "namespace": target.namespace},
        "deleteOptions": {"preconditions": {"uid": target.uid}},
    });
    let params = PostParams::default();
    let request = api.create_subresource::<_, kube::core::Status>(
        "eviction",
        &target.name,
        &params,
        &eviction,
    );
    match within(timeout, request).await {
        Ok(_) => Ok(()),
        // Already gone: what the eviction was for.
        Err(e) if e.code == Some(404) => Ok(()),
        // Gone and created again (its uid differs), or a conflict updating a
        // PodDisruptionBudget that evicted nothing: the pod as it is now tells which.
        Err(e) if e.code == Some(409) && going(&api, target, timeout).await => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the pod is gone, created again under its name, or being deleted, as the API
/// server has it now; `false` when it cannot be read.
async fn going(api: &Api<Pod>, target: &PodRef, timeout: Duration) -> bool {
    match within(timeout, api.get(&target.name)).await {
        Ok(pod) => {
            pod.metadata.uid.as_deref() != Some(target.uid.as_str())
                || pod.metadata.deletion_timestamp.is_some()
        }
        Err(e) => e.code == Some(404),
    }
}

/// Writes waiting past which new events are dropped.
const EVENT_BACKLOG: usize = 10_000;

/// What the status task is asked to do.
enum StatusWork {
    Write(Output),
    /// Drop the condition that waits to be written on this pod.
    Forget(PodRef),
}

/// What one status write is about: the latest write per key wins while it waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum StatusKey {
    Condition(PodRef),
    Nominated(PodRef),
    Event(Regarding, &'static str, String),
    Group(String, String),
    Queue(String),
}

fn status_key(output: &Output) -> Option<StatusKey> {
    Some(match output {
        Output::PodCondition { target, .. } => StatusKey::Condition(target.clone()),
        Output::Nominate { target, .. } => StatusKey::Nominated(target.clone()),
        Output::Event {
            target,
            reason,
            message,
            ..
        } => StatusKey::Event(target.clone(), reason, message.clone()),
        Output::PodGroupStatus {
            namespace, name, ..
        } => StatusKey::Group(namespace.clone(), name.clone()),
        Output::QueueStatus { name, .. } => StatusKey::Queue(name.clone()),
        Output::Bind { .. } | Output::Evict { .. } => return None,
    })
}

/// The most status writes in flight at once. Each waits for its answer (or the timeout),
/// so one at a time would cap the rate at one per round trip, far below the pace on a
/// loaded API server, and a write never answered would hold up every other.
const STATUS_IN_FLIGHT: usize = 16;

/// One status write sent: its key, what to tell the loop if it is not written, and how it
/// went.
type SentStatus = (StatusKey, Option<Unwritten>, Result<(), WriteError>);

/// The status task: coalesces and paces status writes, starting at most `qps` a second
/// and [`STATUS_IN_FLIGHT`] at once, never two of one key (so the latest lands last);
/// tells `inputs` of each pod condition not written. It ends once this replica no longer
/// leads: the writes still waiting are stale, and the next leader's own would be
/// overwritten by them.
async fn write_status(
    client: Client,
    reporter: Reporter,
    mut queue: mpsc::UnboundedReceiver<StatusWork>,
    inputs: Sender<Input>,
    leading: Arc<AtomicBool>,
    qps: u32,
    timeout: Duration,
) {
    let recorder = Arc::new(EventRecorder::new(client.clone(), reporter));
    let mut waiting: HashMap<StatusKey, Output> = HashMap::new();
    let mut order: VecDeque<StatusKey> = VecDeque::new();
    let mut sent: FuturesUnordered<BoxFuture<'static, SentStatus>> = FuturesUnordered::new();
    let mut busy: HashSet<StatusKey> = HashSet::new();
    let pause = Duration::from_secs(1) / qps;
    let mut next_start = tokio::time::Instant::now();
    let mut open = true;
    loop {
        while let Ok(work) = queue.try_recv() {
            enqueue(&mut waiting, &mut order, work);
        }
        // Every waiting write's key is in `order`; some of them have one in flight.
        let waiting_behind = busy.iter().filter(|k| waiting.contains_key(k)).count();
        let may_start = sent.len() < STATUS_IN_FLIGHT && waiting.len() > waiting_behind;
        if may_start && tokio::time::Instant::now() >= next_start {
            if !leading.load(Ordering::Acquire) {
                return;
            }
            let (key, output) = next_ready(&mut waiting, &mut order, &busy);
            let unwritten = unwritten(&output);
            let (client, recorder) = (client.clone(), recorder.clone());
            busy.insert(key.clone());
            sent.push(Box::pin(async move {
                let written = within(timeout, write_one(&client, &recorder, output)).await;
                (key, unwritten, written)
            }));
            next_start = tokio::time::Instant::now() + pause;
            continue;
        }
        if !open && sent.is_empty() && !may_start {
            return;
        }
        tokio::select! {
            work = queue.recv(), if open => match work {
                Some(work) => enqueue(&mut waiting, &mut order, work),
                None => open = false,
            },
            Some((key, unwritten, written)) = sent.next(), if !sent.is_empty() => {
                busy.remove(&key);
                if let Err(e) = written {
                    tell_unwritten(&inputs, unwritten, e);
                }
            }
            () = tokio::time::sleep_until(next_start), if may_start => {}
        }
    }
}

/// The first waiting write whose key has none in flight (there is one), out of the
/// backlog; the keys passed over keep their places.
fn next_ready(
    waiting: &mut HashMap<StatusKey, Output>,
    order: &mut VecDeque<StatusKey>,
    busy: &HashSet<StatusKey>,
) -> (StatusKey, Output) {
    let mut passed = Vec::new();
    let ready = loop {
        let key = order
            .pop_front()
            .expect("a waiting write with no write in flight");
        if busy.contains(&key) && waiting.contains_key(&key) {
            passed.push(key);
        } else if let Some(output) = waiting.remove(&key) {
            break (key, output);
        }
    };
    for key in passed.into_iter().rev() {
        order.push_front(key);
    }
    ready
}

/// What to tell the loop if this write is not written: pod conditions, PodGroup and Queue
/// status are written again.
fn unwritten(output: &Output) -> Option<Unwritten> {
    match output {
        Output::PodCondition { target, .. } => Some(Unwritten::Condition(target.clone())),
        Output::PodGroupStatus {
            namespace, name, ..
        } => Some(Unwritten::PodGroup(namespace.clone(), name.clone())),
        Output::QueueStatus { name, .. } => Some(Unwritten::Queue(name.clone())),
        _ => None,
    }
}

/// Only a write that may succeed if sent again is told again: a refusal (403, 422) would
/// repeat for ever. A condition's 409 says the pod changed while the write waited: it is
/// told again with the pod's new resourceVersion, if the pod still waits.
fn tell_unwritten(inputs: &Sender<Input>, unwritten: Option<Unwritten>, e: WriteError) {
    let outdated =
        |what: &Unwritten| matches!(what, Unwritten::Condition(_)) && e.code == Some(409);
    match unwritten {
        Some(what) if transient(&e) || outdated(&what) => {
            tracing::debug!("{what:?} not written ({e}); written again");
            let _ = inputs.send(Input::NotWritten(what));
        }
        Some(what) => tracing::warn!("{what:?} refused: {e}"),
        None => tracing::debug!("status write: {e}"),
    }
}

fn enqueue(
    waiting: &mut HashMap<StatusKey, Output>,
    order: &mut VecDeque<StatusKey>,
    work: StatusWork,
) {
    let output = match work {
        StatusWork::Write(output) => output,
        StatusWork::Forget(pod) => {
            // Its key stays in `order` and is skipped when it comes up.
            waiting.remove(&StatusKey::Condition(pod));
            return;
        }
    };
    // An event's note is cut to what the API server takes before it is keyed: two notes
    // alike up to the cut are one event, written one at a time (a series).
    let output = match output {
        Output::Event {
            target,
            warning,
            reason,
            message,
        } => Output::Event {
            target,
            warning,
            reason,
            message: fit_note(message),
        },
        other => other,
    };
    let Some(key) = status_key(&output) else {
        return;
    };
    // Events are best effort: past the backlog a new one is dropped (as kube-scheduler's
    // event broadcaster drops them), so a burst larger than the pace allows cannot grow
    // the queue without bound. Status writes are one per object and always kept.
    if matches!(key, StatusKey::Event(..))
        && waiting.len() >= EVENT_BACKLOG
        && !waiting.contains_key(&key)
    {
        tracing::debug!("event backlog full; an event is dropped");
        return;
    }
    if waiting.insert(key.clone(), output).is_none() {
        order.push_back(key);
    }
}

/// A strategic merge patch of the pod's status, guarded by `metadata` (its uid, and a
/// resourceVersion if any).
async fn patch_pod_status(
    client: &Client,
    target: &PodRef,
    metadata: serde_json::Value,
    status: serde_json::Value,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let patch = json!({"metadata": metadata, "status": status});
    api.patch_status(
        &target.name,
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await
    .map(|_| ())
}

async fn write_one(
    client: &Client,
    recorder: &EventRecorder,
    output: Output,
) -> Result<(), kube::Error> {
    let params = PatchParams::default();
    match output {
        Output::PodCondition {
            target,
            resource_version,
            transition,
            condition:
                Condition {
                    status: ok,
                    reason,
                    message,
                },
        } => {
            let mut condition = json!({
                "type": "PodScheduled",
                "status": if ok { "True" } else { "False" },
                "reason": reason,
                "message": message,
            });
            // Left out, the time the status last changed stays (conditions merge by type).
            if transition {
                condition["lastTransitionTime"] =
                    k8s_openapi::jiff::Timestamp::now().to_string().into();
            }
            let metadata = json!({"uid": target.uid, "resourceVersion": resource_version});
            patch_pod_status(
                client,
                &target,
                metadata,
                json!({"conditions": [condition]}),
            )
            .await
        }
        Output::Nominate { target, node } => {
            let metadata = json!({"uid": target.uid});
            patch_pod_status(
                client,
                &target,
                metadata,
                json!({"nominatedNodeName": node}),
            )
            .await
        }
        Output::Event {
            target,
            warning,
            reason,
            message,
        } => recorder.publish(&target, warning, reason, message).await,
        Output::PodGroupStatus {
            namespace,
            name,
            status,
        } => {
            let api: Api<PodGroup> = Api::namespaced(client.clone(), &namespace);
            let patch = json!({"status": status});
            api.patch_status(&name, &params, &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
        Output::QueueStatus { name, status } => {
            let api: Api<Queue> = Api::all(client.clone());
            let patch = json!({"status": status});
            api.patch_status(&name, &params, &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
        Output::Bind { .. } | Output::Evict { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "ml".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn event(name: &str) -> StatusWork {
        StatusWork::Write(Output::Event {
            target: pod(name).into(),
            warning: false,
            reason: "Scheduled",
            message: "placed".into(),
        })
    }

    fn unschedulable(name: &str) -> StatusWork {
        StatusWork::Write(Output::PodCondition {
            target: pod(name),
            resource_version: "7".into(),
            transition: true,
            condition: Condition {
                status: false,
                reason: "Unschedulable",
                message: "0/1 nodes are available".into(),
            },
        })
    }

    fn nominate(name: &str, node: Option<&str>) -> StatusWork {
        StatusWork::Write(Output::Nominate {
            target: pod(name),
            node: node.map(str::to_owned),
        })
    }

    #[test]
    fn events_alike_up_to_the_notes_cut_wait_as_one() {
        let mut waiting = HashMap::new();
        let mut order = VecDeque::new();
        let long = |tail: &str| {
            StatusWork::Write(Output::Event {
                target: pod("p").into(),
                warning: true,
                reason: "FailedScheduling",
                message: format!("{}{tail}", "x".repeat(2000)),
            })
        };
        enqueue(&mut waiting, &mut order, long("a"));
        enqueue(&mut waiting, &mut order, long("b"));
        assert_eq!(order.len(), 1, "{order:?}");
        let (_, Output::Event { message, .. }) =
            next_ready(&mut waiting, &mut order, &HashSet::new())
        else {
            panic!("an event was waiting");
        };
        assert_eq!(message, fit_note("x".repeat(2000)));
    }

    #[test]
    fn the_backlog_keeps_statuses_and_drops_events_past_its_bound() {
        let mut waiting = HashMap::new();
        let mut order = VecDeque::new();
        for i in 0..EVENT_BACKLOG {
            enqueue(&mut waiting, &mut order, event(&format!("p{i}")));
        }
        enqueue(&mut waiting, &mut order, event("late"));
        assert_eq!(
            waiting.len(),
            EVENT_BACKLOG,
            "the event past the bound is dropped"
        );
        enqueue(&mut waiting, &mut order, unschedulable("late"));
        assert_eq!(
            waiting.len(),
            EVENT_BACKLOG + 1,
            "a status write is always kept"
        );
        // A pod that gets bound has its waiting condition forgotten.
        enqueue(&mut waiting, &mut order, StatusWork::Forget(pod("late")));
        assert_eq!(waiting.len(), EVENT_BACKLOG);
    }

    /// A preemptor's nomination is cleared just before it is bound: binding it forgets its
    /// waiting condition, not the clearing. Nor does a condition replace a nomination.
    /// A write whose key has one in flight is passed over, and keeps its place; a key
    /// forgotten is dropped from the order.
    #[test]
    fn the_next_write_has_none_of_its_key_in_flight() {
        let mut waiting = HashMap::new();
        let mut order = VecDeque::new();
        for name in ["a", "b", "c"] {
            enqueue(&mut waiting, &mut order, unschedulable(name));
        }
        enqueue(&mut waiting, &mut order, StatusWork::Forget(pod("b")));
        let busy = HashSet::from([StatusKey::Condition(pod("a"))]);
        let (key, _) = next_ready(&mut waiting, &mut order, &busy);
        assert_eq!(key, StatusKey::Condition(pod("c")));
        assert_eq!(order, [StatusKey::Condition(pod("a"))]);
        let (key, _) = next_ready(&mut waiting, &mut order, &HashSet::new());
        assert_eq!(key, StatusKey::Condition(pod("a")));
        assert!(waiting.is_empty() && order.is_empty());
    }

    #[test]
    fn a_pods_condition_and_nomination_wait_apart() {
        let mut waiting = HashMap::new();
        let mut order = VecDeque::new();
        enqueue(&mut waiting, &mut order, nominate("p", Some("n1")));
        enqueue(&mut waiting, &mut order, unschedulable("p"));
        assert_eq!(waiting.len(), 2, "{waiting:?}");
        enqueue(&mut waiting, &mut order, nominate("p", None));
        enqueue(&mut waiting, &mut order, StatusWork::Forget(pod("p")));
        let left: Vec<&Output> = waiting.values().collect();
        assert_eq!(
            left,
            [&Output::Nominate {
                target: pod("p"),
                node: None
            }]
        );
    }
}
