//! What the world tells: why each waiting pod waits (its `PodScheduled` condition and a
//! `FailedScheduling` event, in kube-scheduler's words), the status of PodGroups and
//! Queues, and the live metrics. Explaining a queued job costs a pass over its pools'
//! nodes, so each job is explained at most once per `diagnose_every_ms` and only a few
//! jobs per round; a message is written only when it changed, or when writing it failed.

use std::collections::{BTreeMap, HashMap};

use crate::model::{JobId, MILLI_PER_GPU, thousandths};
use crate::queue::Oversubscribed;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::super::crd::{PodGroupPhase, PodGroupStatus, Queue, QueueStatus, ShardJobs};
use super::pods::{GroupKey, Hold, JobPhase, PodRef, PodState};
use super::{Output, Unwritten, World};

/// How often the slow figures (metrics report, PodGroup and Queue status) are refreshed.
const REFRESH_MS: u64 = 1_000;

/// In a sharded deployment, how often a shard writes its entry of a Queue's
/// `status.shards` though its counts did not change, and after how long without a write
/// an entry is of a shard that is gone (three missed writes: clocks that differ by minutes
/// between nodes do not matter).
const SHARD_ENTRY_REFRESH_MS: u64 = 5 * 60 * 1_000;
const SHARD_ENTRY_STALE_MS: u64 = 3 * SHARD_ENTRY_REFRESH_MS;

/// How a job's explanation counts the nodes left out for an invalid description.
const REFUSED_NODES: &str = "node(s) had an invalid description (see the node's events)";

pub(super) struct Reporter {
    diagnose_every_ms: u64,
    diagnoses_per_round: usize,
    /// The message last written on each pod, by uid.
    told: HashMap<String, String>,
    /// When each queued job was last explained.
    diagnosed: HashMap<JobId, u64>,
    /// Each PodGroup's status as last written, with the object's uid.
    groups: HashMap<GroupKey, (String, PodGroupStatus)>,
    /// Each Queue's status as last written, with the object's uid (one made again under
    /// its name has none yet).
    queues: HashMap<String, (String, QueueStatus)>,
    /// Since when each Queue whose spec is invalid has been (its condition's transition
    /// time).
    invalid_since: HashMap<String, u64>,
    /// The pools whose isolated quotas add up past their GPUs, as last warned of.
    oversubscribed: Vec<Oversubscribed>,
    last_refresh_ms: Option<u64>,
}

impl Reporter {
    pub fn new(diagnose_every_ms: u64, diagnoses_per_round: usize) -> Self {
        Self {
            diagnose_every_ms,
            diagnoses_per_round,
            told: HashMap::new(),
            diagnosed: HashMap::new(),
            groups: HashMap::new(),
            queues: HashMap::new(),
            invalid_since: HashMap::new(),
            oversubscribed: Vec::new(),
            last_refresh_ms: None,
        }
    }

    /// Whether a Queue's status differs from the one last written to this object (the
    /// Queue of this uid); it is recorded as written.
    fn queue_changed(&mut self, name: &str, uid: String, status: &QueueStatus) -> bool {
        let last = (self.queues.get(name))
            .filter(|(of, _)| *of == uid)
            .map(|(_, s)| s);
        if last.is_some_and(|last| last == status) {
            return false;
        }
        // Figures last named null are gone from the Queue once it shows the patch: a
        // status without them says the same, and is remembered, so that figures put back
        // on the Queue are named null again.
        let changed = last.is_none_or(|last| without_nulls(last) != *status);
        self.queues.insert(name.to_owned(), (uid, status.clone()));
        changed
    }
}

/// The status as the Queue shows it once a merge patch of it is applied: without the
/// figures it names null.
fn without_nulls(status: &QueueStatus) -> QueueStatus {
    let mut shown = status.clone();
    shown.allocated.retain(|_, figure| figure.is_some());
    shown.borrowed.retain(|_, figure| figure.is_some());
    shown
}

impl World {
    pub(super) fn report(&mut self, now_ms: u64) {
        self.report_held();
        self.observe(now_ms);
        let due = self
            .reporter
            .last_refresh_ms
            .is_none_or(|t| now_ms >= t + REFRESH_MS);
        if due {
            self.reporter.last_refresh_ms = Some(now_ms);
            self.explain_queued(now_ms);
            self.metrics.refresh(now_ms);
            self.report_groups();
            self.report_queues(now_ms);
            self.warn_isolated_oversubscription();
        }
    }

