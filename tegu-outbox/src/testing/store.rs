//! `MemoryStore`: an [`OutboxStore`] in memory, its rows as tegu-sqlx's `OutboxTable` keeps them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tegu_core::{ProtoDef, error::BoxError};

use crate::dead::{DeadLetter, Why};
use crate::store::{OutboxStore, Recorded, Stored};
use tegu_core::futures::BoxFuture;

/// A row of a [`MemoryStore`]: an event, pending or published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Row {
    /// The event.
    pub event: Stored,
    /// When it was marked published (milliseconds since the Unix epoch, as the relay gives
    /// them); `None` while it is pending.
    pub published_at: Option<i64>,
}

/// An [`OutboxStore`] in memory, for tests: its rows in a `Mutex`, with the semantics of
/// tegu-sqlx's `OutboxTable` (the table `di_outbox` and `di_outbox_set_aside`):
///
/// - [`insert`](OutboxStore::insert) numbers rows from 1 up, never reusing a number, and keeps
///   the event's headers with it (in [`Stored::headers`], through every state below);
/// - [`pending`](OutboxStore::pending): the oldest rows not published, in row order;
/// - [`published`](OutboxStore::published) marks rows published at a time (rows it does not
///   have are skipped), [`republish`](OutboxStore::republish) makes those published at or after
///   a time pending again, [`purge`](OutboxStore::purge) deletes those published before a time
///   (never a pending one);
/// - [`set_aside`](OutboxStore::set_aside) moves a row, pending or not, out of the table to
///   the dead letters ([`Why::Refused`], the reason as its error);
/// - the [dead letters](Self::dead) are numbered from 1 up, never reusing a number, listed by
///   number, purged by the time they were set aside;
/// - the [inbox](Self::inbox) records a handler's handling of an event once per receiver
///   ([`record_handled`](OutboxStore::record_handled) is [`Recorded::Already`] the second time), purged by
///   the time it was handled.
///
/// One difference: there is no transaction. An event is written at once and stays, even if
/// the request's unit of work rolls back after (with `OutboxTable`, it goes with the rollback).
///
/// A clone is the same store: register it with [`proto`](Self::proto) and keep a clone to
/// read [`rows`](Self::rows) and [`dead`](Self::dead).
///
/// # Examples
///
/// ```
/// use tegu_outbox::OutboxStore;
/// use tegu_outbox::testing::MemoryStore;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let outbox = MemoryStore::new();
/// // The emitting request's lineage, as headers.
/// let headers = [("tegu-tenant".to_owned(), "acme".to_owned())];
/// let row = outbox.insert("5f0c1e2d", "todos.completed", br#"{"id":1}"#, &headers).await?;
/// let pending = outbox.pending(10).await?;
/// assert_eq!((pending.len(), pending[0].row), (1, row));
/// assert_eq!(pending[0].headers, headers);
/// // Published at 1000 (ms since the epoch): kept, no longer pending.
/// outbox.published(&[row], 1_000).await?;
/// assert!(outbox.pending(10).await?.is_empty());
/// assert_eq!(outbox.rows()[0].published_at, Some(1_000));
/// // The broker lost it: pending again, then published and, later, purged.
/// assert_eq!(outbox.republish(1_000).await?, 1);
/// assert_eq!(outbox.pending(10).await?.len(), 1);
/// outbox.published(&[row], 2_000).await?;
/// assert_eq!(outbox.purge(3_000).await?, 1);
/// assert!(outbox.rows().is_empty());
///
/// // An event the broker refuses for good is a dead letter, with the reason.
/// let row = outbox.insert("9a8b7c6d", "todos.completed", &[b'x'; 2048], &[]).await?;
/// outbox.set_aside(row, "too large").await?;
/// assert!(outbox.pending(10).await?.is_empty());
/// let dead = outbox.dead();
/// assert_eq!((dead[0].event_id.as_str(), dead[0].error.as_str()), ("9a8b7c6d", "too large"));
/// assert_eq!(dead[0].why, tegu_outbox::Why::Refused);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    table: Arc<Mutex<Table>>,
}

