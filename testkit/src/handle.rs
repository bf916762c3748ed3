//! The public handle, [`ApiServer`]: starting the server (on the caller's runtime or on a
//! dedicated one whose CPU time can be measured), client construction, typed store access
//! for test setup and assertions, fault, latency and watch-lag injection, and observation
//! (request counts and log, bindings, open watches). Also the state every request handler
//! shares.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::serve::ListenerExt;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::AbortHandle;

use crate::ops::{self, Target, Writer};
use crate::pods;
use crate::resources::{self, ResourceDef};
use crate::routes;
use crate::status::ApiError;
use crate::store::{Obj, ResId, Store};
use crate::util::lock;

/// Default number of change events kept per resource for watches to resume from.
pub const DEFAULT_HISTORY_LIMIT: usize = 100_000;

/// Default interval between watch bookmarks.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Position in arrival order (starting at 0).
    pub seq: u64,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The API group of the URL: empty for the core group (`/api/v1`), else the group of
    /// `/apis/{group}/{version}` (`events.k8s.io`, `coordination.k8s.io`).
    pub group: String,
    /// The plural, with the subresource if any: `pods`, `pods/binding`, `podgroups/status`.
    /// Core `events` and `events.k8s.io` events both read `events` (`group` tells them
    /// apart).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The HTTP status answered (200 for a watch that started, even if it then sent an
    /// ERROR; 0 for a request never answered).
    pub code: u16,
}

struct Fault {
    verb: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
    remaining: usize,
    /// The request takes effect before the fault answers.
    applied: bool,
    /// The HTTP code answered; `None`: no answer at all.
    code: Option<u16>,
}

/// What an injected fault does to the request it matched.
pub(crate) struct Injected {
    /// The request takes effect first.
    pub applied: bool,
    /// The error answered; `None`: the request is never answered.
    pub error: Option<ApiError>,
}

#[derive(Default)]
struct Observed {
    counts: BTreeMap<(String, String), u64>,
    log: Vec<RequestRecord>,
    seq: u64,
}

/// State shared by the handle and every request handler.
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    faults: Mutex<Vec<Fault>>,
    observed: Mutex<Observed>,
    latency_ns: AtomicU64,
    bookmark_ns: AtomicU64,
    /// How long a terminating pod's kubelet takes to finish it.
    termination_ns: AtomicU64,
    drop_tx: tokio::sync::watch::Sender<u64>,
    /// Whether watch streams hold their events back (see `ApiServer::pause_watches`).
    paused_tx: tokio::sync::watch::Sender<bool>,
    addr: SocketAddr,
    /// Bindings still to be left unanswered and carried out late, and how late (see
    /// `ApiServer::land_next_bindings_late`).
    pub(crate) late_bindings: Mutex<(usize, Duration)>,
}

impl Shared {
    fn new(addr: SocketAddr) -> Arc<Self> {
        Arc::new(Self {
            store: Mutex::new(Store::new(resources::builtin(), DEFAULT_HISTORY_LIMIT)),
            faults: Mutex::new(Vec::new()),
            observed: Mutex::new(Observed::default()),
            latency_ns: AtomicU64::new(0),
            termination_ns: AtomicU64::new(0),
            bookmark_ns: AtomicU64::new(DEFAULT_BOOKMARK_INTERVAL.as_nanos() as u64),
            drop_tx: tokio::sync::watch::Sender::new(0),
            paused_tx: tokio::sync::watch::Sender::new(false),
            addr,
            late_bindings: Mutex::new((0, Duration::ZERO)),
        })
    }

    /// Whether the next binding is to be carried out late, and how late.
    pub(crate) fn take_late_binding(&self) -> Option<Duration> {
        let mut late = lock(&self.late_bindings);
        (late.0 > 0).then(|| {
            late.0 -= 1;
            late.1
        })
    }