    /// Isolated quotas that add up past a pool's GPUs (Queues made so, or nodes gone) are
    /// warned of in the log when they come to be, and when they end, and exported.
    fn warn_isolated_oversubscription(&mut self) {
        let spec = self.scheduler.state().spec();
        let now = self.scheduler.tenants().isolated_oversubscription(spec);
        if now == self.reporter.oversubscribed {
            return;
        }
        for pool in now
            .iter()
            .filter(|o| !self.reporter.oversubscribed.contains(o))
        {
            tracing::warn!("queues: {pool}");
        }
        if now.is_empty() {
            tracing::info!("queues: every pool holds its isolated quotas again");
        }
        (self.metrics).set_isolated_quota_excess(
            (now.iter()).map(|o| (o.gpu_model.clone(), o.quota_gpus - o.gpus)),
        );
        self.reporter.oversubscribed = now;
    }

    /// Pods held out of the queues, with their reason, once per change of reason.
    fn report_held(&mut self) {
        for uid in self.pods.take_held() {
            let Some(entry) = self.pods.entries.get(&uid) else {
                continue;
            };
            let PodState::Held(hold) = &entry.state else {
                continue;
            };
            let message = hold.message();
            if self.reporter.told.get(&uid) == Some(&message) {
                continue;
            }
            let gated = matches!(hold, Hold::Gated);
            let target = entry.target.clone();
            let reason = if gated {
                "SchedulingGated"
            } else {
                "Unschedulable"
            };
            self.outputs
                .push(entry.not_scheduled(reason, message.clone()));
            if !gated {
                self.outputs.push(Output::Event {
                    target: target.into(),
                    warning: true,
                    reason: "FailedScheduling",
                    message: message.clone(),
                });
            }
            self.reporter.told.insert(uid, message);
        }
    }

    /// A status write failed: what was written is forgotten, so that it is written again.
    /// A PodGroup's or Queue's at the next report; a pod's condition, a held pod's at the
    /// next round, a queued one's at its next explanation.
    pub(super) fn not_written(&mut self, what: Unwritten) {
        match what {
            Unwritten::Condition(target) => self.condition_not_written(&target),
            Unwritten::PodGroup(namespace, name) => {
                self.reporter.groups.remove(&(namespace, name));
            }
            Unwritten::Queue(name) => {
                self.reporter.queues.remove(&name);
            }
        }
    }

    fn condition_not_written(&mut self, target: &PodRef) {
        if self.reporter.told.remove(&target.uid).is_none() {
            return;
        }
        if let Some(PodState::Held(hold)) = self.pods.entries.get(&target.uid).map(|e| &e.state) {
            let hold = hold.clone();
            self.set_state(&target.uid, PodState::Held(hold));
        }
    }

    /// Queued jobs that failed to place, explained in kube-scheduler's words.
    fn explain_queued(&mut self, now_ms: u64) {
        let every = self.reporter.diagnose_every_ms;
        let due: Vec<JobId> = self
            .scheduler
            .waiting()
            .filter(|w| w.blocked_since.is_some() || w.unresolvable)
            .map(|w| w.job.id)
            .filter(|job| {
                self.reporter
                    .diagnosed
                    .get(job)
                    .is_none_or(|&t| now_ms >= t + every)
            })
            .take(self.reporter.diagnoses_per_round)
            .collect();
        let refused = self.nodes.refused(&self.options);
        for job in due {
            self.reporter.diagnosed.insert(job, now_ms);
            let Some(mut diagnosis) = self.scheduler.diagnose(job, now_ms) else {
                continue;
            };
            if refused > 0 {
                // Left out of the cluster, they are nodes to kube-scheduler all the same.
                diagnosis.nodes += refused;
                diagnosis.add(REFUSED_NODES.into(), refused);
            }
            let Some(entry) = self.pods.jobs.get(&job) else {
                continue;
            };
            let message = match &entry.group {
                Some((ns, g)) => format!("pod group {ns}/{g}: {}", diagnosis.message()),
                None => diagnosis.message(),
            };
            let uids: Vec<String> = entry.alive().map(|(_, uid)| uid.clone()).collect();
            if uids
                .iter()
                .all(|uid| self.reporter.told.get(uid) == Some(&message))
            {
                continue;
            }
            self.unschedulable(job, &message);
            self.tell_pods(job, true, "FailedScheduling", &message);
            for uid in uids {
                self.reporter.told.insert(uid, message.clone());
            }
        }
        let jobs = &self.pods.jobs;
        self.reporter
            .diagnosed
            .retain(|job, _| jobs.contains_key(job));
        let entries = &self.pods.entries;
        self.reporter
            .told
            .retain(|uid, _| entries.contains_key(uid));
    }

