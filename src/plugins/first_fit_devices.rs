//! `first-fit-devices` (Filter, Allocate): the lowest-numbered free devices, blind to how
//! they are linked, as a stock device plugin hands them out. The baseline's allocator; the
//! default profile uses `gpu-devices`.

use crate::cache::DeviceAlloc;
use crate::framework::{Allocate, CycleState, Filter, NodeView, Plugin, PodContext, Status};
use crate::model::GpuRequest;

use super::GpuDevices;

pub struct FirstFitDevices;

impl Plugin for FirstFitDevices {
    fn name(&self) -> &'static str {
        "first-fit-devices"
    }
}

impl Filter for FirstFitDevices {
    fn filter(&self, pod: &PodContext, state: &CycleState, node: NodeView) -> Status {
        // Which devices can take the pod does not depend on how they are chosen.
        GpuDevices.filter(pod, state, node)
    }
}

impl Allocate for FirstFitDevices {
    fn allocate(&self, pod: &PodContext, node: NodeView) -> Option<DeviceAlloc> {
        let free = node.state.free_whole();
        match pod.request.gpu {
            GpuRequest::Whole(0) => Some(DeviceAlloc::default()),
            GpuRequest::Whole(n) => {
                let set = crate::model::bits(free)
                    .take(n as usize)
                    .fold(0u32, |set, d| set | 1 << d);
                (set.count_ones() == n).then_some(DeviceAlloc::whole(set))
            }
            GpuRequest::Fraction(milli) => {
                let shared = node.state.shared_with_room(milli).map(|(d, _)| d).next();
                let device = shared.or_else(|| crate::model::bits(free).next())?;
                Some(DeviceAlloc {
                    devices: 1 << device,
                    milli_each: milli,
                })
            }
        }
    }
}
