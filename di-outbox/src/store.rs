//! Where events wait between the commit and the broker: a table of the service's database.

use di_core::BoxError;

use crate::broker::BoxFuture;

/// An event in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its row in the table.
    pub row: i64,
    /// Its id: 128 random bits, unique across services and databases.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its JSON.
    pub payload: Vec<u8>,
}

/// The outbox table. A singleton provides it (`dyn OutboxStore`); di-sqlx's `OutboxTable` is one,
/// on SQLite or PostgreSQL.
pub trait OutboxStore: Send + Sync + 'static {
    /// Writes an event (its id, name and JSON) **in the current transaction** (the request's, in its completion phase):
    /// it is stored with the request's data or not at all. Outside any transaction, on its own.
    fn insert<'a>(&'a self, id: &'a str, name: &'a str, payload: &'a [u8]) -> BoxFuture<'a, Result<i64, BoxError>>;

    /// Up to `limit` of the oldest events committed, oldest first, outside any transaction.
    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>>;

    /// Deletes the events of `rows` (relayed).
    fn remove<'a>(&'a self, rows: &'a [i64]) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Sets the event of `row` aside, with `reason`: the broker refused it for good
    /// ([`Refused`](crate::Refused)). It leaves the events [`pending`](Self::pending) returns,
    /// and is kept where an operator can read it (di-sqlx: the table `di_outbox_set_aside`),
    /// never deleted by the outbox.
    fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>>;
}
