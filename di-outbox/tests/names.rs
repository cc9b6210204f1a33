//! An external event's name is checked when the App is built: one that is no valid name fails
//! `build()`, naming the type.

use di_core::futures::BoxFuture;
use di_core::{App, ProtoDef, error::BoxError};
use di_outbox::{Broker, Outbox, OutboxStore, Outgoing, Stored, Subscription};

/// Named with a space.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Badly;

di_outbox::external_event!(Badly = "badly named");

struct NoStore;

impl OutboxStore for NoStore {
    fn insert<'a>(&'a self, _: &'a str, _: &'a str, _: &'a [u8]) -> BoxFuture<'a, Result<i64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn pending(&self, _: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn published<'a>(&'a self, _: &'a [i64], _: i64) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
    fn republish(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn purge(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn set_aside<'a>(&'a self, _: i64, _: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("not in this test".into()) })
    }
}

struct NoBroker;

impl Broker for NoBroker {
    fn publish<'a>(&'a self, _: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        Box::pin(async { Err("no broker".into()) })
    }
}

#[tokio::test]
async fn a_bad_name_fails_the_build_naming_the_type() {
    let error = App::builder()
        .register(ProtoDef::singleton::<NoStore>(|_| Ok(NoStore)).provides::<NoStore, dyn OutboxStore>(|s| s))
        .register(ProtoDef::singleton::<NoBroker>(|_| Ok(NoBroker)).provides::<NoBroker, dyn Broker>(|b| b))
        .register(Outbox::proto())
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("names::Badly") && error.contains("\"badly named\""), "{error}");
}
