//! `EventId`: the id of the external event a handler handles, while it runs.

use std::future::Future;

tokio::task_local! {
    static CURRENT: EventId;
}

/// The id of the external event the current handler handles ([`EventId::current`]): the same
/// in every delivery, retry and replay of the event, in every instance. The idempotency key of
/// an effect outside the database (a mail, a card charge), which the inbox cannot make once:
/// the mail server or the payment provider recognises a repeat by it.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use tegu_core::{handlers, singleton_proto};
/// use tegu_outbox::EventId;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// pub struct Paid { pub cents: u64 }
/// tegu_outbox::external_event!(Paid = "billing.paid");
///
/// #[singleton_proto]
/// pub struct Receipts;
///
/// #[handlers]
/// impl Receipts {
///     #[event_handler(once_per_cluster)]
///     async fn send(&self, paid: &Paid) -> Result<(), String> {
///         let key = EventId::current().ok_or("not delivered by the outbox")?;
///         // mailer.send(.., idempotency_key = key.as_str())
///         let _ = (key, paid.cents);
///         Ok(())
///     }
/// }
///
/// assert_eq!(EventId::current(), None); // outside a handler the outbox runs
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

impl EventId {
    /// The id of the event the handler running on this task handles, when the outbox runs it
    /// (a delivery, a retry, a replay); `None` elsewhere, and in a task the handler spawned.
    pub fn current() -> Option<EventId> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `work` (the handlers of the event `id`) with `id` as [`EventId::current`].
pub(crate) async fn handling<T>(id: &str, work: impl Future<Output = T>) -> T {
    CURRENT.scope(EventId(id.to_owned()), work).await
}
