//! The scheduler's decisions carried into the world, and the world's answers carried back:
//! a placement becomes one binding per pod (after its preemption victims are gone, if it
//! needed any); a preemption becomes evictions; a binding or an eviction that fails puts
//! things back as they were, with a backoff.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{Placement, PodKey};
use crate::framework::{Decision, JobPlan, PreemptionKind, Reshaped};
use crate::model::{Job, JobId, MILLI_PER_GPU};

use super::super::convert::binding_annotations;
use super::pods::{JobEntry, JobPhase, PodState};
use super::{Condition, Output, World, WriteError};

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
                    let Some(entry) = self.pods.jobs.get_mut(&job) else {
                        continue;
                    };
                    entry.plan = Some(plan);
                    let victims: Vec<JobId> = victims_of
                        .remove(&job)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|v| self.pods.jobs.contains_key(v))
                        .collect();
                    if victims.is_empty() {
                        self.start_binding(job);
                    } else {
                        self.nominate(job, true);
                        if let Some(entry) = self.pods.jobs.get_mut(&job) {
                            entry.phase = JobPhase::AwaitingVictims(victims);
                        }
                    }
                }
                Decision::Requeued { job, reason, .. } => {
                    if let Some(entry) = self.pods.jobs.get_mut(&job) {
                        entry.phase = JobPhase::Queued;
                    }
                    self.tell_pods(job, true, "FailedScheduling", &reason);
                }
            }
        }
    }

    /// A victim's pods are evicted; the scheduler already released what it held.
    fn evict(&mut self, victim: JobId, by: JobId, kind: PreemptionKind, now_ms: u64) {
        // The scheduler put the victim back in its queue; its pods are going away instead.
        self.scheduler.withdraw(victim);
        let by_name = self
            .pods
            .jobs
            .get(&by)
            .map_or_else(String::new, |e| e.job.name.clone());
        let Some(entry) = self.pods.jobs.get_mut(&victim) else {
            return;
        };
        let ran_ms = now_ms.saturating_sub(entry.started_ms);
        self.metrics
            .preempted(kind.name(), entry.job.total_milli(), ran_ms);
        entry.phase = JobPhase::Evicting { by };
        let targets: Vec<(u32, String)> = entry.alive().map(|(i, uid)| (i, uid.clone())).collect();
        for (pod, uid) in targets {
            let Some(target) = self.pods.entries.get(&uid).map(|e| e.target.clone()) else {
                continue;
            };
            self.outputs.push(Output::Event {
                target: target.clone(),
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

    /// Sends one binding per pod of a placed job.
    fn start_binding(&mut self, job: JobId) {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let Some(plan) = entry.plan.clone() else {
            return;
        };
        let spec = self.scheduler.state().spec().clone();
        let mut outstanding = 0;
        for (index, uid) in entry.alive() {
            let Some(target) = self.pods.entries.get(uid).map(|e| e.target.clone()) else {
                continue;
            };
            let Some((_, placement)) = plan.pods.get(index as usize) else {
                continue;
            };
            let node = &spec.node(placement.node).name;
            let annotations = match self.nodes.devices_of(node) {
                Some((nics, links)) => binding_annotations(&placement.gpus, links, nics),
                None => Default::default(),
            };
            outstanding += 1;
            self.outputs.push(Output::Bind {
                job,
                pod: index,
                target,
                node: node.clone(),
                annotations,
            });
        }
        if let Some(entry) = self.pods.jobs.get_mut(&job) {
            entry.phase = JobPhase::Binding {
                outstanding,
                failed: Vec::new(),
            };
        }
    }

    /// Sets (or clears) `status.nominatedNodeName` on a job's pods: where they go once
    /// their preemption victims are gone.
    fn nominate(&mut self, job: JobId, set: bool) {
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let spec = self.scheduler.state().spec();
        let mut outputs = Vec::new();
        for (index, uid) in entry.alive() {
            let node = entry
                .plan
                .as_ref()
                .and_then(|p| p.pods.get(index as usize))
                .map(|(_, placement)| spec.node(placement.node).name.clone());
            if let Some(target) = self.pods.entries.get(uid).map(|e| e.target.clone()) {
                outputs.push(Output::PodStatus {
                    target,
                    scheduled: None,
                    nominated_node: Some(node.filter(|_| set)),
                });
            }
        }
        self.outputs.extend(outputs);
    }

    /// A victim's last pod is gone: its preemptor is bound once all its victims are.
    pub(super) fn victim_gone(&mut self, by: JobId, victim: JobId, _now_ms: u64) {
        let Some(entry) = self.pods.jobs.get_mut(&by) else {
            return;
        };
        let JobPhase::AwaitingVictims(victims) = &mut entry.phase else {
            return;
        };
        victims.retain(|v| *v != victim);
        if victims.is_empty() {
            self.nominate(by, false);
            self.start_binding(by);
        }
    }

    /// The API server answered one binding.
    pub(super) fn bind_answered(
        &mut self,
        job: JobId,
        pod: u32,
        outcome: Result<(), WriteError>,
        now_ms: u64,
    ) {
        let Some(entry) = self.pods.jobs.get_mut(&job) else {
            return;
        };
        let JobPhase::Binding {
            outstanding,
            failed,
        } = &mut entry.phase
        else {
            return;
        };
        *outstanding = outstanding.saturating_sub(1);
        let alive = entry.pods.get(pod as usize).is_some_and(Option::is_some);
        if let Err(e) = outcome
            && alive
        {
            failed.push((pod, e.to_string()));
        }
        if *outstanding > 0 {
            return;
        }
        let failed = std::mem::take(failed);
        if entry.alive().next().is_none() {
            // Every pod was deleted while it was being bound.
            self.pods.jobs.remove(&job);
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
        let Some(entry) = self.pods.jobs.get_mut(&job) else {
            return;
        };
        entry.phase = JobPhase::Running;
        entry.started_ms = now_ms;
        let first = self.pods.placed_workloads.insert(entry.workload.clone());
        let total = entry.job.total_milli();
        let spec = self.scheduler.state().spec();
        if first && let Some(plan) = &entry.plan {
            let spread = (total >= u64::from(MILLI_PER_GPU)).then(|| plan.spread(spec, total));
            self.metrics
                .job_first_placed(now_ms, entry.job.submit_ms, total, spread);
        }
        let mut outputs = Vec::new();
        for (index, uid) in entry.alive() {
            let placed = entry.plan.as_ref().and_then(|p| p.pods.get(index as usize));
            let (Some(target), Some((_, placement))) =
                (self.pods.entries.get(uid).map(|e| e.target.clone()), placed)
            else {
                continue;
            };
            outputs.push(Output::Event {
                message: format!(
                    "Successfully assigned {target} to {}{}",
                    spec.node(placement.node).name,
                    describe_devices(placement)
                ),
                target,
                warning: false,
                reason: "Scheduled",
            });
        }
        self.outputs.extend(outputs);
    }

    /// Some bindings of a job failed. The whole job is released and requeued with a
    /// backoff; pods whose binding did land stay where they are (a binding cannot be
    /// undone) and are adopted as running, the others wait out the backoff.
    fn binding_failed(&mut self, job: JobId, failed: Vec<(u32, String)>, now_ms: u64) {
        let retry_at = self.scheduler.bind_failed(job, now_ms).unwrap_or(now_ms);
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let all_failed = entry
            .alive()
            .all(|(i, _)| failed.iter().any(|(f, _)| *f == i));
        for (pod, reason) in &failed {
            if let Some(uid) = entry.pods.get(*pod as usize).cloned().flatten()
                && let Some(target) = self.pods.entries.get(&uid).map(|e| e.target.clone())
            {
                self.outputs.push(Output::Event {
                    target,
                    warning: true,
                    reason: "FailedScheduling",
                    message: format!(
                        "binding rejected ({reason}); retrying in {} s",
                        retry_at.saturating_sub(now_ms).div_ceil(1000)
                    ),
                });
            }
        }
        if all_failed {
            if let Some(entry) = self.pods.jobs.get_mut(&job) {
                entry.phase = JobPhase::Queued;
            }
            return;
        }
        // A partial gang: what landed runs; the rest forms a job again after the backoff.
        self.scheduler.withdraw(job);
        let Some(entry) = self.pods.jobs.get(&job) else {
            return;
        };
        let landed: Vec<(String, Placement)> = entry
            .alive()
            .filter(|(i, _)| !failed.iter().any(|(f, _)| f == i))
            .filter_map(|(i, uid)| {
                let placement = entry.plan.as_ref()?.pods.get(i as usize)?.1;
                Some((uid.clone(), placement))
            })
            .collect();
        let requests: Vec<_> = entry
            .alive()
            .filter(|(i, _)| !failed.iter().any(|(f, _)| f == i))
            .filter_map(|(i, _)| entry.job.pods.get(i as usize).copied())
            .collect();
        let template = entry.job.clone();
        let group = entry.group.clone();
        let workload = entry.workload.clone();
        self.dissolve(job, retry_at);
        self.run_as_adopted(template, requests, landed, group, workload, now_ms);
    }

    /// Records pods that are bound, with their known placements, as one running job.
    fn run_as_adopted(
        &mut self,
        template: Arc<Job>,
        requests: Vec<crate::model::PodRequest>,
        landed: Vec<(String, Placement)>,
        group: Option<(String, String)>,
        workload: String,
        now_ms: u64,
    ) {
        if landed.is_empty() {
            return;
        }
        let id = self.pods.new_job_id();
        let job = Job {
            id,
            pods: requests,
            ..(*template).clone()
        };
        let placements: Vec<Placement> = landed.iter().map(|(_, p)| *p).collect();
        if let Err(e) = self.scheduler.adopt(job.clone(), &placements, now_ms, true) {
            tracing::error!(
                "job {}: cannot record the pods that were bound: {e}",
                job.name
            );
            return;
        }
        for (index, (uid, _)) in landed.iter().enumerate() {
            if let Some(pod) = self.pods.entries.get_mut(uid) {
                pod.state = PodState::InJob {
                    job: id,
                    index: index as u32,
                };
            }
        }
        let plan = JobPlan {
            pods: placements
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    (
                        PodKey {
                            job: id,
                            pod: i as u32,
                        },
                        *p,
                    )
                })
                .collect(),
        };
        self.pods.jobs.insert(
            id,
            JobEntry {
                job: Arc::new(job),
                pods: landed.into_iter().map(|(uid, _)| Some(uid)).collect(),
                group,
                phase: JobPhase::Running,
                plan: Some(plan),
                started_ms: now_ms,
                workload,
            },
        );
    }

    /// The API server answered one eviction. A refusal (a disruption budget, 429) leaves
    /// the victim running: it is recorded as running again, and its preemptor, which
    /// waited for it, is released and requeued with a backoff.
    pub(super) fn eviction_answered(
        &mut self,
        victim: JobId,
        pod: u32,
        outcome: Result<(), WriteError>,
        now_ms: u64,
    ) {
        let Err(error) = outcome else {
            return;
        };
        let Some(entry) = self.pods.jobs.get(&victim) else {
            return;
        };
        let JobPhase::Evicting { by } = entry.phase else {
            return;
        };
        let victim_name = entry.job.name.clone();
        let alive = entry.pods.get(pod as usize).is_some_and(Option::is_some);
        if !alive {
            return;
        }
        if matches!(
            self.pods.jobs.get(&by).map(|e| &e.phase),
            Some(JobPhase::AwaitingVictims(_))
        ) {
            self.nominate(by, false);
            self.scheduler.bind_failed(by, now_ms);
            if let Some(preemptor) = self.pods.jobs.get_mut(&by) {
                preemptor.phase = JobPhase::Queued;
            }
            self.tell_pods(
                by,
                true,
                "FailedScheduling",
                &format!("preemption of {victim_name} refused ({error}); retrying later"),
            );
        }
        // The victim keeps running where it was.
        let Some(entry) = self.pods.jobs.remove(&victim) else {
            return;
        };
        let landed: Vec<(String, Placement)> = entry
            .alive()
            .filter_map(|(i, uid)| {
                Some((uid.clone(), entry.plan.as_ref()?.pods.get(i as usize)?.1))
            })
            .collect();
        let requests = entry
            .alive()
            .filter_map(|(i, _)| entry.job.pods.get(i as usize).copied())
            .collect();
        self.run_as_adopted(
            entry.job.clone(),
            requests,
            landed,
            entry.group.clone(),
            entry.workload.clone(),
            entry.started_ms,
        );
    }

    /// After the cluster changed shape: pods whose node vanished are forgotten (the API
    /// server deletes them), jobs that lost a reserved pod are queued again.
    pub(super) fn cluster_reshaped(&mut self, reshaped: Reshaped, _now_ms: u64) {
        for key in reshaped.lost_bound {
            let Some(entry) = self.pods.jobs.get_mut(&key.job) else {
                continue;
            };
            if let Some(uid) = entry.pods.get_mut(key.pod as usize).and_then(Option::take)
                && let Some(pod) = self.pods.entries.get_mut(&uid)
            {
                pod.state = PodState::Ignored;
            }
            if entry.alive().next().is_none() {
                self.pods.jobs.remove(&key.job);
            }
        }
        for job in reshaped.requeued {
            if let Some(entry) = self.pods.jobs.get_mut(&job) {
                entry.phase = JobPhase::Queued;
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
                target,
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
        let targets: Vec<_> = entry
            .alive()
            .filter_map(|(_, uid)| self.pods.entries.get(uid).map(|e| e.target.clone()))
            .collect();
        for target in targets {
            self.outputs.push(Output::PodStatus {
                target,
                scheduled: Some(Condition {
                    status: false,
                    reason: "Unschedulable",
                    message: message.to_owned(),
                }),
                nominated_node: None,
            });
        }
    }
}

/// ` (GPUs 0,1)` for a placement's devices, empty for none.
fn describe_devices(placement: &Placement) -> String {
    let devices: Vec<String> = crate::model::bits(placement.gpus.devices)
        .map(|d| d.to_string())
        .collect();
    if devices.is_empty() {
        return String::new();
    }
    if placement.gpus.milli_each < MILLI_PER_GPU {
        let share = crate::model::GpuRequest::Fraction(placement.gpus.milli_each);
        format!(" ({share} of GPU {})", devices.join(","))
    } else {
        format!(" (GPUs {})", devices.join(","))
    }
}
