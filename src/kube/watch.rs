//! The watch streams: pods, nodes, PodGroups and Queues, each a kube-rs watcher (list,
//! then watch from the list's resourceVersion with bookmarks; relist on 410 Gone) whose
//! events are forwarded, unchanged, to the scheduling loop. A stream that fails is
//! retried with backoff; the loop never waits on it.

use std::fmt::Debug;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::crd::{PodGroup, Queue};
use super::world::Input;

/// Starts one watcher per kind; every event goes to `inputs`. The tasks end when the
/// loop hangs up.
pub fn spawn_all(client: &Client, inputs: &Sender<Input>) -> Vec<JoinHandle<()>> {
    vec![
        spawn(
            Api::<Pod>::all(client.clone()),
            inputs.clone(),
            |e| Input::Pod(Box::new(e)),
            false,
        ),
        spawn(
            Api::<Node>::all(client.clone()),
            inputs.clone(),
            |e| Input::Node(Box::new(e)),
            false,
        ),
        spawn(
            Api::<PodGroup>::all(client.clone()),
            inputs.clone(),
            |e| Input::PodGroup(Box::new(e)),
            true,
        ),
        spawn(
            Api::<Queue>::all(client.clone()),
            inputs.clone(),
            |e| Input::Queue(Box::new(e)),
            true,
        ),
    ]
}

/// Forwards one watcher's events. With `optional`, a kind whose resource is not installed
/// (its CRD is absent: 404) or not readable (403) counts as an empty listing, so that
/// scheduling does not wait for it; the watcher keeps retrying and picks the objects up
/// once it can.
fn spawn<K>(
    api: Api<K>,
    inputs: Sender<Input>,
    wrap: fn(watcher::Event<K>) -> Input,
    optional: bool,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    tokio::spawn(async move {
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let config = watcher::Config::default();
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut absent_reported = false;
        while let Some(next) = stream.next().await {
            let event = match next {
                Ok(event) => event,
                Err(e) => {
                    // Not installed (404), or not readable (403: RBAC not applied).
                    let missing = matches!(
                        &e,
                        watcher::Error::InitialListFailed(kube::Error::Api(status))
                            if status.code == 404 || status.code == 403
                    );
                    if optional && missing && !absent_reported {
                        absent_reported = true;
                        tracing::warn!(
                            "{kind}: cannot list it ({e}); treated as empty until it can be read"
                        );
                        let empty = [watcher::Event::Init, watcher::Event::InitDone];
                        if empty.into_iter().any(|e| inputs.send(wrap(e)).is_err()) {
                            return;
                        }
                    } else if !missing {
                        tracing::warn!("{kind} watch: {e}; retrying");
                    }
                    continue;
                }
            };
            if inputs.send(wrap(event)).is_err() {
                return;
            }
        }
    })
}
