//! Jobs and pods. The unit of scheduling is the job: a gang whose pods are placed all or
//! none (a lone pod is a job of one).

use super::{GpuRequest, JobId, PoolId, TenantId};

/// What one pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodRequest {
    pub gpu: GpuRequest,
    pub cpu_milli: u64,
    pub memory_mib: u64,
}

impl PodRequest {
    pub fn gpus(gpu: GpuRequest) -> Self {
        Self {
            gpu,
            cpu_milli: 0,
            memory_mib: 0,
        }
    }
}

/// What a job is for; inference and training are placed differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Train,
    Inference,
    Dev,
    Unknown,
}

impl JobKind {
    pub fn parse(text: &str) -> Option<JobKind> {
        match text {
            "train" => Some(JobKind::Train),
            "inference" => Some(JobKind::Inference),
            "dev" => Some(JobKind::Dev),
            "unknown" | "" => Some(JobKind::Unknown),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            JobKind::Train => "train",
            JobKind::Inference => "inference",
            JobKind::Dev => "dev",
            JobKind::Unknown => "unknown",
        }
    }
}

/// A job: a gang of pods with one owner, priority and GPU-model choice.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub tenant: TenantId,
    pub priority: i32,
    pub kind: JobKind,
    /// The pools (GPU models) the job accepts; empty means any pool.
    pub pools: Vec<PoolId>,
    pub pods: Vec<PodRequest>,
    /// Submission time, milliseconds on the world's clock.
    pub submit_ms: u64,
    /// Run time once every pod is placed; `None` when unknown.
    pub duration_ms: Option<u64>,
}

impl Job {
    /// Milli-GPUs of the whole job.
    pub fn total_milli(&self) -> u64 {
        self.pods.iter().map(|p| p.gpu.milli()).sum()
    }

    pub fn accepts_pool(&self, pool: PoolId) -> bool {
        self.pools.is_empty() || self.pools.contains(&pool)
    }

    pub fn is_gang(&self) -> bool {
        self.pods.len() > 1
    }
}
