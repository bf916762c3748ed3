//! The event log (`--events FILE`): one JSON object per line, in time order, so that any
//! figure of a run can be recomputed by an independent tool. Node ids are the trace's node
//! names; device ids are indices `0..n-1` on the node.

use std::io::{self, Write};

use serde::Serialize;

use crate::cache::Placement;
use crate::framework::JobPlan;
use crate::model::{ClusterSpec, Job, bits};

/// One device given to a pod.
#[derive(Serialize)]
pub struct DeviceShare {
    pub id: usize,
    pub milli: u32,
}

/// One pod's placement as written to the log.
#[derive(Serialize)]
pub struct PodPlacement<'a> {
    pub node: &'a str,
    pub devices: Vec<DeviceShare>,
    /// The RDMA NICs paired with the pod's devices, each once, lowest device's first (none
    /// for a CPU-only pod).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<u8>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Event<'a> {
    Submit {
        t: f64,
        job: &'a str,
        /// The tenant the job is queued in.
        tenant: &'a str,
        /// The tenant the trace names, where none of that name is declared (the job is
        /// then queued in the default tenant).
        #[serde(skip_serializing_if = "Option::is_none")]
        unknown_tenant: Option<&'a str>,
        pods: usize,
        gpus_per_pod: String,
        gpu_model: String,
        priority: i32,
        kind: &'static str,
    },
    Place {
        t: f64,
        job: &'a str,
        pods: Vec<PodPlacement<'a>>,
    },
    Finish {
        t: f64,
        job: &'a str,
    },
    Preempt {
        t: f64,
        job: &'a str,
        by: &'a str,
        reason: &'a str,
    },
    Requeue {
        t: f64,
        job: &'a str,
        reason: &'a str,
    },
    /// A fill dropped the job: it did not fit when it arrived.
    Drop {
        t: f64,
        job: &'a str,
        reason: &'a str,
    },
    /// Room held for backfill heads from `t` on, in milli-GPUs: allocated in GAR.
    Held {
        t: f64,
        milli: u64,
    },
}

/// Writes events as JSON Lines; a no-op when there is no file.
pub struct EventLog {
    out: Option<Box<dyn Write + Send>>,
}

fn seconds(t_ms: u64) -> f64 {
    t_ms as f64 / 1000.0
}

impl EventLog {
    pub fn new(out: Option<Box<dyn Write + Send>>) -> Self {
        Self { out }
    }

    pub fn disabled() -> Self {
        Self { out: None }
    }

    fn write(&mut self, event: &Event) -> io::Result<()> {
        if let Some(out) = &mut self.out {
            serde_json::to_writer(&mut *out, event)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    pub fn enabled(&self) -> bool {
        self.out.is_some()
    }

    pub fn submit(
        &mut self,
        t_ms: u64,
        job: &Job,
        tenant: &str,
        unknown_tenant: Option<&str>,
        cluster: &ClusterSpec,
    ) -> io::Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let models: Vec<&str> = job
            .pools
            .iter()
            .filter_map(|&p| cluster.pool(p).gpu_model.as_deref())
            .collect();
        self.write(&Event::Submit {
            t: seconds(t_ms),
            job: &job.name,
            tenant,
            unknown_tenant,
            pods: job.pods.len(),
            gpus_per_pod: job.pods.first().map_or("0".into(), |p| p.gpu.to_string()),
            gpu_model: models.join("|"),
            priority: job.priority,
            kind: job.kind.name(),
        })
    }

    pub fn place(
        &mut self,
        t_ms: u64,
        job: &Job,
        plan: &JobPlan,
        cluster: &ClusterSpec,
    ) -> io::Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let pods = plan
            .pods
            .iter()
            .map(|(_, p)| pod_placement(p, cluster))
            .collect();
        self.write(&Event::Place {
            t: seconds(t_ms),
            job: &job.name,
            pods,
        })
    }

    pub fn finish(&mut self, t_ms: u64, job: &Job) -> io::Result<()> {
        self.write(&Event::Finish {
            t: seconds(t_ms),
            job: &job.name,
        })
    }

    pub fn preempt(&mut self, t_ms: u64, job: &Job, by: &Job, reason: &str) -> io::Result<()> {
        self.write(&Event::Preempt {
            t: seconds(t_ms),
            job: &job.name,
            by: &by.name,
            reason,
        })
    }

    pub fn requeue(&mut self, t_ms: u64, job: &Job, reason: &str) -> io::Result<()> {
        self.write(&Event::Requeue {
            t: seconds(t_ms),
            job: &job.name,
            reason,
        })
    }

    pub fn drop_job(&mut self, t_ms: u64, job: &Job, reason: &str) -> io::Result<()> {
        self.write(&Event::Drop {
            t: seconds(t_ms),
            job: &job.name,
            reason,
        })
    }

    pub fn held(&mut self, t_ms: u64, milli: u64) -> io::Result<()> {
        self.write(&Event::Held {
            t: seconds(t_ms),
            milli,
        })
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

/// A pod's node name and exact device shares.
fn pod_placement<'a>(placement: &Placement, cluster: &'a ClusterSpec) -> PodPlacement<'a> {
    let node = cluster.node(placement.node);
    let mut nics: Vec<u8> = Vec::new();
    for nic in bits(placement.gpus.devices).map(|device| node.links.nic(device)) {
        if !nics.contains(&nic) {
            nics.push(nic);
        }
    }
    PodPlacement {
        node: &node.name,
        nics,
        devices: bits(placement.gpus.devices)
            .map(|id| DeviceShare {
                id,
                milli: placement.gpus.milli_each,
            })
            .collect(),
    }
}
