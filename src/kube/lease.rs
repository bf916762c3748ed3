//! Leader election on a shard's Lease, as client-go's leader election does it.
//!
//! - Every write of the Lease is a replace that carries the resourceVersion just read, so
//!   two replicas racing for it cannot both win: the second gets a 409.
//! - A Lease held by another replica counts as expired only once its record has not
//!   changed for [`LEASE_DURATION`] on this replica's own clock, since it was last seen to
//!   change; the holder's `renewTime` is never compared with this replica's clock, so
//!   clocks that differ between nodes cannot depose a leader.
//! - A leader renews every [`RETRY_PERIOD`], and stands down once no renewal has landed
//!   for [`RENEW_DEADLINE`], counted from when the last write that landed was sent: before
//!   any other replica can see the Lease expire. Its calls are waited for until that
//!   deadline, not each for a retry period, and a renewal writes over the Lease its last
//!   write returned (one call, where client-go reads the Lease first): an API server
//!   answering each call within about half the deadline keeps its leader.
//! - A replica that takes over an expired Lease, or its own identity's record left by an
//!   earlier run, is told so ([`Attempt::TookOver`]): the leader it replaces stood down
//!   unheard, and bindings it sent may still land.
//!
//! The Lease also carries what its shard schedules ([`ShardClaim`], as annotations), so
//! that a leader can find the leaders of other shards configured to schedule the same GPU
//! models (each would place pods on the same nodes without seeing the other's bindings in
//! flight), and the GPU models some shard is configured for: a pod naming several goes to
//! the shard of one of those.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ListParams, PostParams};
use tokio::time::Instant;

/// Every shard's Lease is named this and the shard's name.
pub const LEASE_PREFIX: &str = "kant-scheduler-";

/// How long a Lease whose record does not change is held.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

/// How long a leader leads without a renewal landing.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// How often a standby tries for the Lease and a leader renews it.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// How long a leader told to stop tries to give the Lease up (a read and a write).
pub const RELEASE_WITHIN: Duration = Duration::from_secs(4);

/// What one try for the Lease found.
#[derive(Debug)]
pub enum Attempt {
    /// This replica holds it: renewed, or taken while free, by a write sent at the
    /// instant given. A leader's renewal counts from then: the write may land, and be
    /// seen by a standby, any time after.
    Holds(Instant),
    /// This replica took it from the replica named, whose record had expired, or found
    /// its own identity's record, written by an earlier run of it (a restarted container):
    /// that one may have sent bindings that are still to land ([`run`](super::run) waits
    /// for them). The write was sent at the instant given, as for [`Attempt::Holds`].
    TookOver(String, Instant),
    /// Another replica holds it and has renewed it within its duration; with the claim
    /// its Lease carries where that differs from this replica's (two Deployments given the
    /// same `--shard`, or a rollout changing the shard's flags).
    HeldByOther(String, Option<ShardClaim>),
    /// The API server did not answer, refused, or another write came in between.
    Failed(String),
}

/// How recently another shard's Lease must have been renewed, by this replica's clock, for
/// its holder to count as leading (a loose bound: clocks between nodes differ a little).
const CLAIM_FRESHNESS: SignedDuration = SignedDuration::from_secs(60);

/// How long a Lease may go unrenewed before its shard counts as removed (a shard down
/// for less keeps the pods naming its GPU models first).
const SHARD_GONE_AFTER: SignedDuration = SignedDuration::from_hours(1);

const SCHEDULER_NAME_ANNOTATION: &str = "kant.io/scheduler-name";
const GPU_MODELS_ANNOTATION: &str = "kant.io/gpu-models";
const DEFAULT_SHARD_ANNOTATION: &str = "kant.io/default-shard";

/// What a shard schedules, as its Lease tells the other shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardClaim {
    /// The `spec.schedulerName` of its pods: shards of different schedulers share nodes as
    /// any two schedulers do.
    pub scheduler_name: String,
    /// Its GPU models; empty: every model.
    pub gpu_models: Vec<String>,
    /// It also takes the pods that name no GPU model.
    pub default_shard: bool,
}