/// The rows, and those set aside.
#[derive(Debug, Default)]
struct Table {
    /// The last row number given.
    last: i64,
    rows: BTreeMap<i64, Row>,
    /// The last dead letter's number given.
    last_dead: i64,
    dead: BTreeMap<i64, DeadLetter>,
    /// The inbox: (receiver, event id, handler) and when it was handled.
    inbox: BTreeMap<(String, String, String), i64>,
    /// The last number of each key's events.
    keys: BTreeMap<String, u64>,
    /// How far each (receiver, handler) is with each key's events, and since when.
    order: BTreeMap<(String, String, String), (u64, i64)>,
    /// The numbers of keys' events the broker refused.
    skips: std::collections::BTreeSet<(String, u64)>,
}

impl MemoryStore {
    /// An empty outbox.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// The proto that provides this store to an App, as `dyn OutboxStore` (and as
    /// `MemoryStore`, this handle): `App::builder().register(store.proto())`.
    pub fn proto(&self) -> ProtoDef {
        let store = self.clone();
        ProtoDef::singleton::<MemoryStore>(move |_| Ok(store.clone())).provides::<MemoryStore, dyn OutboxStore>(|s| s)
    }

    /// Every row of the table, pending or published, in row order.
    pub fn rows(&self) -> Vec<Row> {
        self.table().rows.values().cloned().collect()
    }

    /// The dead letters kept, by number.
    pub fn dead(&self) -> Vec<DeadLetter> {
        self.table().dead.values().cloned().collect()
    }

