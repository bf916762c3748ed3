//! Turns a watcher's event stream into changes a store can apply, atomically across a
//! relist: after a watch was dropped or expired (410 Gone), the watcher lists everything
//! again, and whatever the store knew that the new listing lacks was deleted meanwhile.
//! A listing may also be awaited anew ([`Resync::await_anew`]): until one begun after
//! that has been delivered, the store is not current.

use kube::runtime::watcher;

/// A change to one kind of object.
#[derive(Debug)]
pub enum Change<K> {
    Apply(K),
    Delete(K),
    /// The complete, current set of objects: anything else known is gone.
    Relisted(Vec<K>),
}

impl<K> Change<K> {
    /// The objects to apply, and the keys, among `known`, of the objects that are gone.
    pub fn split<Key: PartialEq + Ord>(
        self,
        key: impl Fn(&K) -> Key,
        known: impl Iterator<Item = Key>,
    ) -> (Vec<K>, Vec<Key>) {
        match self {
            Change::Apply(object) => (vec![object], Vec::new()),
            Change::Delete(object) => (Vec::new(), vec![key(&object)]),
            Change::Relisted(objects) => {
                let mut listed: Vec<Key> = objects.iter().map(&key).collect();
                listed.sort_unstable();
                let gone = known.filter(|k| listed.binary_search(k).is_err()).collect();
                (objects, gone)
            }
        }
    }
}

/// One watch stream's relist buffer.
#[derive(Debug)]
pub struct Resync<K> {
    buffer: Option<Vec<K>>,
    synced: bool,
    anew: Anew,
}

/// Where a listing awaited anew stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anew {
    /// None is awaited.
    No,
    /// One is awaited, and has not begun.
    Awaited,
    /// The one awaited has begun: the next complete listing is it.
    Begun,
}

impl<K> Default for Resync<K> {
    fn default() -> Self {
        Self {
            buffer: None,
            synced: false,
            anew: Anew::No,
        }
    }
}

impl<K> Resync<K> {
    /// Whether a complete listing has been delivered at least once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// A listing is awaited anew: the store is not current until the watch has said it
    /// began one ([`Resync::begun_anew`]) and that listing is complete. A listing under
    /// way meanwhile may have been read before, so its end does not count.
    pub fn await_anew(&mut self) {
        self.anew = Anew::Awaited;
    }

    /// The watch began the listing awaited anew.
    pub fn begun_anew(&mut self) {
        if self.anew == Anew::Awaited {
            self.anew = Anew::Begun;
        }
    }

    /// Whether a listing awaited anew is yet to be delivered.
    pub fn awaits_anew(&self) -> bool {
        self.anew != Anew::No
    }

    /// The change an event makes, if any yet: objects of a relist are held back until
    /// the listing is complete.
    pub fn feed(&mut self, event: watcher::Event<K>) -> Option<Change<K>> {
        match event {
            watcher::Event::Apply(object) => Some(Change::Apply(object)),
            watcher::Event::Delete(object) => Some(Change::Delete(object)),
            watcher::Event::Init => {
                self.buffer = Some(Vec::new());
                None
            }
            watcher::Event::InitApply(object) => match &mut self.buffer {
                Some(buffer) => {
                    buffer.push(object);
                    None
                }
                None => Some(Change::Apply(object)),
            },
            watcher::Event::InitDone => {
                self.synced = true;
                if self.anew == Anew::Begun {
                    self.anew = Anew::No;
                }
                Some(Change::Relisted(self.buffer.take().unwrap_or_default()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_reports_what_vanished_meanwhile() {
        let mut resync: Resync<(u32, &str)> = Resync::default();
        assert!(resync.feed(watcher::Event::Init).is_none());
        assert!(resync.feed(watcher::Event::InitApply((1, "a"))).is_none());
        assert!(resync.feed(watcher::Event::InitApply((3, "c"))).is_none());
        assert!(!resync.synced());
        let change = resync.feed(watcher::Event::InitDone).unwrap();
        assert!(resync.synced());
        let (applied, gone) = change.split(|o| o.0, [1, 2, 3, 4].into_iter());
        assert_eq!(applied, [(1, "a"), (3, "c")]);
        assert_eq!(gone, [2, 4]);
        let change = resync.feed(watcher::Event::Delete((1, "a"))).unwrap();
        assert_eq!(change.split(|o| o.0, std::iter::empty()).1, [1]);
    }

    #[test]
    fn a_listing_awaited_anew_is_one_begun_after_the_watch_said_so() {
        let mut resync: Resync<u32> = Resync::default();
        resync.feed(watcher::Event::Init);
        resync.await_anew();
        // A relist under way when the listing was awaited began before: it does not count.
        resync.feed(watcher::Event::InitApply(1));
        assert!(resync.feed(watcher::Event::InitDone).is_some());
        assert!(resync.awaits_anew());
        resync.feed(watcher::Event::Init);
        resync.feed(watcher::Event::InitDone);
        assert!(
            resync.awaits_anew(),
            "a listing begun before the watch said so"
        );
        resync.begun_anew();
        resync.feed(watcher::Event::Init);
        assert!(resync.awaits_anew(), "under way");
        resync.feed(watcher::Event::InitDone);
        assert!(!resync.awaits_anew());
        assert!(resync.synced());
    }
}