    /// Feeds the live metrics with the cluster's assignment after the round.
    fn observe(&mut self, now_ms: u64) {
        let state = self.scheduler.state();
        let total = state.total();
        let alloc = total.used_milli + self.scheduler.held_milli();
        // Running: what is assigned, less what is reserved but not yet bound, and less the
        // landed pods of gangs not yet whole.
        let running = self.scheduler.running();
        let partial: u64 = (self.pods.landed_parts.values().flatten())
            .filter_map(|part| running.get(part))
            .flat_map(|part| part.pools.iter().map(|&(_, milli)| milli))
            .sum();
        let run = (total.used_milli - state.assumed_milli()).saturating_sub(partial);
        let spec = state.spec();
        let gpu_nodes: u32 = (0..spec.pools.len())
            .map(|p| crate::model::PoolId(p as u16))
            .filter(|&p| spec.pool(p).gpu_model.is_some())
            .map(|p| state.pool(p).nodes)
            .sum();
        self.metrics.observe(
            now_ms,
            alloc,
            run,
            total.fragmented_nodes,
            u64::from(total.gpus) * u64::from(MILLI_PER_GPU),
            gpu_nodes,
        );
    }

    /// PodGroup status: how many members are placed, running, done, and the phase as
    /// scheduler-plugins' PodGroup controller sets it (Finished once `minMember` succeeded,
    /// Failed once one failed and `minMember` ran or ended, Running once `minMember` run or
    /// succeeded; Finished and Failed stay). Written on change, for the groups whose gang
    /// this replica schedules (another shard's replica writes the others'), and once more,
    /// Pending with nothing counted, when all its pods are gone.
    fn report_groups(&mut self) {
        let mut statuses = Vec::new();
        for (key, group) in &self.groups {
            let members = self.pods.members.get(key);
            let uid = group.metadata.uid.clone().unwrap_or_default();
            let reported = self.reporter.groups.get(key);
            // A group whose pods were never this shard's, or that ended (as the watch shows
            // it, or as written last), is left alone.
            let written = reported
                .filter(|(of, _)| *of == uid)
                .map(|(_, status)| status);
            let ended = [group.status.as_ref(), written]
                .into_iter()
                .flatten()
                .any(|s| {
                    matches!(
                        s.phase,
                        Some(PodGroupPhase::Finished | PodGroupPhase::Failed)
                    )
                });
            let ours = match members {
                Some(_) => self.gang_in_shard(key),
                None => reported.is_some(),
            };
            if !ours || ended {
                continue;
            }
            let min_member = group.spec.min_member.max(1);
            let (mut scheduled, mut running, mut succeeded, mut failed) = (0, 0, 0, 0);
            let entries = members
                .into_iter()
                .flatten()
                .filter_map(|uid| self.pods.entries.get(uid));
            for entry in entries {
                match entry.finished {
                    Some(true) => succeeded += 1,
                    Some(false) => failed += 1,
                    None => {}
                }
                if entry.running {
                    running += 1;
                }
                let placed = match &entry.state {
                    PodState::InJob { job, .. } => self
                        .pods
                        .jobs
                        .get(job)
                        .is_some_and(|j| j.phase == JobPhase::Running),
                    PodState::Parked => true,
                    _ => false,
                };
                if placed || entry.finished.is_some() {
                    scheduled += 1;
                }
            }
            let phase = if succeeded >= min_member {
                PodGroupPhase::Finished
            } else if failed > 0 && failed + running + succeeded >= min_member {
                PodGroupPhase::Failed
            } else if running + succeeded >= min_member {
                PodGroupPhase::Running
            } else if scheduled >= min_member {
                PodGroupPhase::Scheduled
            } else if scheduled > 0 {
                PodGroupPhase::Scheduling
            } else {
                PodGroupPhase::Pending
            };
            let status = PodGroupStatus {
                phase: Some(phase),
                scheduled: Some(scheduled),
                running: Some(running),
                succeeded: Some(succeeded),
                failed: Some(failed),
                ..group.status.clone().unwrap_or_default()
            };
            // Keyed by the object's uid too: a group deleted and made again has no status.
            if reported.is_none_or(|(of, written)| *of != uid || *written != status) {
                statuses.push((key.clone(), uid, status));
            }
        }
        for (key, uid, status) in statuses {
            self.reporter
                .groups
                .insert(key.clone(), (uid, status.clone()));
            self.outputs.push(Output::PodGroupStatus {
                namespace: key.0,
                name: key.1,
                status,
            });
        }
        let (members, groups) = (&self.pods.members, &self.groups);
        self.reporter
            .groups
            .retain(|key, _| members.contains_key(key) && groups.contains_key(key));
    }