    /// The inbox: who handled which event, as `(receiver, event id, handler)`, in that order.
    pub fn inbox(&self) -> Vec<(String, String, String)> {
        self.table().inbox.keys().cloned().collect()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A future of the result computed now.
fn ready<'a, T: Send + 'a>(result: T) -> BoxFuture<'a, Result<T, BoxError>> {
    Box::pin(std::future::ready(Ok(result)))
}

impl OutboxStore for MemoryStore {
    fn insert<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        payload: &'a [u8],
        headers: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<i64, BoxError>> {
        let mut table = self.table();
        table.last += 1;
        let row = table.last;
        let event = Stored {
            row,
            id: id.to_owned(),
            name: name.to_owned(),
            payload: payload.to_vec(),
            headers: headers.to_vec(),
        };
        table.rows.insert(row, Row { event, published_at: None });
        ready(row)
    }

    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
        let table = self.table();
        let pending = table
            .rows
            .values()
            .filter(|row| row.published_at.is_none())
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|row| row.event.clone())
            .collect();
        ready(pending)
    }

    fn published<'a>(&'a self, rows: &'a [i64], at: i64) -> BoxFuture<'a, Result<(), BoxError>> {
        let mut table = self.table();
        for row in rows {
            if let Some(row) = table.rows.get_mut(row) {
                row.published_at = Some(at);
            }
        }
        ready(())
    }

    fn republish(&self, since: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        let mut table = self.table();
        let mut count = 0;
        for row in table.rows.values_mut().filter(|row| row.published_at.is_some_and(|at| at >= since)) {
            row.published_at = None;
            count += 1;
        }
        ready(count)
    }

    fn purge(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        let mut table = self.table();
        let len = table.rows.len();
        table.rows.retain(|_, row| row.published_at.is_none_or(|at| at >= before));
        ready((len - table.rows.len()) as u64)
    }

    fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        let mut table = self.table();
        if let Some(row) = table.rows.remove(&row) {
            let Stored { id, name, payload, headers, .. } = row.event;
            let mut letter = DeadLetter::new(Why::Refused, id, name, payload, headers);
            letter.error = reason.to_owned();
            table.keep(letter);
        }
        ready(())
    }

    fn dead_letter<'a>(&'a self, letter: &'a DeadLetter) -> BoxFuture<'a, Result<i64, BoxError>> {
        ready(self.table().keep(letter.clone()))
    }

    fn dead_letters(&self, after: i64, limit: u32) -> BoxFuture<'_, Result<Vec<DeadLetter>, BoxError>> {
        let table = self.table();
        let page = table
            .dead
            .range(after.saturating_add(1)..)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(_, letter)| letter.clone())
            .collect();
        ready(page)
    }

    fn dead_letter_by_id(&self, id: i64) -> BoxFuture<'_, Result<Option<DeadLetter>, BoxError>> {
        ready(self.table().dead.get(&id).cloned())
    }

    fn remove_dead_letter(&self, id: i64) -> BoxFuture<'_, Result<bool, BoxError>> {
        ready(self.table().dead.remove(&id).is_some())
    }

    fn purge_dead_letters(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        let mut table = self.table();
        let len = table.dead.len();
        table.dead.retain(|_, letter| letter.at >= before);
        ready((len - table.dead.len()) as u64)
    }

    fn record_handled<'a>(
        &'a self,
        receiver: &'a str,
        event_id: &'a str,
        handler: &'a str,
        at: i64,
    ) -> BoxFuture<'a, Result<Recorded, BoxError>> {
        let key = (receiver.to_owned(), event_id.to_owned(), handler.to_owned());
        let mut table = self.table();
        if table.inbox.contains_key(&key) {
            return ready(Recorded::Already);
        }
        table.inbox.insert(key, at);
        ready(Recorded::Written)
    }

    /// No transactions: the outbox records a handled event once its handler has succeeded.
    fn in_writable_transaction(&self) -> bool {
        false
    }

    fn handled<'a>(&'a self, receiver: &'a str, event_id: &'a str) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
        let handlers = self
            .table()
            .inbox
            .keys()
            .filter(|(r, e, _)| r == receiver && e == event_id)
            .map(|(_, _, handler)| handler.clone())
            .collect();
        ready(handlers)
    }

    fn purge_handled(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        let mut table = self.table();
        let len = table.inbox.len();
        table.inbox.retain(|_, at| *at >= before);
        table.order.retain(|_, (_, at)| *at >= before);
        ready((len - table.inbox.len()) as u64)
    }

    fn keeps_order(&self) -> bool {
        true
    }

    fn sequence<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<u64, BoxError>> {
        let mut table = self.table();
        let seq = table.keys.entry(key.to_owned()).or_default();
        *seq += 1;
        let seq = *seq;
        ready(seq)
    }

    fn done_upto<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, BoxError>> {
        let at = (receiver.to_owned(), handler.to_owned(), key.to_owned());
        let table = self.table();
        let done = table.order.get(&at).map(|(seq, _)| *seq);
        let mut upto = done.unwrap_or(0);
        while table.skips.contains(&(key.to_owned(), upto + 1)) {
            upto += 1;
        }
        ready((done.is_some() || upto > 0).then_some(upto))
    }

    fn skip<'a>(&'a self, key: &'a str, seq: u64) -> BoxFuture<'a, Result<(), BoxError>> {
        self.table().skips.insert((key.to_owned(), seq));
        ready(())
    }

    fn advance<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
        seq: u64,
        at: i64,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        let mut table = self.table();
        let entry = table.order.entry((receiver.to_owned(), handler.to_owned(), key.to_owned())).or_insert((seq, at));
        *entry = (entry.0.max(seq), at);
        ready(())
    }
}

impl Table {
    /// Keeps `letter` under the next number; that number.
    fn keep(&mut self, mut letter: DeadLetter) -> i64 {
        self.last_dead += 1;
        letter.id = self.last_dead;
        self.dead.insert(letter.id, letter);
        self.last_dead
    }
}