impl ShardClaim {
    fn annotations(&self) -> BTreeMap<String, String> {
        let models = if self.gpu_models.is_empty() {
            "*".to_owned()
        } else {
            self.gpu_models.join(",")
        };
        BTreeMap::from([
            (
                SCHEDULER_NAME_ANNOTATION.into(),
                self.scheduler_name.clone(),
            ),
            (GPU_MODELS_ANNOTATION.into(), models),
            (
                DEFAULT_SHARD_ANNOTATION.into(),
                self.default_shard.to_string(),
            ),
        ])
    }

    /// The claim a Lease carries; `None` for one without it (another program's, or a
    /// replica of an older version).
    fn of(lease: &Lease) -> Option<ShardClaim> {
        let annotations = lease.metadata.annotations.as_ref()?;
        let models = annotations.get(GPU_MODELS_ANNOTATION)?;
        Some(ShardClaim {
            scheduler_name: annotations.get(SCHEDULER_NAME_ANNOTATION)?.clone(),
            gpu_models: match models.as_str() {
                "*" => Vec::new(),
                listed => listed.split(',').map(str::to_owned).collect(),
            },
            default_shard: annotations.get(DEFAULT_SHARD_ANNOTATION)? == "true",
        })
    }

    /// What this shard and `other` both schedule, in words: their GPU models in common (all
    /// of one's where the other takes every model), and the pods that name none where both
    /// take them. Empty where they share nothing.
    fn overlap(&self, other: &ShardClaim) -> Vec<String> {
        if self.scheduler_name != other.scheduler_name {
            return Vec::new();
        }
        let mut shared: Vec<String> =
            match (self.gpu_models.is_empty(), other.gpu_models.is_empty()) {
                (true, true) => vec!["every GPU model".to_owned()],
                (true, false) => other.gpu_models.clone(),
                (false, true) => self.gpu_models.clone(),
                (false, false) => (self.gpu_models.iter())
                    .filter(|m| other.gpu_models.contains(m))
                    .cloned()
                    .collect(),
            };
        if self.default_shard && other.default_shard {
            shared.push("the pods that name no GPU model".to_owned());
        }
        shared
    }
}

impl std::fmt::Display for ShardClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gpu_models.as_slice() {
            [] => write!(f, "every GPU model")?,
            models => write!(f, "GPU models {}", models.join(", "))?,
        }
        if self.default_shard {
            write!(f, " and the pods that name none")?;
        }
        write!(f, " (schedulerName {})", self.scheduler_name)
    }
}

/// A shard of this scheduler as its Lease shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSeen {
    pub lease: String,
    pub claim: ShardClaim,
    /// Whether a leader holds it and renewed it within [`CLAIM_FRESHNESS`].
    pub leading: bool,
    /// Whether it was renewed within [`SHARD_GONE_AFTER`]: a Lease left longer is a shard
    /// removed (or the one of a run before the cluster was sharded).
    pub current: bool,
}

/// The shards' Leases as one shard's leader reads them, beside its own.
#[derive(Clone)]
pub struct ShardLeases {
    leases: Api<Lease>,
    /// This shard's Lease.
    name: String,
    /// What this shard schedules.
    claim: ShardClaim,
}

impl ShardLeases {
    /// This shard's Lease.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every shard of this scheduler that a Lease shows, this one's included, led or not:
    /// what each is configured to schedule, and whether it is still current. The listing
    /// is waited for until `deadline`.
    pub async fn read(&self, deadline: Instant) -> Result<Vec<ShardSeen>, String> {
        let leases = within(deadline, self.leases.list(&ListParams::default()))
            .await
            .map_err(|failure| failure.why)?;
        let now = Timestamp::now();
        let renewed_within = |lease: &Lease, within: SignedDuration| {
            let renewed = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref());
            renewed.is_some_and(|t| now.duration_since(t.0).abs() < within)
        };
        let leading = |lease: &Lease| {
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref());
            holder.is_some_and(|h| !h.is_empty()) && renewed_within(lease, CLAIM_FRESHNESS)
        };
        Ok((leases.items.iter())
            .filter_map(|lease| {
                let name = lease.metadata.name.as_deref()?;
                let claim = ShardClaim::of(lease)?;
                let ours = name.starts_with(LEASE_PREFIX)
                    && claim.scheduler_name == self.claim.scheduler_name;
                ours.then(|| ShardSeen {
                    lease: name.to_owned(),
                    claim,
                    leading: leading(lease),
                    current: renewed_within(lease, SHARD_GONE_AFTER),
                })
            })
            .collect())
    }

    /// Of `shards`, the other shards' Leases held and renewed within [`CLAIM_FRESHNESS`]
    /// whose claims overlap this one's: each Lease's name, and what both schedule
    /// ([`ShardClaim::overlap`]).
    pub fn overlapping(&self, shards: &[ShardSeen]) -> Vec<(String, Vec<String>)> {
        (shards.iter())
            .filter(|shard| shard.leading && shard.lease != self.name)
            .filter_map(|shard| {
                let shared = self.claim.overlap(&shard.claim);
                (!shared.is_empty()).then(|| (shard.lease.clone(), shared))
            })
            .collect()
    }
}

