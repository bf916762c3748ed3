//! Dense integer ids. Every id indexes a vector in the cache or the cluster spec, so the hot
//! paths never hash a name.

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident($repr:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $repr);

        impl $name {
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

dense_id!(
    /// A node, in the order the cluster spec was built.
    NodeId(u32)
);
dense_id!(
    /// A node pool: all nodes of one GPU model (CPU-only nodes form a pool of their own).
    PoolId(u16)
);
dense_id!(
    /// A search group: the nodes of one pool under one leaf switch (a NodeNetGroup), or a
    /// block of pool nodes that have no leaf group.
    GroupId(u32)
);
dense_id!(
    /// A leaf switch group identified by its whole path (superspine, spine, leaf).
    LeafId(u32)
);
dense_id!(
    /// A job (a gang of pods; a lone pod is a job of one).
    JobId(u32)
);
dense_id!(
    /// A tenant, which owns a queue.
    TenantId(u16)
);
