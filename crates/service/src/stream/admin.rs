//! The admin stream's part of the hub (`GET /v1/admin/stream`, `routes::admin`): one
//! broadcast channel of `AdminSignal`s for every operator listening here, told of every
//! account whose usage changed. Across replicas it works as the account stream does, for all
//! accounts at once: a replica with an admin listener says so (`Relayed::AdminWatch`,
//! `AdminUnwatch`), and while another replica admin-watches, every usage change made here is
//! published (`Relayed::AccountUsage`) whether or not that account's stream is watched.

use std::collections::HashSet;

use tokio::sync::broadcast;

use super::{Relayed, StreamHub};

/// What an admin stream listener is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminSignal {
    /// The account's usage changed (the listener coalesces and reads it).
    Usage(i64),
    /// What changed may not all have been told (the relay was lost): start again.
    Resync,
}

/// Signals buffered per admin listener before it counts as lagging (it then resyncs).
const ADMIN_CHANNEL_CAPACITY: usize = 4096;

/// The admin listeners here, and the other replicas that have one.
pub(super) struct AdminChannel {
    tx: broadcast::Sender<AdminSignal>,
    watchers: HashSet<String>,
}

impl Default for AdminChannel {
    fn default() -> Self {
        AdminChannel {
            tx: broadcast::channel(ADMIN_CHANNEL_CAPACITY).0,
            watchers: HashSet::new(),
        }
    }
}

impl AdminChannel {
    fn listened(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    fn send(&self, signal: AdminSignal) {
        if self.listened() {
            let _ = self.tx.send(signal);
        }
    }

    /// Admin listeners here.
    pub(super) fn listeners(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl StreamHub {
    pub(super) fn with_admin<T>(&self, f: impl FnOnce(&mut AdminChannel) -> T) -> T {
        let mut guard = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// An admin listener: the receiver of its signals. The first one here is announced to
    /// the other replicas.
    pub fn subscribe_admin(&self) -> broadcast::Receiver<AdminSignal> {
        self.with_admin(|admin| {
            if !admin.listened() {
                self.publish(Relayed::AdminWatch);
            }
            admin.tx.subscribe()
        })
    }

    /// An admin listener left (after dropping its receiver).
    pub fn release_admin(&self) {
        self.with_admin(|admin| {
            if !admin.listened() {
                self.publish(Relayed::AdminUnwatch);
            }
        });
    }

    /// Account `account`'s usage changed here: the admin listeners here are told, and the
    /// replicas with one too unless the account stream's message (`relayed`) already went.
    pub(super) fn admin_usage(&self, account: i64, relayed: bool) {
        self.with_admin(|admin| {
            if !relayed && !admin.watchers.is_empty() {
                self.publish(Relayed::AccountUsage { a: account });
            }
            admin.send(AdminSignal::Usage(account));
        });
    }

    /// What another replica told this one of admin listening or of a usage change.
    pub(super) fn apply_admin(&self, sender: &str, message: &Relayed) {
        self.with_admin(|admin| match message {
            Relayed::AdminWatch => {
                admin.watchers.insert(sender.to_string());
            }
            Relayed::AdminUnwatch => {
                admin.watchers.remove(sender);
            }
            Relayed::AccountUsage { a } => admin.send(AdminSignal::Usage(*a)),
            Relayed::Hello => {
                // It forgot that operators listen here: tell it again.
                admin.watchers.remove(sender);
                if admin.listened() {
                    self.publish(Relayed::AdminWatch);
                }
            }
            _ => {}
        });
    }

    /// The relay was lost (`back`: false) or is back (true): other replicas' listening is
    /// forgotten; once back, this replica's is told again and its listeners start again.
    pub(super) fn admin_relay(&self, back: bool) {
        self.with_admin(|admin| {
            if !back {
                admin.watchers.clear();
            } else if admin.listened() {
                self.publish(Relayed::AdminWatch);
                admin.send(AdminSignal::Resync);
            }
        });
    }

    /// Forgets admin watchers that are not live replicas any more.
    pub(super) fn keep_admin_watchers(&self, live: &HashSet<String>) {
        self.with_admin(|admin| admin.watchers.retain(|w| live.contains(w)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Outgoing;
    use tokio::sync::mpsc;

    fn published(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<Relayed> {
        let mut out = Vec::new();
        while let Ok(Outgoing::Publish(m)) = rx.try_recv() {
            out.push(m);
        }
        out
    }

    /// Every usage change reaches the admin listeners here, and is published only while
    /// another replica has an admin listener (once, when the account stream's went too).
    #[test]
    fn usage_changes_reach_admin_listeners_here_and_on_replicas_that_watch() {
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        hub.usage_changed(7);
        assert_eq!(published(&mut rx), vec![], "nobody listens");
        let mut admin = hub.subscribe_admin();
        assert_eq!(published(&mut rx), vec![Relayed::AdminWatch]);
        hub.usage_changed(7);
        assert_eq!(admin.try_recv().unwrap(), AdminSignal::Usage(7));
        assert_eq!(published(&mut rx), vec![], "no other replica listens");
        hub.apply("b", Relayed::AdminWatch);
        hub.usage_changed(8);
        assert_eq!(published(&mut rx), vec![Relayed::AccountUsage { a: 8 }]);
        hub.apply("b", Relayed::AccountWatch { a: 8 });
        hub.usage_changed(8);
        assert_eq!(published(&mut rx), vec![Relayed::AccountUsage { a: 8 }]);
        hub.apply("c", Relayed::AccountUsage { a: 9 });
        assert_eq!(admin.try_recv().unwrap(), AdminSignal::Usage(8));
        assert_eq!(admin.try_recv().unwrap(), AdminSignal::Usage(8));
        assert_eq!(admin.try_recv().unwrap(), AdminSignal::Usage(9));
        hub.relay_lost();
        hub.relay_back();
        let after: Vec<_> = published(&mut rx)
            .into_iter()
            .filter(|m| *m == Relayed::AdminWatch)
            .collect();
        assert_eq!(after, vec![Relayed::AdminWatch]);
        assert_eq!(admin.try_recv().unwrap(), AdminSignal::Resync);
        hub.usage_changed(10);
        assert_eq!(published(&mut rx), vec![], "b's watch was forgotten");
        drop(admin);
        hub.release_admin();
        assert_eq!(published(&mut rx), vec![Relayed::AdminUnwatch]);
    }
}
