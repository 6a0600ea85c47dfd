//! Change notices: what the store tells those who keep something derived from its sessions
//! (the search index) when a session is added, removed or read anew.
//!
//! The store calls every listener on the thread that made the change, before the request
//! that made it is answered: a listener only records the notice (a queue, a counter) and
//! does its work elsewhere. Changes the store does not see happening (files of a sessions
//! directory changed while no request read them) are not told: a listener that must know
//! checks the files itself (see [`super::registry::Loaded::stamps`]).

use std::sync::{Arc, Mutex};

use super::lock;

/// What happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// A new upload was accepted.
    Added,
    /// An upload was deleted.
    Removed,
    /// A session of a sessions directory was parsed again because its files changed.
    Reloaded,
}

/// One change: which session, and what happened to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The session's id.
    pub id: String,
    /// What happened.
    pub kind: ChangeKind,
}

/// Something told of every change ([`super::Store::listen`]).
pub trait ChangeListener: std::fmt::Debug + Send + Sync {
    /// Called once per change, on the thread that made it: must return quickly and never
    /// block on the store.
    fn changed(&self, change: &Change);
}

/// The listeners of one store.
#[derive(Debug, Default)]
pub struct Listeners(Mutex<Vec<Arc<dyn ChangeListener>>>);

impl Listeners {
    /// Adds `listener`.
    pub fn add(&self, listener: Arc<dyn ChangeListener>) {
        lock(&self.0).push(listener);
    }

    /// Tells every listener of `change` (the list is copied out first: a listener may
    /// take its time without holding the others up).
    pub fn tell(&self, change: Change) {
        let listeners: Vec<Arc<dyn ChangeListener>> = lock(&self.0).clone();
        for listener in listeners {
            listener.changed(&change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<Change>>);

    impl ChangeListener for Recorder {
        fn changed(&self, change: &Change) {
            lock(&self.0).push(change.clone());
        }
    }

    #[test]
    fn every_listener_hears_every_change_in_order() {
        let listeners = Listeners::default();
        let (a, b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        listeners.add(a.clone());
        listeners.add(b.clone());
        let change = |id: &str, kind| Change { id: id.into(), kind };
        listeners.tell(change("s1", ChangeKind::Added));
        listeners.tell(change("s1", ChangeKind::Removed));
        for recorder in [a, b] {
            assert_eq!(
                *lock(&recorder.0),
                [change("s1", ChangeKind::Added), change("s1", ChangeKind::Removed)]
            );
        }
    }
}