    pub(crate) fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_ns.load(Ordering::Relaxed))
    }

    pub(crate) fn bookmark_interval(&self) -> Duration {
        Duration::from_nanos(self.bookmark_ns.load(Ordering::Relaxed))
    }

    /// Plays the kubelet for a pod that started terminating: it is removed once the
    /// termination delay has passed (at once without one). Nothing for a pod already gone.
    pub(crate) fn kubelet_finishes(self: &Arc<Self>, pods: ResId, deletion: &pods::Deletion) {
        let pods::Deletion::Terminating(pod) = deletion else {
            return;
        };
        let key = (
            pod.meta_str("namespace").to_string(),
            pod.meta_str("name").to_string(),
        );
        let uid = pod.meta_str("uid").to_string();
        let delay = Duration::from_nanos(self.termination_ns.load(Ordering::Relaxed));
        if delay.is_zero() {
            pods::finish_termination(&mut lock(&self.store), pods, &key, &uid);
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            pods::finish_termination(&mut lock(&shared.store), pods, &key, &uid);
        });
    }

    /// A receiver that changes when `drop_watches` is called.
    pub(crate) fn drop_rx(&self) -> tokio::sync::watch::Receiver<u64> {
        self.drop_tx.subscribe()
    }

    /// A receiver of whether watch streams hold their events back.
    pub(crate) fn paused_rx(&self) -> tokio::sync::watch::Receiver<bool> {
        self.paused_tx.subscribe()
    }

    pub(crate) fn addr_string(&self) -> String {
        self.addr.to_string()
    }

    /// Consumes one matching injected fault, if any.
    pub(crate) fn take_fault(
        &self,
        verb: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Option<Injected> {
        let mut faults = lock(&self.faults);
        let f = faults.iter_mut().find(|f| {
            f.remaining > 0
                && f.verb == verb
                && f.resource == resource
                && (f.namespace.is_none() || f.namespace.as_deref() == ns)
                && (f.name.is_none() || f.name.as_deref() == name)
        })?;
        f.remaining -= 1;
        let (applied, code) = (f.applied, f.code);
        faults.retain(|f| f.remaining > 0);
        let what = match name {
            Some(n) => format!("{resource} \"{n}\""),
            None => resource.to_string(),
        };
        let error = code.map(|code| {
            ApiError::with_code(
                code,
                format!(
                    "injected failure ({code}) for {verb} on {what} (kant-testkit fault injection)"
                ),
            )
        });
        Some(Injected { applied, error })
    }

    pub(crate) fn record(
        &self,
        group: &str,
        verb: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        code: u16,
    ) {
        let mut o = lock(&self.observed);
        *o.counts
            .entry((verb.to_string(), resource.to_string()))
            .or_insert(0) += 1;
        let seq = o.seq;
        o.seq += 1;
        o.log.push(RequestRecord {
            seq,
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            code,
        });
    }
}

/// CPU clocks of a dedicated runtime's threads.
#[derive(Default)]
struct CpuClocks {
    inner: Mutex<ClockSet>,
}

#[derive(Default)]
struct ClockSet {
    live: HashMap<std::thread::ThreadId, ClockId>,
    finished: Duration,
}

#[cfg(target_os = "linux")]
type ClockId = libc::clockid_t;
#[cfg(not(target_os = "linux"))]
type ClockId = ();

#[cfg(target_os = "linux")]
fn own_clock() -> Option<ClockId> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self() is always a valid handle for the calling thread, and `id` is a
    // valid out-pointer.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    (rc == 0).then_some(id)
}

#[cfg(target_os = "linux")]
fn read_clock(id: ClockId) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; an invalid clock id (a thread that has exited)
    // makes the call fail with EINVAL, which we report as None.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(target_os = "linux")]
fn own_cpu_time() -> Option<Duration> {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(not(target_os = "linux"))]
fn own_clock() -> Option<ClockId> {
    None
}

#[cfg(not(target_os = "linux"))]
fn read_clock(_id: ClockId) -> Option<Duration> {
    None
}

