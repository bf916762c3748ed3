//! Plugin verdicts: a code and a human reason, as in kube-scheduler, so that a summary such
//! as "0/5000 nodes are available: 3000 Insufficient nvidia.com/gpu" falls out of the
//! plugins' own words.

use std::borrow::Cow;

/// What a plugin decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Success,
    /// Not now; may fit after something changes (resources freed, preemption).
    Unschedulable,
    /// Will not fit here whatever changes (wrong pool, untolerated taint); preemption on
    /// this node cannot help.
    UnschedulableAndUnresolvable,
    /// Something went wrong inside the plugin.
    Error,
    /// Hold the job (Permit): it may proceed later.
    Wait,
    /// The plugin has nothing to say for this job; its later hooks are skipped.
    Skip,
}

/// A code with its reason. Success carries no reason and allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reason: Cow<'static, str>,
}

impl Status {
    pub const SUCCESS: Status = Status {
        code: Code::Success,
        reason: Cow::Borrowed(""),
    };

    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }

    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    #[inline]
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
}

/// Why a job could not be placed: each reason with the number of nodes that gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Nodes considered in all.
    pub nodes: u32,
    /// Reasons with node counts, in the order first seen.
    pub reasons: Vec<(Cow<'static, str>, u32)>,
    /// A job-level verdict (PreFilter, Permit) that ended the attempt before any node.
    pub job_reason: Option<Status>,
}

impl Diagnosis {
    pub fn job_level(status: Status) -> Self {
        Self {
            job_reason: Some(status),
            ..Self::default()
        }
    }

    pub fn add(&mut self, reason: Cow<'static, str>, nodes: u32) {
        match self.reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, count)) => *count += nodes,
            None => self.reasons.push((reason, nodes)),
        }
    }

    /// kube-scheduler's form: `0/5000 nodes are available: 3000 Insufficient
    /// nvidia.com/gpu, 2000 node(s) didn't match Pod's node affinity/selector.`
    pub fn message(&self) -> String {
        if let Some(status) = &self.job_reason {
            return status.reason.to_string();
        }
        let mut reasons = self.reasons.clone();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let listed: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        format!(
            "0/{} nodes are available: {}.",
            self.nodes,
            listed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_in_kube_scheduler_form() {
        let mut d = Diagnosis {
            nodes: 5000,
            ..Diagnosis::default()
        };
        d.add(
            "node(s) didn't match Pod's node affinity/selector".into(),
            1000,
        );
        d.add("Insufficient nvidia.com/gpu".into(), 3000);
        d.add("Insufficient nvidia.com/gpu".into(), 1000);
        assert_eq!(
            d.message(),
            "0/5000 nodes are available: 4000 Insufficient nvidia.com/gpu, \
             1000 node(s) didn't match Pod's node affinity/selector."
        );
    }
}