/// One replica's view of one Lease.
pub struct Elector {
    leases: Api<Lease>,
    name: String,
    identity: String,
    /// Written on the Lease with each of this replica's records.
    claim: ShardClaim,
    /// The Lease's record as last read, and when it was first seen so.
    observed: Option<(LeaseSpec, Instant)>,
    /// Whether this replica has written its record since it started.
    held: bool,
    /// The Lease as this replica's last write of it came back, while no write in between
    /// is known: what a renewal replaces.
    last_written: Option<Lease>,
}

impl Elector {
    pub fn new(leases: Api<Lease>, name: String, identity: String, claim: ShardClaim) -> Self {
        Self {
            leases,
            name,
            identity,
            claim,
            observed: None,
            held: false,
            last_written: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes the Lease if it is free or expired, or renews it if this replica holds it;
    /// the API server's answers are waited for until `deadline`.
    pub async fn try_acquire_or_renew(&mut self, deadline: Instant) -> Attempt {
        // A leader renews the Lease as its last write came back: one call, where reading
        // it first would take two. A write in between (another replica's) makes it a
        // 409, a Lease deleted a 404, and the Lease is read anew.
        if let Some(lease) = self.last_written.clone() {
            match self.replace(self.claimed(lease, true), deadline).await {
                (_, Err(Failure { stale: true, .. })) => self.last_written = None,
                (sent, replaced) => return self.written(sent, replaced),
            }
        }
        let lease = match within(deadline, self.leases.get_opt(&self.name)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let now = MicroTime(Timestamp::now());
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        annotations: Some(self.claim.annotations()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.record(now.clone(), now, 0)),
                };
                let sent = Instant::now();
                let created =
                    within(deadline, self.leases.create(&PostParams::default(), &lease)).await;
                return self.written(sent, created);
            }
            Err(failure) => return Attempt::Failed(failure.why),
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let seen_at = self.observe(&spec);
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let mine = holder == Some(self.identity.as_str());
        if let Some(other) = holder.filter(|_| !mine) {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(LEASE_DURATION, Duration::from_secs);
            if seen_at.elapsed() < duration {
                let differing = ShardClaim::of(&lease).filter(|claim| *claim != self.claim);
                return Attempt::HeldByOther(other.to_owned(), differing);
            }
        }
        // A record of this identity that this process never wrote is an earlier run's
        // (a restarted container keeps its pod's name): that run may have bindings in
        // flight too.
        let predecessor = holder.filter(|_| !mine || !self.held).map(str::to_owned);
        let (sent, replaced) = self.replace(self.claimed(lease, mine), deadline).await;
        match (self.written(sent, replaced), predecessor) {
            (Attempt::Holds(sent), Some(from)) => Attempt::TookOver(from, sent),
            (attempt, _) => attempt,
        }
    }

    /// `lease`, as read, with this replica's record: renewed if `mine`, else taken.
    fn claimed(&self, lease: Lease, mine: bool) -> Lease {
        let now = MicroTime(Timestamp::now());
        let spec = lease.spec.clone().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0);
        let record = match mine {
            true => self.record(
                spec.acquire_time.unwrap_or_else(|| now.clone()),
                now,
                transitions,
            ),
            false => self.record(now.clone(), now, transitions.saturating_add(1)),
        };
        let mut claimed = Lease {
            spec: Some(record),
            ..lease
        };
        (claimed
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new))
        .extend(self.claim.annotations());
        claimed
    }

    /// Writes `lease` over the Lease; returns when the write was sent, and what came of
    /// it. The write carries the resourceVersion it was read at: a write in between
    /// makes it a 409.
    async fn replace(&self, lease: Lease, deadline: Instant) -> (Instant, Result<Lease, Failure>) {
        let params = PostParams::default();
        let sent = Instant::now();
        let replace = self.leases.replace(&self.name, &params, &lease);
        (sent, within(deadline, replace).await)
    }

    /// What the shards' check reads the Leases with, apart from this elector, so that
    /// a slow listing never holds a renewal back.
    pub fn shard_leases(&self) -> ShardLeases {
        ShardLeases {
            leases: self.leases.clone(),
            name: self.name.clone(),
            claim: self.claim.clone(),
        }
    }

    /// Gives the Lease up, if this replica holds it, so that a standby takes it at once
    /// rather than after it expires.
    pub async fn release(&mut self) {
        let deadline = Instant::now() + RELEASE_WITHIN;
        let Ok(Some(lease)) = within(deadline, self.leases.get_opt(&self.name)).await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let released = Lease {
            spec: Some(LeaseSpec {
                holder_identity: None,
                ..spec
            }),
            ..lease
        };
        let replaced = within(
            deadline,
            self.leases
                .replace(&self.name, &PostParams::default(), &released),
        )
        .await;
        if let Err(failure) = replaced {
            tracing::warn!("lease {}: not released ({})", self.name, failure.why);
        }
    }

    /// This replica's record, acquired at `acquired`.
    fn record(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Notes the record read; returns when it was first seen as it is.
    fn observe(&mut self, spec: &LeaseSpec) -> Instant {
        match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((spec.clone(), at));
                at
            }
        }
    }

    /// The outcome of writing this replica's record.
    fn written(&mut self, sent: Instant, written: Result<Lease, Failure>) -> Attempt {
        match written {
            Ok(lease) => {
                self.observe(&lease.spec.clone().unwrap_or_default());
                self.held = true;
                self.last_written = Some(lease);
                Attempt::Holds(sent)
            }
            Err(failure) => Attempt::Failed(failure.why),
        }
    }
}

