//! Where events wait between the commit and the broker: a table of the service's database.

use tegu_core::error::BoxError;

use crate::dead::DeadLetter;

use tegu_core::futures::BoxFuture;

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
    /// The lineage of the request that emitted it (`tegu_core::lineage::Lineage::headers`: its
    /// tenant, trace context, request id), as header name and value; empty when it had none.
    /// Stored with the event, so that every publish of it, the first and any after the broker
    /// lost it, carries them.
    pub headers: Vec<(String, String)>,
}

/// What [`OutboxStore::record_handled`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Written, in the current transaction if there is one.
    Written,
    /// There already: another delivery of the event handled it first. Nothing written.
    Already,
}

/// The outbox table. A singleton provides it (`dyn OutboxStore`); tegu-sqlx's `OutboxTable` is one,
/// on SQLite or PostgreSQL.
///
/// An event is stored with its headers, the lineage of the request that emitted it, which the
/// relay publishes with it each time. An event is pending from its insert until the relay has published it; then it is kept,
/// marked published, for a while (`outbox.keep_ms`), so that the outbox can publish it again
/// should the broker lose it before every instance had it (a NATS server restarted without
/// its store): [`republish`](Self::republish). Times are milliseconds since the Unix epoch, on
/// the relaying instance's clock.
pub trait OutboxStore: Send + Sync + 'static {
    /// Writes an event (its id, name, JSON and `headers`, the emitting request's lineage, which
    /// may be empty) **in the current transaction** (the request's, in its completion phase):
    /// it is stored with the request's data or not at all. Outside any transaction, on its own.
    /// [`pending`](Self::pending) gives the headers back as they were given, with the event.
    fn insert<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        payload: &'a [u8],
        headers: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<i64, BoxError>>;

    /// Up to `limit` of the oldest events pending (committed, not published yet), oldest
    /// first, with their headers, outside any transaction.
    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>>;

    /// Marks the events of `rows` published at `at`: they leave [`pending`](Self::pending),
    /// and are kept until [`purge`](Self::purge) deletes them.
    fn published<'a>(&'a self, rows: &'a [i64], at: i64) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Makes the events published at `since` or later pending again: the broker lost them
    /// (its state), and the relay publishes them again, under their ids. How many.
    fn republish(&self, since: i64) -> BoxFuture<'_, Result<u64, BoxError>>;

    /// Deletes the events published before `before`. How many.
    fn purge(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>>;

    /// Sets the event of `row` aside, with `reason`: the broker refused it for good
    /// ([`Refused`](crate::Refused)). It leaves the events [`pending`](Self::pending) returns,
    /// and becomes a dead letter ([`Why::Refused`](crate::Why::Refused)), with its headers, in
    /// one step (tegu-sqlx: moved to the table `di_outbox_dead_letters` in one transaction).
    fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Keeps `letter` (its `id` ignored) among the dead letters; its number. Outside any
    /// transaction.
    fn dead_letter<'a>(&'a self, letter: &'a DeadLetter) -> BoxFuture<'a, Result<i64, BoxError>>;

    /// Up to `limit` dead letters numbered above `after`, in their order (oldest first): a page
    /// of them, the next one after the last number of this one.
    fn dead_letters(&self, after: i64, limit: u32) -> BoxFuture<'_, Result<Vec<DeadLetter>, BoxError>>;

    /// The dead letter numbered `id`, if it is kept.
    fn dead_letter_by_id(&self, id: i64) -> BoxFuture<'_, Result<Option<DeadLetter>, BoxError>>;

    /// Removes the dead letter numbered `id` (replayed, or discarded); whether it was kept.
    fn remove_dead_letter(&self, id: i64) -> BoxFuture<'_, Result<bool, BoxError>>;

    /// Deletes the dead letters set aside before `before` (milliseconds since the Unix epoch).
    /// How many.
    fn purge_dead_letters(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>>;

    /// Records that `handler` handled the event `event_id` for `receiver` (the name this
    /// instance receives events under, [`Broker::receiver`](crate::Broker::receiver)) at `at`,
    /// **in the current transaction**, as [`insert`](Self::insert) writes: the outbox calls it
    /// in the handler's scope, so that the record commits with what the handler wrote in its
    /// transaction on this data source, or not at all. [`Recorded::Already`], writing nothing,
    /// if the record exists (another delivery of the event handled it first): the outbox then
    /// fails the handler's scope, which rolls its transaction back. The outbox calls it in the
    /// handler's scope only where [`in_writable_transaction`](Self::in_writable_transaction);
    /// elsewhere it records the event on its own once the handler has succeeded (outside any
    /// transaction: written at once).
    fn record_handled<'a>(
        &'a self,
        receiver: &'a str,
        event_id: &'a str,
        handler: &'a str,
        at: i64,
    ) -> BoxFuture<'a, Result<Recorded, BoxError>>;

    /// Whether a writable transaction of this store's data source is current (the calling
    /// scope's, not read-only): where [`record_handled`](Self::record_handled) writes with the
    /// handler's work. A store without transactions: `false`.
    fn in_writable_transaction(&self) -> bool;

    /// The handlers recorded as having handled the event `event_id` for `receiver`, outside any
    /// transaction.
    fn handled<'a>(&'a self, receiver: &'a str, event_id: &'a str) -> BoxFuture<'a, Result<Vec<String>, BoxError>>;

    /// Deletes the records of events handled before `before`, and the [order](Self::advance)
    /// records last advanced before it. How many records of events.
    fn purge_handled(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>>;

    /// Whether it numbers the events of a key ([`sequence`](Self::sequence)) and records how
    /// far each once-per-cluster handler is with them ([`advance`](Self::advance)): what an
    /// event type with a key (`external_event!(E = "name", key = ..)`) needs; the outbox
    /// refuses to build without it beside one. `false` by default.
    fn keeps_order(&self) -> bool {
        false
    }

    /// The next number of the events of `key` (1 for its first), counted **in the current
    /// transaction**, as [`insert`](Self::insert) writes: two transactions emitting events of
    /// one key number them in the order they commit (the second waits for the first's lock).
    fn sequence<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<u64, BoxError>> {
        let _ = key;
        Box::pin(std::future::ready(Err("this outbox store does not number the events of a key".into())))
    }

    /// The number of the last event of `key` that `handler` is done with for `receiver`
    /// (handled, or a dead letter), and then of the last of the numbers [skipped](Self::skip)
    /// right after it (from 0 when none is recorded), outside any transaction; `None` if
    /// neither gives one.
    fn done_upto<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, BoxError>> {
        let _ = (receiver, handler, key);
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Records that number `seq` of `key` will reach no handler: its event was refused by the
    /// broker for good. Outside any transaction; recording it twice is recording it once.
    /// Nothing by default.
    fn skip<'a>(&'a self, key: &'a str, seq: u64) -> BoxFuture<'a, Result<(), BoxError>> {
        let _ = (key, seq);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Records that `handler` is done, for `receiver`, with the events of `key` up to number
    /// `seq` (a lower number than the one recorded changes nothing), at `at`, **in the current
    /// transaction**: with the handler's work and its inbox record.
    fn advance<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
        seq: u64,
        at: i64,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        let _ = (receiver, handler, key, seq, at);
        Box::pin(std::future::ready(Err("this outbox store does not keep the order of a key's events".into())))
    }
}
