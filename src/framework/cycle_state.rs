//! Typed data that the plugins of one scheduling cycle share (PreFilter computes, Filter
//! and Score read), and the world's time the cycle runs at. Dropped at the end of the
//! cycle; cloned cheaply (its entries are shared) for a pass of the search that adds to it.

use std::any::{Any, TypeId};
use std::sync::Arc;

#[derive(Clone)]
pub struct CycleState {
    now_ms: u64,
    /// A handful of entries, read once per plugin per node: a scan of a short list beats
    /// hashing the type id.
    entries: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
}

impl CycleState {
    /// A cycle at `now_ms` on the world's clock (virtual in the simulator).
    pub fn new(now_ms: u64) -> Self {
        Self {
            now_ms,
            entries: Vec::new(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    pub fn write<T: Any + Send + Sync>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.entries.iter_mut().find(|(t, _)| *t == id) {
            Some((_, slot)) => *slot = Arc::new(value),
            None => self.entries.push((id, Arc::new(value))),
        }
    }

    pub fn read<T: Any + Send + Sync>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.entries
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_type() {
        struct Pools(Vec<u16>);
        let mut state = CycleState::new(0);
        assert!(state.read::<Pools>().is_none());
        state.write(Pools(vec![1, 2]));
        assert_eq!(state.read::<Pools>().map(|p| p.0.len()), Some(2));
        state.write(Pools(vec![3]));
        assert_eq!(
            state.read::<Pools>().map(|p| p.0.len()),
            Some(1),
            "replaced"
        );
    }
}