#[cfg(not(target_os = "linux"))]
fn own_cpu_time() -> Option<Duration> {
    None
}

impl CpuClocks {
    fn thread_started(&self) {
        if let Some(id) = own_clock() {
            lock(&self.inner)
                .live
                .insert(std::thread::current().id(), id);
        }
    }

    fn thread_stopped(&self) {
        let mut set = lock(&self.inner);
        set.live.remove(&std::thread::current().id());
        if let Some(t) = own_cpu_time() {
            set.finished += t;
        }
    }

    fn total(&self) -> Duration {
        let set = lock(&self.inner);
        set.finished
            + set
                .live
                .values()
                .filter_map(|id| read_clock(*id))
                .sum::<Duration>()
    }
}

struct Inner {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: Option<AbortHandle>,
    runtime: Option<tokio::runtime::Runtime>,
    clocks: Option<Arc<CpuClocks>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
        self.shared.drop_tx.send_modify(|e| *e += 1);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// A running in-process Kubernetes API server. Cheap to clone; the server stops (and its
/// open watches end) when the last clone is dropped.
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

impl fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiServer")
            .field("url", &self.url())
            .field("dedicated", &self.inner.runtime.is_some())
            .finish()
    }
}

async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let app = Router::new().fallback(routes::handle).with_state(shared);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("kant-testkit: API server stopped: {e}");
    }
}

fn resource_id<K: Resource<DynamicType = ()>>(store: &Store) -> ResId {
    let (g, v, p) = (K::group(&()), K::version(&()), K::plural(&()));
    store.lookup(&g, &v, &p).unwrap_or_else(|| {
        panic!("kant-testkit: {p}.{g}/{v} is not served; add it with ApiServer::register_resource")
    })
}

fn decode<K: DeserializeOwned>(obj: &Obj) -> K {
    serde_json::from_slice(&obj.json).unwrap_or_else(|e| {
        panic!(
            "kant-testkit: a stored object does not decode as {}: {e}",
            std::any::type_name::<K>()
        )
    })
}