    /// Queue status: GPUs allocated and borrowed per model of this shard (a merge patch:
    /// the other models' figures are their shards'), jobs pending and running; written on
    /// change. Queue depths go to the metrics.
    fn report_queues(&mut self, now_ms: u64) {
        let tenants = self.scheduler.tenants();
        let spec = self.scheduler.state().spec();
        let mut running: HashMap<usize, i64> = HashMap::new();
        // Pods of other schedulers and other shards are no Queue's jobs here.
        let this_shards = |id: &JobId| self.pods.jobs.get(id).is_none_or(|e| e.own);
        for (id, job) in self.scheduler.running() {
            if this_shards(id) {
                *running.entry(job.tenant).or_default() += 1;
            }
        }
        let mut depths = Vec::new();
        for tenant in 0..tenants.len() {
            let name = tenants.name(tenant).to_owned();
            depths.push((name.clone(), self.scheduler.pending_of(tenant) as u64));
            let Some(queue) = self.queues.get(&name) else {
                continue;
            };
            let uid = queue.metadata.uid.clone().unwrap_or_default();
            let mut allocated = BTreeMap::new();
            let mut borrowed = BTreeMap::new();
            for (index, pool) in spec.pools.iter().enumerate() {
                // A pool keeps its place when its last node goes (pool ids stay), but its
                // model is gone: no node carries it, and no pod is placed there.
                let Some(model) = (pool.gpu_model.as_ref())
                    .filter(|m| self.options.owns_model(m) && !pool.nodes.is_empty())
                else {
                    continue;
                };
                let pool_id = crate::model::PoolId(index as u16);
                allocated.insert(
                    model.clone(),
                    Some(thousandths(tenants.used(tenant, pool_id))),
                );
                borrowed.insert(
                    model.clone(),
                    Some(thousandths(tenants.borrowed(tenant, pool_id))),
                );
            }
            // A merge patch removes only what it names: a model of this replica's that no
            // node carries any more is named null, or its last figures would stay; so is
            // any model no node carries, by the `--default-shard` replica (figures a shard
            // removed since left behind).
            let shown =
                (queue.status.iter()).flat_map(|s| s.allocated.keys().chain(s.borrowed.keys()));
            let gone: Vec<String> = shown
                .filter(|m| {
                    let ours = self.options.owns_model(m)
                        || (self.options.default_shard && !self.nodes.carries(m));
                    ours && !allocated.contains_key(*m)
                })
                .cloned()
                .collect();
            for model in gone {
                allocated.insert(model.clone(), None);
                borrowed.insert(model, None);
            }
            let own = ShardJobs {
                pending: self.scheduler.pending_of(tenant) as i64,
                running: running.get(&tenant).copied().unwrap_or(0),
                updated_at: None,
            };
            let status = self.queue_status(queue, allocated, borrowed, own, now_ms);
            if self.reporter.queue_changed(&name, uid, &status) {
                self.outputs.push(Output::QueueStatus { name, status });
            }
        }
        self.metrics.set_queue_depths(depths);
        // A Queue whose spec is invalid is no tenant: its status says why.
        let invalid: Vec<(String, String, String)> = (self.queues.iter())
            .filter(|(name, _)| tenants.index(name).is_none())
            .filter_map(|(name, queue)| {
                let problem = queue.spec.to_tenant_config(name).err()?;
                Some((
                    name.clone(),
                    queue.metadata.uid.clone().unwrap_or_default(),
                    problem,
                ))
            })
            .collect();
        let invalid_since = &mut self.reporter.invalid_since;
        invalid_since.retain(|name, _| invalid.iter().any(|(n, ..)| n == name));
        for (name, uid, problem) in invalid {
            let since = *self
                .reporter
                .invalid_since
                .entry(name.clone())
                .or_insert(now_ms);
            let status = QueueStatus {
                conditions: Some(vec![invalid_spec(problem, since)]),
                ..QueueStatus::default()
            };
            if self.reporter.queue_changed(&name, uid, &status) {
                self.outputs.push(Output::QueueStatus { name, status });
            }
        }
        let queues = &self.queues;
        self.reporter
            .queues
            .retain(|name, _| queues.contains_key(name));
    }

