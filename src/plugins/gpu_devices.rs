//! `gpu-devices` (Filter, Allocate): the exact devices of each pod. Whole GPUs take the
//! best-connected free set (all NVLink if such a set is free, else one NUMA node, then
//! across). A fraction shares the fullest healthy device it fits on, or else opens the free
//! device that breaks the smallest island. Unhealthy devices are never given out.

use crate::cache::DeviceAlloc;
use crate::framework::{Allocate, CycleState, Filter, NodeView, Plugin, PodContext, Status};
use crate::model::GpuRequest;

pub struct GpuDevices;

impl Plugin for GpuDevices {
    fn name(&self) -> &'static str {
        "gpu-devices"
    }
}

impl Filter for GpuDevices {
    fn filter(&self, pod: &PodContext, _state: &CycleState, node: NodeView) -> Status {
        match pod.request.gpu {
            GpuRequest::Fraction(milli) => {
                let shared = node.state.shared_with_room(milli).next().is_some();
                if shared || node.state.free_whole() != 0 {
                    Status::SUCCESS
                } else {
                    Status::unschedulable("no GPU device with room for the fraction")
                }
            }
            // Any free set of that size is a valid allocation.
            GpuRequest::Whole(n) if node.state.free_whole_count() >= n => Status::SUCCESS,
            GpuRequest::Whole(_) => Status::unschedulable("Insufficient nvidia.com/gpu"),
        }
    }
}

impl Allocate for GpuDevices {
    fn allocate(&self, pod: &PodContext, node: NodeView) -> Option<DeviceAlloc> {
        let free = node.state.free_whole();
        match pod.request.gpu {
            GpuRequest::Whole(0) => Some(DeviceAlloc::default()),
            GpuRequest::Whole(n) => node.spec.links.best_set(free, n).map(DeviceAlloc::whole),
            GpuRequest::Fraction(milli) => {
                let fullest = node
                    .state
                    .shared_with_room(milli)
                    .max_by_key(|&(device, used)| (used, std::cmp::Reverse(device)))
                    .map(|(device, _)| 1u32 << device);
                let device = fullest.or_else(|| node.spec.links.best_set(free, 1))?;
                Some(DeviceAlloc {
                    devices: device,
                    milli_each: milli,
                })
            }
        }
    }
}