impl ApiServer {
    fn from_parts(
        shared: Arc<Shared>,
        addr: SocketAddr,
        task: Option<AbortHandle>,
        runtime: Option<tokio::runtime::Runtime>,
        clocks: Option<Arc<CpuClocks>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                shared,
                addr,
                task,
                runtime,
                clocks,
            }),
        }
    }

    /// Starts a server on the caller's Tokio runtime, bound to `127.0.0.1:0`.
    ///
    /// # Panics
    /// If no local port can be bound.
    pub async fn start() -> ApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("kant-testkit: bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("kant-testkit: local address of the listener");
        let shared = Shared::new(addr);
        let task = tokio::spawn(serve(listener, shared.clone()));
        Self::from_parts(shared, addr, Some(task.abort_handle()), None, None)
    }

    /// Starts a server on its own multi-thread Tokio runtime with `worker_threads` worker
    /// threads (at least 1), so that its CPU time can be measured apart from the client's
    /// ([`ApiServer::cpu_time`]). Not async; may be called from inside or outside a runtime.
    ///
    /// # Panics
    /// If the runtime cannot be built or no local port can be bound.
    pub fn start_dedicated(worker_threads: usize) -> ApiServer {
        let clocks = Arc::new(CpuClocks::default());
        let (on_start, on_stop) = (clocks.clone(), clocks.clone());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("kant-testkit-apiserver")
            .enable_all()
            .on_thread_start(move || on_start.thread_started())
            .on_thread_stop(move || on_stop.thread_stopped())
            .build()
            .expect("kant-testkit: build the API server runtime");
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("kant-testkit: bind 127.0.0.1:0");
        std_listener
            .set_nonblocking(true)
            .expect("kant-testkit: non-blocking listener");
        let addr = std_listener
            .local_addr()
            .expect("kant-testkit: local address of the listener");
        let shared = Shared::new(addr);
        let for_task = shared.clone();
        let task = rt.spawn(async move {
            match tokio::net::TcpListener::from_std(std_listener) {
                Ok(l) => serve(l, for_task).await,
                Err(e) => eprintln!("kant-testkit: cannot use the listener: {e}"),
            }
        });
        Self::from_parts(
            shared,
            addr,
            Some(task.abort_handle()),
            Some(rt),
            Some(clocks),
        )
    }

    /// CPU time consumed so far by the dedicated runtime's threads (all of its threads,
    /// workers and any blocking-pool threads, including those that have exited). Zero for a
    /// server started with [`ApiServer::start`], whose work runs on the caller's threads, and
    /// on platforms other than Linux.
    pub fn cpu_time(&self) -> Duration {
        self.inner
            .clocks
            .as_ref()
            .map_or(Duration::ZERO, |c| c.total())
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// A kube client configuration for this server: plain HTTP, no authentication, default
    /// namespace `default`, kube's default retry policy (which retries 429/503/504 up to 15
    /// times with backoff; set `default_retry = false` to see those codes at once).
    pub fn config(&self) -> kube::Config {
        let uri: axum::http::Uri = self
            .url()
            .parse()
            .expect("kant-testkit: the server URL is a valid URI");
        let mut c = kube::Config::new(uri);
        c.default_namespace = "default".to_string();
        c
    }

    /// A kube client for this server (see [`ApiServer::config`]). Must be called inside a
    /// Tokio runtime (kube's client spawns its buffer task).
    ///
    /// # Panics
    /// If the client cannot be built.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("kant-testkit: build a kube client")
    }

    /// A kubeconfig file's contents pointing at this server (context `kant-testkit`,
    /// namespace `default`, no credentials), for a CLI's `--kubeconfig`.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: kant-testkit\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: kant-testkit\n  user: {{}}\n\
             contexts:\n\
             - name: kant-testkit\n  context:\n    cluster: kant-testkit\n    user: kant-testkit\n    namespace: default\n\
             current-context: kant-testkit\n\
             preferences: {{}}\n",
            url = self.url()
        )
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Serves one more resource (or redescribes a served one), e.g. a CRD of a test.
    pub fn register_resource(&self, def: ResourceDef) {
        lock(&self.shared().store).register(def);
    }

    /// The current resourceVersion (the last revision written).
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared().store).rv
    }

    // ---- typed store access (no HTTP; same events as the API) ----

    /// Creates an object as a create through the API would, except that `status` is stored
    /// as given (pods without `status.phase` still get `Pending`). A namespaced object without
    /// a namespace goes to `default`.
    ///
    /// # Panics
    /// If the resource is not served or the create fails (e.g. it already exists).
    pub fn create<K>(&self, obj: &K) -> K
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let v = serde_json::to_value(obj).expect("kant-testkit: serialize the object");
        let mut store = lock(&self.shared().store);
        let id = resource_id::<K>(&store);
        let res = ops::create(
            &mut store,
            id,
            obj.meta().namespace.as_deref(),
            v,
            Writer::Direct,
        );
        drop(store);
        match res {
            Ok(o) => decode(&o),
            Err(e) => panic!(
                "kant-testkit: create {} failed: {}",
                K::kind(&()),
                e.message
            ),
        }
    }

    /// The stored object, if any (`ns` is ignored for cluster-scoped resources; `None`
    /// means `default` for namespaced ones).
    pub fn get<K>(&self, ns: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let store = lock(&self.shared().store);
        let id = resource_id::<K>(&store);
        let obj = store.get(id, &store.key(id, Some(ns.unwrap_or("default")), name));
        drop(store);
        obj.map(|o| decode(&o))
    }

    /// Every stored object of the resource, all namespaces, in (namespace, name) order.
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let store = lock(&self.shared().store);
        let id = resource_id::<K>(&store);
        let objs: Vec<Arc<Obj>> = store.res(id).objects.values().cloned().collect();
        drop(store);
        objs.iter().map(|o| decode(o)).collect()
    }

    /// Replaces an object (metadata, spec and status as given; server-owned metadata kept).
    /// A set `metadata.resourceVersion` is a precondition.
    ///
    /// # Panics
    /// If the object does not exist or the precondition fails.
    pub fn update<K>(&self, obj: &K) -> K
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let v = serde_json::to_value(obj).expect("kant-testkit: serialize the object");
        let name = obj.meta().name.clone().unwrap_or_default();
        let mut store = lock(&self.shared().store);
        let id = resource_id::<K>(&store);
        let ns = store.def(id).namespaced.then(|| {
            obj.meta()
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into())
        });
        let res = ops::replace(
            &mut store,
            id,
            ns.as_deref(),
            &name,
            v,
            Target::Main,
            Writer::Direct,
        );
        drop(store);
        match res {
            Ok(o) => decode(&o),
            Err(e) => panic!(
                "kant-testkit: update {} failed: {}",
                K::kind(&()),
                e.message
            ),
        }
    }

    /// Deletes an object at once, a pod even if bound (as its kubelet's final delete, or a
    /// forced one); returns its last state, or `None` if it did not exist (`ns` as for
    /// [`ApiServer::get`]).
    pub fn delete<K>(&self, ns: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let mut store = lock(&self.shared().store);
        let id = resource_id::<K>(&store);
        let res = ops::delete(&mut store, id, Some(ns.unwrap_or("default")), name, None);
        drop(store);
        res.ok().map(|o| decode(&o))
    }

    /// Sets a pod's `status.phase` (e.g. `Running`, as a kubelet would).
    ///
    /// # Panics
    /// If the pod does not exist.
    pub fn set_pod_phase(&self, ns: &str, name: &str, phase: &str) {
        let mut store = lock(&self.shared().store);
        let pods_id = store
            .lookup("", "v1", "pods")
            .expect("kant-testkit: pods are served");
        let res = pods::set_phase(&mut store, pods_id, ns, name, phase);
        drop(store);
        if let Err(e) = res {
            panic!("kant-testkit: set_pod_phase failed: {}", e.message);
        }
    }

    // ---- fault and latency injection ----

    /// The next `n` binding requests for this pod answer `http_code` (0 means 409 Conflict)
    /// with a Status of the matching reason, without binding it. Note that kube's default
    /// client retries 429, 503 and 504 by itself.
    pub fn fail_next_bindings(&self, namespace: &str, pod: &str, n: usize, http_code: u16) {
        let http_code = if http_code == 0 { 409 } else { http_code };
        self.fail_next(
            "create",
            "pods/binding",
            Some(namespace),
            Some(pod),
            n,
            http_code,
        );
    }

    /// The next `n` requests with this verb and resource (`pods/status`, `leases`, ...),
    /// optionally only for one namespace and/or name, answer `http_code` with a Status of the
    /// matching reason, and change nothing.
    pub fn fail_next(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        n: usize,
        http_code: u16,
    ) {
        self.inject(verb, resource, namespace, name, n, false, Some(http_code));
    }

    /// The next `n` matching requests (as for [`ApiServer::fail_next`]) are read and never
    /// answered: the connection stays open and silent, as with a server or a network that
    /// stopped mid-request, until the client gives up. They change nothing.
    pub fn hang_next(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        n: usize,
    ) {
        self.inject(verb, resource, namespace, name, n, false, None);
    }

    /// The next `n` matching requests (as for [`ApiServer::fail_next`]) take effect, watch
    /// events included, but their answer is lost: `Some(code)` answers that code with a
    /// Status of the matching reason instead (as the real server's 504 when its own timeout
    /// fires after the write was committed), `None` nothing at all (as [`ApiServer::hang_next`]).
    pub fn lose_next_answers(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        n: usize,
        answer: Option<u16>,
    ) {
        self.inject(verb, resource, namespace, name, n, true, answer);
    }

    #[allow(clippy::too_many_arguments)]
    fn inject(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        n: usize,
        applied: bool,
        code: Option<u16>,
    ) {
        if n == 0 {
            return;
        }
        lock(&self.shared().faults).push(Fault {
            verb: verb.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            remaining: n,
            applied,
            code,
        });
    }

    /// Adds this delay before every request is handled (zero to turn off).
    pub fn set_latency(&self, latency: Duration) {
        self.shared()
            .latency_ns
            .store(latency.as_nanos() as u64, Ordering::Relaxed);
    }

    /// How long a pod deleted or evicted through the API stays terminating before its
    /// kubelet (played by the server) removes it; default zero: removed right after it is
    /// marked. Applies to deletions made afterwards. Only a pod bound to a node and not
    /// finished terminates; [`ApiServer::delete`] always removes at once.
    pub fn set_termination_delay(&self, delay: Duration) {
        self.shared()
            .termination_ns
            .store(delay.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Interval between bookmarks on watches that asked for them (default 1 s); applies to
    /// watches started afterwards.
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.shared()
            .bookmark_ns
            .store(interval.as_nanos().max(1) as u64, Ordering::Relaxed);
    }

    /// How many change events are kept per resource for watches to resume from (default
    /// [`DEFAULT_HISTORY_LIMIT`]); a watch from before the oldest kept event gets 410.
    pub fn set_history_limit(&self, events: usize) {
        lock(&self.shared().store).history_limit = events.max(1);
    }

    /// Watch streams fall behind: they hold every event (and bookmark) back, in order, until
    /// [`ApiServer::resume_watches`], as a lagging watch cache does; writes are answered
    /// meanwhile, so a client hears of its own write before its watch shows it. Lists and
    /// gets are current.
    pub fn pause_watches(&self) {
        self.shared().paused_tx.send_replace(true);
    }

    /// Watch streams deliver what they held back, and keep up again.
    pub fn resume_watches(&self) {
        self.shared().paused_tx.send_replace(false);
    }

    /// Ends every open watch stream abruptly (the connection is cut mid-stream); clients must
    /// reconnect.
    pub fn drop_watches(&self) {
        self.shared().drop_tx.send_modify(|e| *e += 1);
    }

    /// The next `n` bindings are never answered and are carried out `delay` later, as a
    /// real API server's handler goes on after its request timed out, or an etcd write in
    /// flight commits after its client went away.
    pub fn land_next_bindings_late(&self, n: usize, delay: Duration) {
        *lock(&self.shared().late_bindings) = (n, delay);
    }

    /// Forgets the watch history and list snapshots: a watch from any earlier
    /// resourceVersion gets a 410 ERROR event, and an earlier `continue` token a 410.
    pub fn compact(&self) {
        lock(&self.shared().store).compact();
    }

    // ---- observation ----

    /// Request counts by (verb, resource), e.g. `("create", "pods/binding")`.
    pub fn request_counts(&self) -> BTreeMap<(String, String), u64> {
        lock(&self.shared().observed).counts.clone()
    }

    /// The count of one (verb, resource).
    pub fn request_count(&self, verb: &str, resource: &str) -> u64 {
        lock(&self.shared().observed)
            .counts
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared().observed).log.clone()
    }

    /// Forgets the request counts and log.
    pub fn clear_requests(&self) {
        let mut o = lock(&self.shared().observed);
        o.counts.clear();
        o.log.clear();
    }

    /// Successful bindings, in the order they happened: (namespace, pod, node).
    pub fn bindings(&self) -> Vec<(String, String, String)> {
        lock(&self.shared().store).bindings.clone()
    }

    /// Watches currently open.
    pub fn open_watches(&self) -> usize {
        lock(&self.shared().store).open_watches()
    }

    /// Waits until at least `n` watches are open; false on timeout.
    pub async fn wait_for_watches(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.open_watches() >= n {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