    /// A Queue's status with this replica's figures. In a sharded deployment its job
    /// counts go under its shard's name, stamped when they changed or every
    /// [`SHARD_ENTRY_REFRESH_MS`], and the totals add the other shards' counts as the
    /// Queue last showed them: every shard that sees another's counts change writes the
    /// totals again, so they settle on the sum. Another shard's entry not stamped within
    /// [`SHARD_ENTRY_STALE_MS`] (or never) is of a shard that is gone: it is left out, and
    /// removed.
    fn queue_status(
        &self,
        queue: &Queue,
        allocated: BTreeMap<String, Option<String>>,
        borrowed: BTreeMap<String, Option<String>>,
        mut own: ShardJobs,
        now_ms: u64,
    ) -> QueueStatus {
        if self.options.shard_models.is_empty() {
            return QueueStatus {
                allocated,
                borrowed,
                pending: own.pending,
                running: own.running,
                // A Queue made valid loses the condition that said it was not.
                conditions: Some(Vec::new()),
                ..QueueStatus::default()
            };
        }
        let shard = &self.options.shard;
        let shown = queue.status.iter().flat_map(|s| &s.shards);
        let age = |jobs: &ShardJobs| {
            let stamped = jobs.updated_at.as_ref()?.0.as_millisecond();
            Some(now_ms.saturating_sub(u64::try_from(stamped).unwrap_or(0)))
        };
        // This shard's stamp is kept while its counts are and it is recent: the one last
        // written (the Queue may not show it yet), else the one the Queue shows.
        let name = queue.metadata.name.as_deref().unwrap_or_default();
        let written = (self.reporter.queues.get(name)).and_then(|(_, s)| s.shards.get(shard));
        let shown_own = shown
            .clone()
            .find(|(n, _)| *n == shard)
            .map(|(_, jobs)| jobs);
        let kept = [written, shown_own]
            .into_iter()
            .flatten()
            .flatten()
            .find(|jobs| {
                (jobs.pending, jobs.running) == (own.pending, own.running)
                    && age(jobs).is_some_and(|age| age < SHARD_ENTRY_REFRESH_MS)
            });
        own.updated_at = Some(
            kept.and_then(|jobs| jobs.updated_at.clone())
                .unwrap_or_else(|| time_at(now_ms)),
        );
        let mut shards = BTreeMap::new();
        let (mut pending, mut running) = (own.pending, own.running);
        for (name, jobs) in shown.filter(|(name, _)| *name != shard) {
            let Some(jobs) = jobs else {
                continue;
            };
            if age(jobs).is_some_and(|age| age < SHARD_ENTRY_STALE_MS) {
                pending += jobs.pending;
                running += jobs.running;
            } else {
                shards.insert(name.clone(), None);
            }
        }
        shards.insert(shard.clone(), Some(own));
        QueueStatus {
            allocated,
            borrowed,
            pending,
            running,
            shards,
            conditions: Some(Vec::new()),
        }
    }
}

/// The world clock's `now_ms` as a Kubernetes time.
fn time_at(now_ms: u64) -> Time {
    Time(
        Timestamp::from_millisecond(i64::try_from(now_ms).unwrap_or(i64::MAX))
            .unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

/// The condition of a Queue whose spec is invalid since `since_ms`: `Valid` is `False`,
/// with what is wrong.
fn invalid_spec(problem: String, since_ms: u64) -> Condition {
    Condition {
        type_: "Valid".into(),
        status: "False".into(),
        reason: "InvalidSpec".into(),
        message: problem,
        last_transition_time: time_at(since_ms),
        observed_generation: None,
    }
}
