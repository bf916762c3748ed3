//! The scheduler's decisions carried into the world, and the world's answers carried back:
//! a placement becomes one binding per pod (after its preemption victims are gone, if it
//! needed any); a preemption becomes evictions (the victims' pods hold their devices in
//! the scheduler until they are gone); a binding or an eviction that fails puts things back as they
//! were, with a backoff.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{DeviceAlloc, Placement, PodKey};
use crate::framework::{Adopted, Decision, JobPlan, PreemptionKind, Reshaped};
use crate::model::{Job, JobId, MILLI_PER_GPU, bits};

use super::super::convert::binding_annotations;
use super::pods::{JobEntry, JobPhase, Place, PodRef};
use super::volumes::ClaimBinding;
use super::{Output, World, WriteError};

/// The longest a preemptor waits for its victims' pods to go (longer than graceful
/// terminations take; a pod on a node that stopped answering may stay terminating for
/// good) before it is queued again.
pub(super) const VICTIM_PATIENCE_MS: u64 = 10 * 60 * 1000;

impl World {
    /// Turns one round's decisions into outputs.
    pub(super) fn carry_out(&mut self, decisions: Vec<Decision>, now_ms: u64) {
        let mut victims_of: HashMap<JobId, Vec<JobId>> = HashMap::new();
        for decision in decisions {
            match decision {
                Decision::Preempted { victims, by, kind } => {
                    for &victim in &victims {
                        self.evict(victim, by, kind, now_ms);
                    }
                    victims_of.entry(by).or_default().extend(victims);
                }
                Decision::Placed { job, plan, .. } => {
                    let spec = self.scheduler.state().spec().clone();
                    let Some(entry) = self.pods.jobs.get_mut(&job) else {
                        continue;
                    };
                    entry.places = plan.pods.iter().map(|(_, p)| Place::of(p, &spec)).collect();
                    entry.landed = vec![false; entry.places.len()];
                    let victims: Vec<JobId> = victims_of
                        .remove(&job)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|v| self.pods.jobs.contains_key(v))
                        .collect();
                    if victims.is_empty() {
                        self.start_binding(job, now_ms);
                    } else {
                        self.nominate(job, true);
                        let until_ms = now_ms.saturating_add(VICTIM_PATIENCE_MS);
                        if let Some(entry) = self.pods.jobs.get_mut(&job) {
                            entry.phase = JobPhase::AwaitingVictims { victims, until_ms };
                            self.pods.victim_deadlines.insert((until_ms, job));
                        }
                    }
                }
                Decision::Requeued { job, reason, .. } => {
                    self.tell_pods(job, true, "FailedScheduling", &reason);
                    self.requeue(job, now_ms);
                }
            }
        }
    }

    /// A victim's pods are evicted; in the scheduler they hold what the preemptor left of
    /// theirs, as a terminating job, until they are gone. Its return is owed (see
    /// `returns`).
    fn evict(&mut self, victim: JobId, by: JobId, kind: PreemptionKind, now_ms: u64) {
        let by_name = self
            .pods
            .jobs
            .get(&by)
            .map_or_else(String::new, |e| e.job.name.clone());
        let Some(entry) = self.pods.jobs.get(&victim) else {
            return;
        };
        let targets: Vec<(u32, PodRef)> = entry
            .alive()
            .filter_map(|(i, uid)| Some((i, self.pods.entries.get(uid)?.target.clone())))
            .collect();
        self.owe_return(victim, kind, now_ms);
        if let Some(entry) = self.pods.jobs.get_mut(&victim) {
            entry.phase = JobPhase::Evicting {
                by,
                kind,
                recorded: false,
                unanswered: targets.len() as u32,
                refused: Vec::new(),
            };
        }
        for (pod, target) in targets {
            self.outputs.push(Output::Event {
                target: target.clone().into(),
                warning: true,
                reason: "Preempted",
                message: format!("preempted ({}) to make room for {by_name}", kind.name()),
            });
            self.outputs.push(Output::Evict {
                job: victim,
                pod,
                target,
            });
        }
    }

    /// The live pods of a job with their places: (pod index, pod, place).
    fn placed_pods(&self, job: JobId) -> Vec<(u32, PodRef, Place)> {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return Vec::new();
        };
        entry
            .alive()
            .filter_map(|(index, uid)| {
                let target = self.pods.entries.get(uid)?.target.clone();
                Some((index, target, entry.place(index)?.clone()))
            })
            .collect()
    }

    /// Sends one binding per pod of a placed job. A job one of whose pods was placed on a
    /// node since deleted, or whose claims no longer let it go where it was placed
    /// (another job's binding, earlier in this round maybe, is provisioning a claim of its
    /// for another node; a claim went away), forms again instead, after its backoff.
    fn start_binding(&mut self, job: JobId, now_ms: u64) {
        let placed = self.placed_pods(job);
        let closed = (placed.iter()).find_map(|(_, _, place)| self.nodes.closed(&place.node));
        let bindings = match (closed, self.volumes_allow(job)) {
            (Some(why), _) => Err(Some(why)),
            (None, true) => self.bind_claims(job, &placed, now_ms),
            (None, false) => Err(None),
        };
        let mut bindings = match bindings {
            Ok(bindings) => bindings,
            Err(why) => {
                // Only what this attempt took is freed: others find no more room than
                // before it.
                self.volumes.forget_assumed(job);
                self.pods.volumes_changed();
                if let Some(why) = why {
                    let message = format!("{why}; placed again");
                    self.tell_pods(job, true, "FailedScheduling", &message);
                }
                self.scheduler.bind_failed(job, now_ms);
                self.withdraw_and_dissolve(job, now_ms);
                return;
            }
        };
        self.pods.bind_rounds += 1;
        let round = self.pods.bind_rounds;
        let mut outstanding = 0;
        let mut binds = Vec::new();
        for (index, target, place) in placed {
            let annotations = match self.nodes.devices_of(&place.node) {
                Some((nics, links)) => binding_annotations(&place.gpus, links, nics),
                None => Default::default(),
            };
            outstanding += 1;
            let claims = bindings.remove(&index).unwrap_or_default();
            binds.push(Output::Bind {
                job,
                pod: index,
                round,
                target,
                node: place.node.clone(),
                annotations,
                claims,
            });
        }
        self.outputs.extend(binds);
        if let Some(entry) = self.pods.jobs.get_mut(&job) {
            entry.phase = JobPhase::Binding {
                round,
                outstanding,
                failed: Vec::new(),
            };
        }
    }

    /// Whether the claims of each pod of a placed job, as they are now, let it go where it
    /// was placed.
    fn volumes_allow(&self, job: JobId) -> bool {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return true;
        };
        let spec = self.scheduler.state().spec();
        entry.alive().all(|(index, uid)| {
            let pod = self.pods.entries.get(uid);
            let Some((pod, facts)) = pod.and_then(|p| Some((p, p.facts.as_ref()?))) else {
                return true;
            };
            if facts.claims.is_empty() {
                return true;
            }
            let Ok(topology) = self.volumes.plan(&pod.target, &facts.claims) else {
                return false;
            };
            let node = (entry.place(index)).and_then(|p| spec.node_id(&p.node));
            let Some(node) = node.map(|id| spec.node(id)) else {
                return true;
            };
            (topology.iter()).all(|v| v.allows(&node.name, &node.labels))
        })
    }

    /// `job`'s binding failed, or was given up: the claims it was binding may not show
    /// it, and the pods waiting for their volumes are looked at again.
    fn forget_claims_assumed(&mut self, job: JobId) {
        if self.volumes.forget_assumed(job) {
            self.volumes.forget_refused();
            self.pods.volumes_changed();
        }
    }

    /// How the claims of each pod of a placed job not bound yet are bound on the node it
    /// was placed on, by pod, each assumed so (see `volumes`); or why one cannot be there
    /// (the volumes it could have are another pod's now).
    fn bind_claims(
        &mut self,
        job: JobId,
        placed: &[(u32, PodRef, Place)],
        now_ms: u64,
    ) -> Result<HashMap<u32, Vec<ClaimBinding>>, Option<String>> {
        let mut bindings = HashMap::new();
        let spec = self.scheduler.state().spec();
        for (index, target, place) in placed {
            let pod = self.pods.entries.get(&target.uid);
            let Some(facts) = pod.and_then(|p| p.facts.as_ref()) else {
                continue;
            };
            let node = spec.node_id(&place.node).map(|id| spec.node(id));
            let (Some(node), false) = (node, facts.claims.is_empty()) else {
                continue;
            };
            let claims = (self.volumes)
                .bind(
                    target,
                    &facts.claims,
                    (&node.name, &node.labels),
                    (job, now_ms),
                )
                .map_err(Some)?;
            if !claims.is_empty() {
                // Others' claims may no longer have the volumes these take.
                self.pods.volumes_changed();
            }
            bindings.insert(*index, claims);
        }
        Ok(bindings)
    }

    /// Sets (or clears) `status.nominatedNodeName` on a job's pods: where they go once
    /// their preemption victims are gone.
    pub(super) fn nominate(&mut self, job: JobId, set: bool) {
        for (_, target, place) in self.placed_pods(job) {
            self.outputs.push(Output::Nominate {
                target,
                node: set.then_some(place.node),
            });
        }
    }

    /// A victim's last pod is gone: its preemptor is bound once all its victims are.
    pub(super) fn victim_gone(&mut self, by: JobId, victim: JobId, now_ms: u64) {
        let Some(entry) = self.pods.jobs.get_mut(&by) else {
            return;
        };
        let JobPhase::AwaitingVictims { victims, .. } = &mut entry.phase else {
            return;
        };
        victims.retain(|v| *v != victim);
        if victims.is_empty() {
            self.nominate(by, false);
            self.start_binding(by, now_ms);
        }
    }

    /// The API server answered one binding.
    pub(super) fn bind_answered(
        &mut self,
        job: JobId,
        pod: u32,
        round: u64,
        outcome: Result<(), WriteError>,
        now_ms: u64,
    ) {
        let Some(entry) = self.pods.jobs.get_mut(&job) else {
            return;
        };
        let landed = entry.landed.get(pod as usize).copied().unwrap_or(false);
        let alive = entry.pods.get(pod as usize).is_some_and(Option::is_some);
        let JobPhase::Binding {
            round: current,
            outstanding,
            failed,
        } = &mut entry.phase
        else {
            return;
        };
        if *current != round {
            return;
        }
        *outstanding = outstanding.saturating_sub(1);
        // An error for a pod the watch already showed bound where planned is a lost
        // answer, not a failure.
        if let Err(e) = outcome
            && alive
            && !landed
        {
            failed.push((pod, e.to_string()));
        }
        if *outstanding > 0 {
            return;
        }
        let failed = std::mem::take(failed);
        if entry.alive().next().is_none() {
            // Every pod was deleted, or placed elsewhere, while it was being bound: the
            // claims its bindings were annotating may not show their node (the watch
            // shows those that do).
            self.pods.jobs.remove(&job);
            self.forget_claims_assumed(job);
            return;
        }
        if failed.is_empty() {
            self.job_bound(job, now_ms);
        } else {
            self.binding_failed(job, failed, now_ms);
        }
    }

    fn job_bound(&mut self, job: JobId, now_ms: u64) {
        let _ = self.scheduler.bound(job);
        self.placed_whole_again(job, now_ms);
        let Some(entry) = self.pods.jobs.get_mut(&job) else {
            return;
        };
        entry.phase = JobPhase::Running;
        entry.started_ms = now_ms;
        let submit_ms = entry.job.submit_ms;
        let workload = entry.workload.clone();
        let group = entry.group.clone();
        // Members held behind a gang go once it is bound.
        if let Some(group) = &group {
            self.pods.group_changed(group);
        }
        let first = self.pods.placed_workloads.insert(workload.clone());
        // The gang is whole: pods of it that landed earlier, while others were refused,
        // are part of its first placement.
        let landed = self.pods.landed_parts.remove(&workload).unwrap_or_default();
        if first {
            let parts = std::iter::once(job).chain(landed.iter().copied());
            let mut total = 0;
            let mut plan = JobPlan { pods: Vec::new() };
            let state = self.scheduler.state();
            for part in parts {
                let Some(members) = self.pods.jobs.get(&part).map(|e| e.pods.len() as u32) else {
                    continue;
                };
                for pod in 0..members {
                    let key = PodKey { job: part, pod };
                    if let Some(placed) = state.placement(key) {
                        total += placed.placement.gpus.total_milli();
                        plan.pods.push((key, placed.placement));
                    }
                }
            }
            let spread =
                (total >= u64::from(MILLI_PER_GPU)).then(|| plan.spread(state.spec(), total));
            self.metrics
                .job_first_placed(now_ms, submit_ms, total, spread);
        }
        let mut outputs = Vec::new();
        for (_, target, place) in self.placed_pods(job) {
            outputs.push(Output::Event {
                message: format!(
                    "Successfully assigned {target} to {}{}",
                    place.node,
                    describe_devices(&place.gpus)
                ),
                target: target.into(),
                warning: false,
                reason: "Scheduled",
            });
        }
        self.outputs.extend(outputs);
        // So do the gang's pods found bound at a restart, adopted as a job of their own
        // (an earlier leader stood down between the gang's bindings); not pods of its
        // PodGroup another scheduler or shard placed, nor pods found on their way out.
        let mut parts = landed;
        if let Some(group) = &group {
            let mut adopted: Vec<JobId> = (self.pods.jobs.iter())
                .filter(|(id, e)| {
                    **id != job
                        && e.own
                        && e.group.as_ref() == Some(group)
                        && e.phase == JobPhase::Running
                })
                .map(|(id, _)| *id)
                .filter(|id| !parts.contains(id))
                .collect();
            adopted.sort_unstable();
            parts.extend(adopted);
        }
        self.merge_parts(job, parts, now_ms);
    }

    /// A gang bound in several goes (some bindings refused, then bound on a retry; or
    /// part bound before a restart, the rest after) runs as one job from now on, under the
    /// id of the part bound last, so that it is preempted whole. Parts no longer running
    /// (evicted meanwhile) stay apart.
    fn merge_parts(&mut self, job: JobId, parts: Vec<JobId>, now_ms: u64) {
        let Some(last) = self.pods.jobs.get(&job) else {
            return;
        };
        let (template, group, queue) = (last.job.clone(), last.group.clone(), last.queue.clone());
        let mut merged = Vec::new();
        let (mut uids, mut places, mut requests) = (Vec::new(), Vec::new(), Vec::new());
        for id in std::iter::once(job).chain(parts) {
            let Some(entry) = (self.pods.jobs.get(&id)).filter(|e| e.phase == JobPhase::Running)
            else {
                continue;
            };
            for (index, uid) in entry.alive() {
                if let (Some(place), Some(request)) =
                    (entry.place(index), entry.job.pods.get(index as usize))
                {
                    uids.push(uid.clone());
                    places.push(place.clone());
                    requests.push(*request);
                }
            }
            merged.push(id);
        }
        if merged.len() < 2 {
            return;
        }
        let exempt = (merged.iter()).any(|&id| self.scheduler.is_exempt_from_backfill_eviction(id));
        for id in &merged {
            self.scheduler.finish(*id);
            self.pods.jobs.remove(id);
        }
        let whole = Job {
            id: job,
            pods: requests,
            tenant: self.tenant_of(queue.as_deref()),
            ..(*template).clone()
        };
        let entry = JobEntry::new(
            whole,
            &uids,
            group,
            queue,
            JobPhase::Running,
            places,
            now_ms,
        );
        self.run_as_adopted(template, entry, exempt);
    }

    /// Some bindings of a job failed. The whole job is released and requeued with a
    /// backoff; pods whose binding did land stay where they are (a binding cannot be
    /// undone) and are recorded as running, the others form a job again after the backoff.
    fn binding_failed(&mut self, job: JobId, failed: Vec<(u32, String)>, now_ms: u64) {
        let retry_at = self.scheduler.bind_failed(job, now_ms).unwrap_or(now_ms);
        self.forget_claims_assumed(job);
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let failed_pod = |i: u32| failed.iter().any(|(f, _)| *f == i);
        let whole = entry.pods.iter().all(Option::is_some);
        let all_failed = entry.alive().all(|(i, _)| failed_pod(i));
        let mut events = Vec::new();
        for (pod, reason) in &failed {
            if let Some(uid) = entry.pods.get(*pod as usize).cloned().flatten()
                && let Some(target) = self.pods.entries.get(&uid).map(|e| e.target.clone())
            {
                events.push(Output::Event {
                    target: target.into(),
                    warning: true,
                    reason: "FailedScheduling",
                    message: format!(
                        "binding rejected ({reason}); retrying in {} s",
                        retry_at.saturating_sub(now_ms).div_ceil(1000)
                    ),
                });
            }
        }
        self.outputs.extend(events);
        if all_failed && whole {
            self.requeue(job, now_ms);
            return;
        }
        // Part of the job landed, or a member is gone: what landed runs; the rest forms a
        // job again after the backoff. Both keep an exemption from backfill eviction.
        let exempt = self.withdraw_keeping_exemption(job, now_ms);
        let Some(mut entry) = self.pods.jobs.remove(&job) else {
            return;
        };
        let landed: Vec<(u32, String)> = entry
            .alive()
            .filter(|(i, _)| !failed_pod(*i))
            .map(|(i, uid)| (i, uid.clone()))
            .collect();
        let template = entry.job.clone();
        let moved = self.moved_entry(&entry, &landed, now_ms);
        for (index, _) in &landed {
            entry.pods[*index as usize] = None;
        }
        let workload = entry.workload.clone();
        self.pods.jobs.insert(job, entry);
        self.dissolve(job, retry_at);
        if let Some(moved) = moved {
            let parts = self.pods.landed_parts.entry(workload).or_default();
            parts.push(moved.job.id);
            self.run_as_adopted(template, moved, exempt);
        }
    }

    /// A copy of `entry` made of the given pods (index, uid), as a running job under a
    /// new id; `None` when there is none.
    fn moved_entry(
        &mut self,
        entry: &JobEntry,
        pods: &[(u32, String)],
        started_ms: u64,
    ) -> Option<JobEntry> {
        if pods.is_empty() {
            return None;
        }
        let places: Vec<Place> = pods
            .iter()
            .filter_map(|(i, _)| entry.place(*i).cloned())
            .collect();
        let requests = pods
            .iter()
            .filter_map(|(i, _)| entry.job.pods.get(*i as usize).copied())
            .collect();
        let job = Job {
            id: self.pods.new_job_id(),
            pods: requests,
            tenant: self.tenant_of(entry.queue.as_deref()),
            ..(*entry.job).clone()
        };
        let uids: Vec<String> = pods.iter().map(|(_, uid)| uid.clone()).collect();
        Some(JobEntry::new(
            job,
            &uids,
            entry.group.clone(),
            entry.queue.clone(),
            JobPhase::Running,
            places,
            started_ms,
        ))
    }

    /// Records a job whose pods are bound, at their places, as running; exempt from
    /// backfill eviction if `backfill_exempt` (what runs on of an exempt job).
    fn run_as_adopted(&mut self, template: Arc<Job>, entry: JobEntry, backfill_exempt: bool) {
        let spec = self.scheduler.state().spec().clone();
        let id = entry.job.id;
        let placements: Option<Vec<Option<Placement>>> = entry
            .places
            .iter()
            .map(|p| p.resolve(&spec).map(Some))
            .collect();
        let adopted = placements
            .ok_or_else(|| "a node is gone".to_string())
            .and_then(|p| {
                self.scheduler
                    .adopt(
                        (*entry.job).clone(),
                        &p,
                        entry.started_ms,
                        Adopted::Running { preemptible: true },
                    )
                    .map_err(|e| e.to_string())
            });
        match adopted {
            Ok(()) => {
                self.record_job(entry);
                if backfill_exempt {
                    self.scheduler.exempt_from_backfill_eviction(id);
                }
            }
            Err(e) => tracing::error!("job {}: cannot record its bound pods: {e}", template.name),
        }
    }

    /// The API server answered one eviction. A refusal (a disruption budget, 429) releases
    /// the victim's preemptor, if it still waits for it (not for the victims of a later
    /// attempt), to be queued again with a backoff; once every answer is in, the pods whose
    /// eviction was refused run on (see [`World::keep_refused`]).
    pub(super) fn eviction_answered(
        &mut self,
        victim: JobId,
        pod: u32,
        outcome: Result<(), WriteError>,
        now_ms: u64,
    ) {
        let Some(entry) = self.pods.jobs.get_mut(&victim) else {
            return;
        };
        let alive = entry.pods.get(pod as usize).is_some_and(Option::is_some);
        let victim_name = entry.job.name.clone();
        let JobPhase::Evicting {
            by,
            unanswered,
            refused,
            ..
        } = &mut entry.phase
        else {
            return;
        };
        let by = *by;
        *unanswered = unanswered.saturating_sub(1);
        match outcome {
            Ok(()) => self.record_preemption(victim, now_ms),
            Err(error) if alive => {
                refused.push(pod);
                let awaited = (self.pods.jobs.get(&by))
                    .is_some_and(|e| e.phase.awaited_victims().contains(&victim));
                if awaited {
                    let message =
                        format!("preemption of {victim_name} refused ({error}); retrying later");
                    self.stop_awaiting_victims(by, &message, now_ms);
                }
            }
            // A pod already gone: what its eviction was for.
            Err(_) => {}
        }
        self.keep_refused(victim);
    }

    /// Once every eviction of a victim is answered, its pods whose eviction was refused
    /// run on where they are, as a job of their own charged to their Queue; those whose
    /// eviction landed stay on their way out, charged to no Queue, until they are gone. A
    /// gang evicted in part thus runs below its `minMember` with the members left, which a
    /// later preemption may take.
    fn keep_refused(&mut self, victim: JobId) {
        let Some(entry) = self.pods.jobs.get(&victim) else {
            return;
        };
        let JobPhase::Evicting {
            unanswered: 0,
            refused,
            kind,
            recorded,
            ..
        } = &entry.phase
        else {
            return;
        };
        let kept: Vec<(u32, String)> = refused
            .iter()
            .filter_map(|&i| Some((i, entry.pods.get(i as usize)?.clone()?)))
            .collect();
        if kept.is_empty() {
            return;
        }
        // If no eviction landed, nothing comes back. Evicted as backfilled, if some did,
        // the members left run on exempt, as the rest of the victim comes back. A victim
        // exempt already (evicted for another reason) leaves them exempt too.
        let backfilled = *kind == PreemptionKind::Backfill;
        let landed = *recorded;
        if !landed {
            self.cancel_return(victim);
        }
        let exempt =
            (backfilled && landed) || self.scheduler.is_exempt_from_backfill_eviction(victim);
        let Some(mut entry) = self.pods.jobs.remove(&victim) else {
            return;
        };
        let template = entry.job.clone();
        let moved = self.moved_entry(&entry, &kept, entry.started_ms);
        for (index, _) in &kept {
            entry.pods[*index as usize] = None;
        }
        if entry.alive().next().is_some() {
            self.pods.jobs.insert(victim, entry);
            // Its terminating hold shrinks to the pods still going.
            self.hold_while_going(&[victim]);
        } else {
            self.scheduler.finish(victim);
        }
        if let Some(moved) = moved {
            self.run_as_adopted(template, moved, exempt);
        }
    }

    /// Counts a victim's preemption in the metrics, once: when the first of its evictions
    /// lands, or its pods are gone, whichever comes first.
    pub(super) fn record_preemption(&mut self, victim: JobId, now_ms: u64) {
        let Some(entry) = self.pods.jobs.get_mut(&victim) else {
            return;
        };
        let JobPhase::Evicting { kind, recorded, .. } = &mut entry.phase else {
            return;
        };
        if !std::mem::replace(recorded, true) {
            let ran_ms = now_ms.saturating_sub(entry.started_ms);
            self.metrics
                .preempted(kind.name(), entry.job.total_milli(), ran_ms);
        }
    }

    /// A preemptor waiting for its victims to go waits no more: its reservation and
    /// nomination are given up, and it is queued again with a backoff (the victims, still
    /// going, hold what they had until they are gone).
    fn stop_awaiting_victims(&mut self, by: JobId, why: &str, now_ms: u64) {
        let awaiting = |e: &JobEntry| matches!(e.phase, JobPhase::AwaitingVictims { .. });
        let Some(preemptor) = self.pods.jobs.get(&by).filter(|e| awaiting(e)) else {
            return;
        };
        let victims = preemptor.phase.awaited_victims().to_vec();
        self.nominate(by, false);
        self.scheduler.bind_failed(by, now_ms);
        self.tell_pods(by, true, "FailedScheduling", why);
        self.requeue(by, now_ms);
        // What its reservation took of its victims' devices is theirs again until their
        // pods are gone.
        self.hold_while_going(&victims);
    }

    /// A job the scheduler queued again (its binding failed, its victims did not go, its
    /// node left) is queued in the world too; the phase it left is returned. One whose
    /// Queue was deleted meanwhile leaves the scheduler's queues, whose default tenant
    /// took it in, and its pods wait for their Queue again, as a pod naming a Queue that
    /// does not exist waits for it.
    fn requeue(&mut self, job: JobId, now_ms: u64) -> Option<JobPhase> {
        let left = self.pods.requeue(job)?;
        // The claims its bindings, if any, were annotating may not show their node: the
        // watch shows those that do. (A binding's answer of the round it left is not
        // awaited.)
        self.forget_claims_assumed(job);
        let tenants = self.scheduler.tenants();
        let queue_gone = (self.pods.jobs.get(&job))
            .and_then(|e| e.queue.as_deref())
            .is_some_and(|q| tenants.index(q).is_none());
        if queue_gone {
            self.withdraw_and_dissolve(job, now_ms);
        }
        Some(left)
    }

    /// Victims still going hold every device of their live pods that is free.
    pub(super) fn hold_while_going(&mut self, victims: &[JobId]) {
        let spec = self.scheduler.state().spec().clone();
        for &victim in victims {
            let Some(entry) = self.pods.jobs.get(&victim) else {
                continue;
            };
            let placements: Vec<Option<Placement>> = (entry.pods.iter().zip(&entry.places))
                .map(|(uid, place)| uid.as_ref().and(place.resolve(&spec)))
                .collect();
            self.scheduler.hold_going(victim, placements);
        }
    }

    /// Preemptors whose victims are not all gone within [`VICTIM_PATIENCE_MS`] (a pod
    /// stuck terminating on a node that stopped answering) wait no more.
    pub(super) fn give_up_on_lingering_victims(&mut self, now_ms: u64) {
        while let Some(&(until_ms, by)) = self.pods.victim_deadlines.first() {
            if until_ms > now_ms {
                return;
            }
            self.pods.victim_deadlines.pop_first();
            let still = self.pods.jobs.get(&by).is_some_and(|e| {
                matches!(e.phase, JobPhase::AwaitingVictims { until_ms: u, .. } if u == until_ms)
            });
            if still {
                let why = format!(
                    "preemption victims still not gone after {} s; retrying later",
                    VICTIM_PATIENCE_MS / 1000
                );
                self.stop_awaiting_victims(by, &why, now_ms);
            }
        }
    }

    /// Preemptors placed on a node since deleted, or since invalid (kept while pods are
    /// placed there), wait for their victims no more: they are placed again.
    pub(super) fn requeue_awaiting_on_deleted_nodes(&mut self, now_ms: u64) {
        let on_closed: Vec<(JobId, String)> = (self.pods.jobs.iter())
            .filter(|(_, e)| matches!(e.phase, JobPhase::AwaitingVictims { .. }))
            .filter_map(|(&job, e)| {
                let why = (e.alive())
                    .filter_map(|(index, _)| e.place(index))
                    .find_map(|place| self.nodes.closed(&place.node))?;
                Some((job, why))
            })
            .collect();
        for (job, why) in on_closed {
            self.stop_awaiting_victims(job, &format!("{why}; placing again"), now_ms);
        }
    }

    /// Jobs waiting for pods on their way out where they were nominated (see
    /// `pods::GoingWait`) wait no more once those pods are gone, their patience ends or they
    /// left the queue: their nomination is cleared, and a job still queued may preempt
    /// again if its pods allow it.
    pub(super) fn end_going_waits(&mut self, now_ms: u64) {
        let ended: Vec<(JobId, bool)> = (self.pods.going_waits.iter())
            .filter(|(job, wait)| {
                let queued = self
                    .pods
                    .jobs
                    .get(job)
                    .filter(|e| e.phase == JobPhase::Queued);
                queued.is_none_or(|e| {
                    now_ms >= wait.until_ms || !self.pods.going_below(&wait.node, e.job.priority)
                })
            })
            .map(|(&job, wait)| (job, wait.may_preempt))
            .collect();
        for (job, may_preempt) in ended {
            self.pods.going_waits.remove(&job);
            let Some(entry) = self.pods.jobs.get_mut(&job) else {
                continue;
            };
            let targets: Vec<PodRef> = (entry.alive())
                .filter_map(|(_, uid)| Some(self.pods.entries.get(uid)?.target.clone()))
                .collect();
            for target in targets {
                self.outputs.push(Output::Nominate { target, node: None });
            }
            if may_preempt && entry.phase == JobPhase::Queued {
                let job = Job {
                    may_preempt,
                    ..(*entry.job).clone()
                };
                entry.job = Arc::new(job.clone());
                let exempt = self.scheduler.is_exempt_from_backfill_eviction(job.id);
                let id = job.id;
                self.scheduler.withdraw(id);
                self.scheduler.submit(job);
                if exempt {
                    self.scheduler.exempt_from_backfill_eviction(id);
                }
            }
        }
    }

    /// After the cluster changed shape: pods whose node vanished wait to be adopted again
    /// if it comes back (the API server deletes them otherwise); jobs that lost a reserved
    /// pod are queued again.
    pub(super) fn cluster_reshaped(&mut self, reshaped: Reshaped, now_ms: u64) {
        for key in reshaped.lost_bound {
            let Some(entry) = self.pods.jobs.get_mut(&key.job) else {
                continue;
            };
            let uid = entry.pods.get_mut(key.pod as usize).and_then(Option::take);
            if entry.alive().next().is_none() {
                self.pods.jobs.remove(&key.job);
            }
            if let Some(uid) = uid {
                self.pods.park(&uid);
            }
        }
        for job in reshaped.requeued {
            self.nominate(job, false);
            if let Some(left) = self.requeue(job, now_ms) {
                self.hold_while_going(left.awaited_victims());
            }
        }
    }

    /// An event with the same words on every live pod of a job.
    pub(super) fn tell_pods(
        &mut self,
        job: JobId,
        warning: bool,
        reason: &'static str,
        message: &str,
    ) {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let targets: Vec<_> = entry
            .alive()
            .filter_map(|(_, uid)| self.pods.entries.get(uid).map(|e| e.target.clone()))
            .collect();
        for target in targets {
            self.outputs.push(Output::Event {
                target: target.into(),
                warning,
                reason,
                message: message.to_owned(),
            });
        }
    }

    /// Sets `PodScheduled=False` with the scheduler's reason on every live pod of a job.
    pub(super) fn unschedulable(&mut self, job: JobId, message: &str) {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let conditions: Vec<Output> = entry
            .alive()
            .filter_map(|(_, uid)| self.pods.entries.get(uid))
            .map(|e| e.not_scheduled("Unschedulable", message.to_owned()))
            .collect();
        self.outputs.extend(conditions);
    }
}

/// ` (GPUs 0,1)` for a placement's devices, empty for none.
fn describe_devices(gpus: &DeviceAlloc) -> String {
    let devices: Vec<String> = bits(gpus.devices).map(|d| d.to_string()).collect();
    if devices.is_empty() {
        return String::new();
    }
    if gpus.milli_each < MILLI_PER_GPU {
        let share = crate::model::GpuRequest::Fraction(gpus.milli_each);
        format!(" ({share} of GPU {})", devices.join(","))
    } else {
        format!(" (GPUs {})", devices.join(","))
    }
}
