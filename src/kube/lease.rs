//! Leader election on a shard's Lease, as client-go's leader election does it.
//!
//! - Every write of the Lease is a replace that carries the resourceVersion just read, so
//!   two replicas racing for it cannot both win: the second gets a 409.
//! - A Lease held by another replica counts as expired only once its record has not
//!   changed for [`LEASE_DURATION`] on this replica's own clock, since it was last seen to
//!   change; the holder's `renewTime` is never compared with this replica's clock, so
//!   clocks that differ between nodes cannot depose a leader.
//! - A leader renews every [`RETRY_PERIOD`], and stands down once no renewal has landed
//!   for [`RENEW_DEADLINE`]: before any other replica can see the Lease expire.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;

/// How long a Lease whose record does not change is held.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

/// How long a leader leads without a renewal landing.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// How often a standby tries for the Lease and a leader renews it; also the longest one
/// call to the API server is waited for.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// What one try for the Lease found.
#[derive(Debug)]
pub enum Attempt {
    /// This replica holds it: taken or renewed.
    Holds,
    /// Another replica holds it and has renewed it within its duration.
    HeldByOther(String),
    /// The API server did not answer, refused, or another write came in between.
    Failed(String),
}

/// One replica's view of one Lease.
pub struct Elector {
    leases: Api<Lease>,
    name: String,
    identity: String,
    /// The Lease's record as last read, and when it was first seen so.
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    pub fn new(leases: Api<Lease>, name: String, identity: String) -> Self {
        Self {
            leases,
            name,
            identity,
            observed: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes the Lease if it is free or expired, or renews it if this replica holds it.
    pub async fn try_acquire_or_renew(&mut self) -> Attempt {
        let now = MicroTime(Timestamp::now());
        let lease = match within(self.leases.get_opt(&self.name)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.record(now.clone(), now, 0)),
                };
                let created = within(self.leases.create(&PostParams::default(), &lease)).await;
                return self.written(created);
            }
            Err(e) => return Attempt::Failed(e),
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
                return Attempt::HeldByOther(other.to_owned());
            }
        }
        let record = match mine {
            true => self.record(
                spec.acquire_time.clone().unwrap_or_else(|| now.clone()),
                now,
                spec.lease_transitions.unwrap_or(0),
            ),
            false => self.record(
                now.clone(),
                now,
                spec.lease_transitions.unwrap_or(0).saturating_add(1),
            ),
        };
        // The replace carries the resourceVersion read: a write in between makes it a 409.
        let taken = Lease {
            spec: Some(record),
            ..lease
        };
        let replaced = within(
            self.leases
                .replace(&self.name, &PostParams::default(), &taken),
        )
        .await;
        self.written(replaced)
    }

    /// Gives the Lease up, if this replica holds it, so that a standby takes it at once
    /// rather than after it expires.
    pub async fn release(&mut self) {
        let Ok(Some(lease)) = within(self.leases.get_opt(&self.name)).await else {
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
            self.leases
                .replace(&self.name, &PostParams::default(), &released),
        )
        .await;
        if let Err(e) = replaced {
            tracing::warn!("lease {}: not released ({e})", self.name);
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
    fn written(&mut self, written: Result<Lease, String>) -> Attempt {
        match written {
            Ok(lease) => {
                self.observe(&lease.spec.unwrap_or_default());
                Attempt::Holds
            }
            Err(e) => Attempt::Failed(e),
        }
    }
}

/// A call to the API server, given up after [`RETRY_PERIOD`].
async fn within<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, String> {
    match tokio::time::timeout(RETRY_PERIOD, call).await {
        Ok(answer) => answer.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {RETRY_PERIOD:?}")),
    }
}
