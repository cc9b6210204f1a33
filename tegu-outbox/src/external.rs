//! The event types marked external, registered through `inventory` by [`external_event!`].

use std::any::{Any, TypeId};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tegu_core::events::{DeliverTo, Deliveries, EventBus};
use tegu_core::lineage::Lineage;

use tegu_core::futures::BoxFuture;

/// Decodes an event's JSON and delivers it to the App's handlers it names ([`DeliverTo`]), each
/// handler's scope seeded with the lineage the event's headers carried.
pub type DeliverFn = for<'a> fn(
    &'a EventBus,
    &'a [u8],
    &'a Lineage,
    DeliverTo<'a>,
) -> BoxFuture<'a, Result<Deliveries, serde_json::Error>>;

/// What [`external_event!`](crate::external_event) submits: an event type, its name on the
/// broker, and how to encode and decode it.
#[derive(Debug)]
pub struct ExternalEvent {
    /// The event's type.
    pub ty: fn() -> TypeId,
    /// The event's type, for errors.
    pub type_name: fn() -> &'static str,
    /// Its name on the broker.
    pub name: &'static str,
    /// The event as JSON.
    pub encode: fn(&(dyn Any + Send + Sync)) -> Result<Vec<u8>, serde_json::Error>,
    /// Decodes JSON into the event and delivers it to this App's handlers, in scopes seeded
    /// with the given lineage.
    pub deliver: DeliverFn,
    /// Whether JSON decodes into the event, without delivering it.
    pub decodes: fn(&[u8]) -> Result<(), serde_json::Error>,
    /// The event's key (`key = ..`), whose events once-per-cluster handlers handle in emit
    /// order; `None`: no order.
    pub key: Option<fn(&(dyn Any + Send + Sync)) -> String>,
}

/// The key `key` gives an event of type `E`.
pub fn key_of<E: 'static, K: ToString>(event: &(dyn Any + Send + Sync), key: fn(&E) -> K) -> String {
    match event.downcast_ref::<E>() {
        Some(event) => key(event).to_string(),
        None => unreachable!("the outbox keys the events of the type it looked up"),
    }
}

/// A key as it travels in a header and is stored: its bytes other than ASCII letters, digits,
/// `-`, `_`, `.` and `:` percent-encoded, so that any key is a header value, and two keys
/// differ as their encodings do.
pub(crate) fn encode_key(key: &str) -> String {
    let mut encoded = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b':') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

inventory::collect!(ExternalEvent);

/// The JSON of an event of type `E`.
pub fn encode<E: Serialize + 'static>(event: &(dyn Any + Send + Sync)) -> Result<Vec<u8>, serde_json::Error> {
    match event.downcast_ref::<E>() {
        Some(event) => serde_json::to_vec(event),
        None => unreachable!("the outbox encodes the events of the type it looked up"),
    }
}

/// Whether `payload` decodes as an `E`.
pub fn decodes<E: DeserializeOwned>(payload: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<E>(payload).map(drop)
}

/// Decodes `payload` as an `E` and delivers it to `bus`'s handlers that `to` takes, each in a
/// scope seeded with `lineage` (`EventBus::deliver_each`).
pub fn decode_and_deliver<'a, E>(
    bus: &'a EventBus,
    payload: &'a [u8],
    lineage: &'a Lineage,
    to: DeliverTo<'a>,
) -> BoxFuture<'a, Result<Deliveries, serde_json::Error>>
where
    E: DeserializeOwned + Send + Sync + 'static,
{
    Box::pin(async move {
        let event: E = serde_json::from_slice(payload)?;
        Ok(bus.deliver_each(event, lineage, to).await)
    })
}

/// The lineage a received event's `headers` carry, for the App's lineage types: what its
/// handlers' scopes are seeded with. A value its type refuses (a forged tenant key) is left
/// out, and logged with the header's name, never the value.
pub(crate) fn lineage_from_headers(bus: &EventBus, headers: &[(String, String)]) -> Lineage {
    bus.lineage_from_headers(headers.iter().map(|(name, value)| (name.as_str(), value.as_str())))
}

/// The name `E` has on the broker, if it is marked external.
///
/// # Examples
///
/// ```rust,standalone_crate
/// #[derive(serde::Serialize, serde::Deserialize)]
/// pub struct Paid { pub cents: u64 }
/// tegu_outbox::external_event!(Paid = "billing.paid");
///
/// assert_eq!(tegu_outbox::external_name::<Paid>(), Some("billing.paid"));
/// assert_eq!(tegu_outbox::external_name::<String>(), None);
/// ```
pub fn external_name<E: 'static>() -> Option<&'static str> {
    inventory::iter::<ExternalEvent>.into_iter().find(|e| (e.ty)() == TypeId::of::<E>()).map(|e| e.name)
}

/// Whether `name` can name an event on a broker: dot-separated words of ASCII letters, digits,
/// `-` and `_` (a NATS subject's tokens, a Kafka topic's or Redis stream's characters).
///
/// # Examples
///
/// ```
/// assert!(tegu_outbox::valid_name("todos.completed"));
/// assert!(!tegu_outbox::valid_name("todos.*"));
/// assert!(!tegu_outbox::valid_name("todos..completed"));
/// ```
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('.')
            .all(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
}
