//! The watch streams: pods, nodes, PodGroups, Queues, and the PersistentVolumeClaims,
//! PersistentVolumes and StorageClasses that say where pods' volumes let them run; each a
//! kube-rs watcher (list, then watch from the list's resourceVersion with bookmarks;
//! relist on 410 Gone) whose events are forwarded to the scheduling loop. A stream that
//! fails is retried with backoff; the loop never waits on it. Every listing is a quorum
//! read (kube's default `ListSemantic::MostRecent`), never an API server's cache. The pod
//! watch lists anew when asked ([`Relist`]): a replica taking the lead does, so that it
//! places nothing on a watch running behind (see [`spawn_all`]).
//!
//! Pods, nodes and the volume kinds are forwarded as they come, less what is never read
//! (managed fields, a node's list of images). A volume kind this replica may not read
//! counts as empty, as a missing custom resource does: its pods wait, saying which claim
//! they miss. PodGroups and Queues are watched untyped and
//! read one by one ([`crd::read`]), so that one object that cannot be read never fails a
//! whole listing (which would keep the caches from syncing, and so stop all scheduling):
//! it is logged, naming it, and counts as absent.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::crd::{self, PodGroup, Queue};
use super::world::Input;

/// A request to a watch to list anew: once `asked` is notified, the watch sends `begun`
/// and starts over with a fresh listing, so that the listing that follows `begun` in the
/// loop's inputs was read after the request.
struct Relist {
    asked: Arc<Notify>,
    begun: fn() -> Input,
}

/// Starts one watcher per kind; every event goes to `inputs`. The tasks end when the
/// loop hangs up. `relist_pods` makes the pod watch list anew: a standby's watch may run
/// seconds behind the API server (a slow connection, a busy API server), and the leader
/// it replaces may have bound pods it has not seen yet.
pub fn spawn_all(
    client: &Client,
    inputs: &Sender<Input>,
    relist_pods: Arc<Notify>,
) -> Vec<JoinHandle<()>> {
    vec![
        spawn(
            Api::<Pod>::all(client.clone()),
            "Pod",
            inputs.clone(),
            |e| Some(Input::Pod(Box::new(slim(e, |_| {})))),
            false,
            Some(Relist {
                asked: relist_pods,
                begun: || Input::PodsListedAnew,
            }),
        ),
        spawn(
            Api::<Node>::all(client.clone()),
            "Node",
            inputs.clone(),
            |e| Some(Input::Node(Box::new(slim(e, without_images)))),
            false,
            None,
        ),
        spawn(
            untyped::<PodGroup>(client),
            "PodGroup",
            inputs.clone(),
            |e| read_event(e).map(|e| Input::PodGroup(Box::new(e))),
            true,
            None,
        ),
        spawn(
            untyped::<Queue>(client),
            "Queue",
            inputs.clone(),
            |e| read_event(e).map(|e| Input::Queue(Box::new(e))),
            true,
            None,
        ),
        spawn(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            "PersistentVolumeClaim",
            inputs.clone(),
            |e| Some(Input::Claim(Box::new(e))),
            true,
            None,
        ),
        spawn(
            Api::<PersistentVolume>::all(client.clone()),
            "PersistentVolume",
            inputs.clone(),
            |e| Some(Input::Volume(Box::new(e))),
            true,
            None,
        ),
        spawn(
            Api::<StorageClass>::all(client.clone()),
            "StorageClass",
            inputs.clone(),
            |e| Some(Input::StorageClass(Box::new(e))),
            true,
            None,
        ),
    ]
}

/// The event with its object stripped of what is never read and may be large: its
/// managed fields, and what `strip` takes. A relist holds every object until it is done,
/// so on a cluster of many pods this is most of the memory it takes.
fn slim<K: Resource>(mut event: watcher::Event<K>, strip: fn(&mut K)) -> watcher::Event<K> {
    if let watcher::Event::Apply(object)
    | watcher::Event::InitApply(object)
    | watcher::Event::Delete(object) = &mut event
    {
        object.meta_mut().managed_fields = None;
        strip(object);
    }
    event
}

/// A node less the images its kubelet lists (often hundreds of names).
fn without_images(node: &mut Node) {
    if let Some(status) = &mut node.status {
        status.images = None;
    }
}

/// The objects of a custom resource, in every namespace, as the API server serves them.
fn untyped<K: Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<K>(&()))
}

/// A custom resource's event, with its object read. One that cannot be read is left out
/// of a listing, and a change that makes it unreadable is its deletion.
fn read_event<K>(event: watcher::Event<DynamicObject>) -> Option<watcher::Event<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Default,
{
    let read = |object: DynamicObject| {
        crd::read(object)
            .map_err(|e| tracing::warn!("{e}; ignored until it can be read"))
            .ok()
    };
    Some(match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(read(object)?),
        watcher::Event::Apply(object) => {
            let metadata = object.metadata.clone();
            match read(object) {
                Some(object) => watcher::Event::Apply(object),
                None => watcher::Event::Delete(named(metadata)),
            }
        }
        // Only its name matters.
        watcher::Event::Delete(object) => watcher::Event::Delete(named(object.metadata)),
    })
}

