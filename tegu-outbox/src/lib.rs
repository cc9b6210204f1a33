//! Events that reach every instance of a service, with nothing lost between the commit and the
//! broker: the transactional outbox.
//!
//! An event type marked external ([`external_event!`]) is not handed to the in-process bus's
//! `after_commit` handlers by the request that emits it. Instead:
//!
//! 1. **In the request's transaction**: [`Outbox`], the App's `tegu_core::events::EventTransport`, writes it
//!    to the outbox table ([`OutboxStore`]; tegu-sqlx's `OutboxTable` on SQLite or PostgreSQL) in
//!    the request's completion phase, before the commit. The event is stored with the data or
//!    not at all; a failed write fails the request. The request's lineage (its tenant, trace
//!    context, request id: `tegu_core::lineage::Lineage::headers`) is stored with it, as headers.
//! 2. **After the commit**: the outbox's relay (a hosted service) publishes what the table holds
//!    to a [`Broker`] (tegu-nats' JetStream) under the event's id, with its headers, then deletes it. A process killed
//!    between the commit and the relay loses nothing: any instance's relay publishes what is left
//!    (polling), or this one on restart. Two relays may publish the same row; the broker keeps one
//!    per id (JetStream's deduplication window).
//! 3. **In every instance**: each instance's subscription (a durable consumer of its own)
//!    receives every event and hands it to its `after_commit` handlers
//!    (`tegu_core::events::EventBus::deliver_with`), each in a scope seeded with the lineage its
//!    headers carry (a value its lineage type refuses is left out), then acknowledges it. Delivery is at least once; the
//!    inbox ([`OutboxStore::record_handled`], written in the handler's transaction) records
//!    which handler handled which event for this instance, so that a redelivered one is not
//!    handled twice, also after a restart.
//!
//! Without an `Outbox` in the App (no broker configured), events stay in the process, as ever.
//!
//! ```rust,standalone_crate
//! use serde::{Deserialize, Serialize};
//!
//! /// Serialized as JSON into the outbox and onto the broker.
//! #[derive(Debug, Serialize, Deserialize)]
//! pub struct TodoCompleted { pub id: i64 }
//!
//! // Its name on the broker: the subject `events.todos.completed` on JetStream.
//! tegu_outbox::external_event!(TodoCompleted = "todos.completed");
//!
//! assert_eq!(tegu_outbox::external_name::<TodoCompleted>(), Some("todos.completed"));
//! ```
//!
//! Then register the pieces: `App::builder().register(Outbox::proto())`, an `OutboxStore`
//! (`tegu_sqlx::OutboxTable`) and a `Broker` (`tegu_nats::JetStream`). The guide's chapter "Running
//! more than one instance" puts them together.
//!
//! With the feature `testing`, the module `tegu_outbox::testing` has an in-memory broker and
//! outbox store for the tests of a service that uses the outbox.

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod admin;
mod broker;
mod clock;
mod dead;
mod event_id;
mod external;
mod outbox;
mod recent;
mod store;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use broker::{Ack, Broker, Outgoing, Received, Refused, Subscription};
pub use dead::{DeadLetter, Why};
pub use event_id::EventId;
pub use external::{external_name, valid_name};
pub use outbox::{Outbox, OutboxCounts, Replayed};
pub use store::{OutboxStore, Recorded, Stored};

/// The guide's chapter "Running more than one instance" (`docs/guide/instances.md`), compiled
/// as doctests here, where its crates are.
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../docs/guide/instances.md")]
    pub struct Instances;
}

/// What [`external_event!`] expands to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::external::{DeliverFn, ExternalEvent, decode_and_deliver, decodes, encode, key_of};
    pub use inventory;
}

/// Marks an event type as external: `external_event!(TodoCompleted = "todos.completed")`. The
/// type is `serde`'s `Serialize + Deserialize` (JSON on the wire); the name is its name on the
/// broker, dot-separated words of letters, digits, `-` and `_`, one per type. An App with an
/// [`Outbox`] sends such events through it (see the crate's documentation); one without keeps
/// them in the process.
///
/// With `key = |event| ..` (a closure without captures, giving anything `ToString`: an
/// aggregate's id), the events of one key are numbered as they commit, and each
/// once-per-cluster handler handles them in that order, a later one waiting for the one before
/// (its retries, or its dead letter) in whichever instance has it.
///
/// ```rust,standalone_crate
/// #[derive(serde::Serialize, serde::Deserialize)]
/// pub struct Paid { pub account: u64, pub cents: u64 }
///
/// // The payments of one account, in the order they were made.
/// tegu_outbox::external_event!(Paid = "billing.paid", key = |paid| paid.account);
/// ```
#[macro_export]
macro_rules! external_event {
    ($ty:ty = $name:literal) => {
        $crate::external_event!(@submit $ty, $name, ::core::option::Option::None);
    };
    ($ty:ty = $name:literal, key = $key:expr) => {
        $crate::external_event!(@submit $ty, $name, ::core::option::Option::Some({
            fn __tegu_key(event: &(dyn ::core::any::Any + ::core::marker::Send + ::core::marker::Sync)) -> ::std::string::String {
                $crate::__private::key_of::<$ty, _>(event, $key)
            }
            __tegu_key
        }));
    };
    (@submit $ty:ty, $name:literal, $key:expr) => {
        $crate::__private::inventory::submit! {
            $crate::__private::ExternalEvent {
                ty: ::core::any::TypeId::of::<$ty>,
                type_name: ::core::any::type_name::<$ty>,
                name: $name,
                encode: $crate::__private::encode::<$ty>,
                deliver: $crate::__private::decode_and_deliver::<$ty>,
                decodes: $crate::__private::decodes::<$ty>,
                key: $key,
            }
        }
    };
}