/// Why a call to the API server about Leases failed.
struct Failure {
    /// The Lease changed since it was read (409) or is gone (404).
    stale: bool,
    why: String,
}

/// A call to the API server, given up at `deadline`.
async fn within<T>(
    deadline: Instant,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, Failure> {
    let waited = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout_at(deadline, call).await {
        Ok(answer) => answer.map_err(|e| Failure {
            stale: matches!(&e, kube::Error::Api(status) if [404, 409].contains(&status.code)),
            why: e.to_string(),
        }),
        Err(_) => Err(Failure {
            stale: false,
            why: format!("no answer within {waited:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(models: &[&str], default_shard: bool) -> ShardClaim {
        ShardClaim {
            scheduler_name: "kant-scheduler".into(),
            gpu_models: models.iter().map(|m| m.to_string()).collect(),
            default_shard,
        }
    }

    #[test]
    fn shards_overlap_on_their_common_models_and_on_pods_naming_none() {
        let h100 = claim(&["H100"], false);
        let both = claim(&["H100", "A100"], true);
        let all = claim(&[], true);
        assert_eq!(h100.overlap(&claim(&["A100"], false)), Vec::<String>::new());
        assert_eq!(h100.overlap(&both), ["H100"]);
        assert_eq!(both.overlap(&h100), ["H100"]);
        assert_eq!(
            both.overlap(&all),
            ["H100", "A100", "the pods that name no GPU model"]
        );
        assert_eq!(
            all.overlap(&all),
            ["every GPU model", "the pods that name no GPU model"]
        );
        let other_scheduler = ShardClaim {
            scheduler_name: "kant-test".into(),
            ..all.clone()
        };
        assert!(all.overlap(&other_scheduler).is_empty());
    }

    #[test]
    fn a_claim_reads_back_from_its_leases_annotations() {
        for written in [claim(&["H100", "A100"], false), claim(&[], true)] {
            let lease = Lease {
                metadata: ObjectMeta {
                    annotations: Some(written.annotations()),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            assert_eq!(ShardClaim::of(&lease), Some(written));
        }
        assert_eq!(ShardClaim::of(&Lease::default()), None);
    }
}