/// An object with this metadata and nothing else.
fn named<K: Resource + Default>(metadata: ObjectMeta) -> K {
    let mut object = K::default();
    *object.meta_mut() = metadata;
    object
}

/// How long one watch call lasts before it is made again (from the last version seen),
/// and so, 5 s more, how long a watch may go without any event before its connection is
/// taken for dead. A connection lost without a reset (an API server gone behind a load
/// balancer, a NAT entry dropped) would otherwise leave this replica placing on what it
/// saw up to 295 s before (kube's default); client-go's HTTP/2 pings notice within 45 s.
pub(super) const WATCH_TIMEOUT_S: u32 = 60;

/// Forwards one watcher's events, each turned into an input by `input` (`None`: nothing
/// to forward). With `optional`, a kind whose resource is not installed (its CRD is
/// absent: 404) or not readable (403) when first listed counts as an empty listing, so
/// that scheduling does not wait for it; the watcher keeps retrying and picks the objects
/// up once it can. Once a listing has come, a relist that fails so (an API server just
/// restarted serves custom resources only once it has loaded them) keeps what was
/// listed, as an informer does, and is retried. With `relist`, the watch starts over when
/// asked.
fn spawn<K>(
    api: Api<K>,
    kind: &'static str,
    inputs: Sender<Input>,
    input: fn(watcher::Event<K>) -> Option<Input>,
    optional: bool,
    relist: Option<Relist>,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let config = watcher::Config::default().timeout(WATCH_TIMEOUT_S);
        let start = || {
            watcher(api.clone(), config.clone())
                .default_backoff()
                .boxed()
        };
        let mut stream = start();
        let (mut absent_reported, mut listed) = (false, false);
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = asked(relist.as_ref()) => {
                    let begun = relist.as_ref().map(|relist| (relist.begun)());
                    if begun.is_some_and(|begun| inputs.send(begun).is_err()) {
                        return;
                    }
                    stream = start();
                    continue;
                }
            };
            let Some(next) = next else { return };
            let event = match next {
                Ok(event) => event,
                Err(e) => {
                    // Not installed (404), or not readable (403: RBAC not applied).
                    let missing = matches!(
                        &e,
                        watcher::Error::InitialListFailed(kube::Error::Api(status))
                            if status.code == 404 || status.code == 403
                    );
                    // An optional kind not (yet) there is reported once; a required one
                    // that cannot be listed is reported at every try.
                    let absent = optional && missing && !listed;
                    if absent && !absent_reported {
                        absent_reported = true;
                        tracing::warn!(
                            "{kind}: cannot list it ({e}); treated as empty until it can be read"
                        );
                        let empty = [watcher::Event::Init, watcher::Event::InitDone];
                        if empty
                            .into_iter()
                            .filter_map(input)
                            .any(|e| inputs.send(e).is_err())
                        {
                            return;
                        }
                    } else if !absent {
                        tracing::warn!("{kind} watch: {e}; retrying");
                    }
                    continue;
                }
            };
            listed |= matches!(event, watcher::Event::InitDone);
            if let Some(event) = input(event)
                && inputs.send(event).is_err()
            {
                return;
            }
        }
    })
}

/// Resolves once the watch is asked to list anew; never without `relist`.
async fn asked(relist: Option<&Relist>) {
    match relist {
        Some(relist) => relist.asked.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::captured_log::CapturedLog;

    /// Nodes that cannot be listed (403: the ClusterRole lacks them) keep every pod from
    /// being scheduled: the log must say why, while the watch keeps trying.
    #[tokio::test]
    async fn a_required_kind_that_cannot_be_listed_is_logged() {
        let log = CapturedLog::default();
        let subscriber = log.subscriber();
        let _logging = tracing::subscriber::set_default(subscriber);
        let server = kant_testkit::ApiServer::start().await;
        server.fail_next("list", "nodes", None, None, 1, 403);
        let (inputs, events) = std::sync::mpsc::channel();
        let task = spawn(
            Api::<Node>::all(server.client()),
            "Node",
            inputs,
            |e| Some(Input::Node(Box::new(e))),
            false,
            None,
        );
        let listed = async {
            loop {
                if let Ok(Input::Node(event)) = events.try_recv()
                    && matches!(*event, watcher::Event::InitDone)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), listed)
            .await
            .expect("nodes listed once the API server lets them be");
        task.abort();
        let text = log.text();
        assert!(
            text.contains("Node watch:") && text.contains("403"),
            "{text}"
        );
    }

    /// Managed fields (and a node's images) are dropped from every event; the rest stays.
    #[test]
    fn events_come_without_what_is_never_read() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "resourceVersion": "7",
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "status": {"images": [{"names": ["cuda:12"], "sizeBytes": 1}],
                "capacity": {"nvidia.com/gpu": "8"}}
        }))
        .unwrap();
        let event = slim(watcher::Event::InitApply(node), without_images);
        let watcher::Event::InitApply(node) = event else {
            panic!("the same kind of event");
        };
        assert_eq!(node.metadata.managed_fields, None);
        assert_eq!(node.metadata.resource_version.as_deref(), Some("7"));
        let status = node.status.unwrap();
        assert_eq!(status.images, None);
        assert!(status.capacity.unwrap().contains_key("nvidia.com/gpu"));
    }
}
