//! A fixed-length persistent array: a clone is O(1) and shares everything, and a change
//! copies only the path to the element it touches (a root, a branch and a leaf), so that
//! the cluster state's snapshots stay cheap while the search reads it at the speed of
//! three loads per element.
//!
//! The cache's arrays never change length (a cluster of another shape is a new state), so
//! the tree has a fixed shape: leaves of a power of two of elements, sized by the element
//! so that a copied leaf is about [`LEAF_BYTES`]; branches of a power of two of leaves,
//! chosen so that a branch and the root have about as many entries, which is what a change
//! copies besides its leaf. A general persistent vector (`imbl::Vector`, used here before)
//! also grows and splits, and pays for it on every read and every copy: see the README's
//! benchmark (a) for what replacing it saved.

use std::fmt;
use std::ops::{Index, IndexMut, Range};
use std::sync::Arc;

/// About how many bytes a leaf holds: what a change to one element copies of it.
const LEAF_BYTES: usize = 2048;

/// A run of consecutive elements, shared until changed.
type Leaf<T> = Arc<[T]>;
/// A run of consecutive leaves, shared until one of them is changed.
type Branch<T> = Arc<[Leaf<T>]>;

#[derive(Clone)]
pub struct PersistentArray<T> {
    root: Arc<[Branch<T>]>,
    len: usize,
    /// Leaves per branch: `1 << branch_shift`.
    branch_shift: u32,
}

impl<T: Clone> PersistentArray<T> {
    /// Elements per leaf: `1 << LEAF_SHIFT`, the most that fit [`LEAF_BYTES`] (at least one).
    const LEAF_SHIFT: u32 = match LEAF_BYTES.checked_div(size_of::<T>()) {
        Some(0 | 1) => 0,
        Some(per_leaf) => per_leaf.ilog2(),
        None => LEAF_BYTES.ilog2(),
    };
    const LEAF_MASK: usize = (1 << Self::LEAF_SHIFT) - 1;

    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        (index < self.len).then(|| {
            let leaf = index >> Self::LEAF_SHIFT;
            let branch = &self.root[leaf >> self.branch_shift];
            &branch[leaf & self.branch_mask()][index & Self::LEAF_MASK]
        })
    }

    /// The element, made this array's own first: the leaf and the path to it are copied
    /// when another clone shares them.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.len {
            return None;
        }
        let leaf = index >> Self::LEAF_SHIFT;
        let mask = self.branch_mask();
        let branch = &mut Arc::make_mut(&mut self.root)[leaf >> self.branch_shift];
        let leaf = &mut Arc::make_mut(branch)[leaf & mask];
        Some(&mut Arc::make_mut(leaf)[index & Self::LEAF_MASK])
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.range(0..self.len)
    }

    /// The elements of `range`, in order, read leaf by leaf.
    pub fn range(&self, range: Range<usize>) -> impl Iterator<Item = &T> {
        let Range { start, end } = range;
        assert!(
            start <= end && end <= self.len,
            "range {start}..{end} out of an array of {}",
            self.len
        );
        let leaves = match start < end {
            true => start >> Self::LEAF_SHIFT..((end - 1) >> Self::LEAF_SHIFT) + 1,
            false => 0..0,
        };
        leaves.flat_map(move |leaf| {
            let first = leaf << Self::LEAF_SHIFT;
            let elements = &self.root[leaf >> self.branch_shift][leaf & self.branch_mask()];
            let from = start.saturating_sub(first);
            let to = (end - first).min(elements.len());
            elements[from..to].iter()
        })
    }

    fn branch_mask(&self) -> usize {
        (1 << self.branch_shift) - 1
    }
}

impl<T: Clone> FromIterator<T> for PersistentArray<T> {
    fn from_iter<I: IntoIterator<Item = T>>(elements: I) -> Self {
        let elements: Vec<T> = elements.into_iter().collect();
        let len = elements.len();
        let per_leaf = 1 << Self::LEAF_SHIFT;
        let leaves: Vec<Leaf<T>> = elements.chunks(per_leaf).map(Arc::from).collect();
        // As many leaves per branch as branches, about: a change copies one of each.
        let branch_shift = leaves.len().isqrt().max(1).next_power_of_two().ilog2();
        let root: Arc<[Branch<T>]> = leaves.chunks(1 << branch_shift).map(Arc::from).collect();
        Self {
            root,
            len,
            branch_shift,
        }
    }
}

impl<T: Clone> Index<usize> for PersistentArray<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(element) => element,
            None => panic!("index {index} out of an array of {}", self.len),
        }
    }
}

/// Writing through an index makes the element this array's own first, as
/// [`PersistentArray::get_mut`] does.
impl<T: Clone> IndexMut<usize> for PersistentArray<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(index) {
            Some(element) => element,
            None => panic!("index {index} out of an array of {len}"),
        }
    }
}

impl<T: Clone + fmt::Debug> fmt::Debug for PersistentArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Elements of 256 bytes: leaves of 8.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Wide([u64; 32]);

    fn wide(n: u64) -> Wide {
        Wide([n; 32])
    }

    #[test]
    fn every_length_reads_back_in_order_whole_and_by_range() {
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 1000] {
            let array: PersistentArray<Wide> = (0..len as u64).map(wide).collect();
            assert_eq!(array.len(), len);
            assert!(
                array.iter().copied().eq((0..len as u64).map(wide)),
                "len {len}"
            );
            for i in 0..len {
                assert_eq!(array[i], wide(i as u64));
            }
            assert_eq!(array.get(len), None);
            for (start, end) in [(0, len), (len / 3, len / 2), (len / 2, len / 2), (len, len)] {
                let read: Vec<Wide> = array.range(start..end).copied().collect();
                let expected: Vec<Wide> = (start as u64..end as u64).map(wide).collect();
                assert_eq!(read, expected, "len {len}, {start}..{end}");
            }
        }
    }

    #[test]
    fn a_change_is_seen_by_its_array_only() {
        let mut array: PersistentArray<Wide> = (0..1000).map(wide).collect();
        let snapshot = array.clone();
        for i in [0, 7, 8, 500, 999] {
            *array.get_mut(i).unwrap() = wide(5000 + i as u64);
        }
        assert!(snapshot.iter().copied().eq((0..1000).map(wide)));
        for i in 0..1000 {
            let changed = [0, 7, 8, 500, 999].contains(&i);
            let expected = if changed { 5000 + i as u64 } else { i as u64 };
            assert_eq!(array[i], wide(expected), "element {i}");
        }
        assert_eq!(array.get_mut(1000), None);
    }

    #[test]
    fn a_change_copies_one_leaf_and_shares_the_others() {
        let mut array: PersistentArray<Wide> = (0..1000).map(wide).collect();
        let snapshot = array.clone();
        array.get_mut(500).unwrap().0[0] = 0;
        let shared = |a: &PersistentArray<Wide>, b: &PersistentArray<Wide>| {
            let leaves = |x: &PersistentArray<Wide>| -> Vec<*const Wide> {
                x.root
                    .iter()
                    .flat_map(|b| b.iter())
                    .map(|l| l.as_ptr())
                    .collect()
            };
            let (a, b) = (leaves(a), leaves(b));
            a.iter().zip(&b).filter(|(x, y)| x == y).count()
        };
        // 1000 elements of 256 bytes: 125 leaves of 8, branches of 16.
        assert_eq!(array.root.len(), 8);
        assert_eq!(shared(&array, &snapshot), 124);
    }

    #[test]
    #[should_panic(expected = "index 3 out of an array of 3")]
    fn reading_past_the_end_names_the_index() {
        let array: PersistentArray<u32> = (0..3).collect();
        let _ = array[3];
    }
}
