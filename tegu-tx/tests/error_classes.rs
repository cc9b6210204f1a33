//! The class of an event's failure before its transaction's commit (`TxError::Events`): the
//! class of its cause. An outbox write that found its pool busy is `Busy` (retryable, what
//! tegu-http answers 503 with `Retry-After`, finding `Busy` among the sources), not `Other`.

#![allow(missing_docs, missing_debug_implementations)]

use std::any::{Any, TypeId};
use std::sync::Arc;

use tegu_core::error::{BoxError, Busy};
use tegu_core::events::{EventBus, EventTransport};
use tegu_core::lineage::Lineage;
use tegu_core::registry::UnitFuture;
use tegu_core::{App, ProtoDef, intercept, singleton_proto};
use tegu_tx::{ErrorClass, TxConn, TxError, TxFuture, TxSource};

/// A data source whose transactions do nothing.
struct Nothing;

struct NothingTx;

impl TxSource for Nothing {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        Box::pin(async { Ok(Box::new(NothingTx) as Box<dyn TxConn>) })
    }
}

impl TxConn for NothingTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Ok(()) })
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Ok(()) })
    }
    fn savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn release_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn rollback_to_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// An event the outbox carries.
pub struct Shipped;

/// An event the outbox carries, whose write fails for another reason.
pub struct Refunded;

/// An outbox whose table write finds the pool busy for `Shipped`, and fails otherwise for
/// `Refunded`.
struct BusyOutbox;

impl EventTransport for BusyOutbox {
    fn carries(&self, event: TypeId) -> bool {
        event == TypeId::of::<Shipped>() || event == TypeId::of::<Refunded>()
    }

    fn send(&self, event: Arc<dyn Any + Send + Sync>, _: &Lineage) -> UnitFuture {
        let error: BoxError = if event.is::<Shipped>() {
            Box::new(Busy("the outbox's pool timed out".into()))
        } else {
            "the outbox's table is gone".into()
        };
        Box::pin(async move { Err(error) })
    }
}

/// Emits in a transaction of its own, or in the request's.
#[singleton_proto]
pub struct Shop;

#[intercept]
impl Shop {
    #[transactional(requires_new)]
    pub async fn ship(&self, events: &EventBus) -> Result<(), TxError> {
        events.emit(Shipped);
        Ok(())
    }

    #[transactional(requires_new)]
    pub async fn refund(&self, events: &EventBus) -> Result<(), TxError> {
        events.emit(Refunded);
        Ok(())
    }

    #[transactional]
    pub async fn ship_in_request(&self, events: &EventBus) -> Result<(), TxError> {
        events.emit(Shipped);
        Ok(())
    }
}

async fn app() -> App {
    App::builder()
        .register(ProtoDef::singleton::<Nothing>(|_| Ok(Nothing)).provides::<Nothing, dyn TxSource>(|n| n))
        .register(
            ProtoDef::singleton::<BusyOutbox>(|_| Ok(BusyOutbox)).provides::<BusyOutbox, dyn EventTransport>(|o| o),
        )
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_event_whose_outbox_write_found_the_pool_busy_is_busy() {
    let app = app().await;
    let (shop, events) = (app.get_object::<Shop>().unwrap(), app.events());
    let shipped = app.run_in_context(shop.ship(&events)).await;
    let error = shipped.expect_err("the outbox write failed");
    assert!(matches!(error, TxError::Events { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Busy, "{error}");
    assert!(error.class().retryable());

    // Another cause keeps its class: none here.
    let refunded = app.run_in_context(shop.refund(&events)).await;
    let error = refunded.expect_err("the outbox write failed");
    assert_eq!(error.class(), ErrorClass::Other, "{error}");
}

/// In the request's transaction, the commit fails the completion phase: tegu-http answers 503
/// for an error with `Busy` among its sources (`DiError::is_busy`), the class says the same.
#[tokio::test]
async fn a_busy_outbox_write_at_the_requests_commit_is_busy_for_tegu_http_too() {
    let app = app().await;
    let (shop, events) = (app.get_object::<Shop>().unwrap(), app.events());
    let completed = app.try_run_in_context(async { shop.ship_in_request(&events).await.unwrap() }).await;
    let error = completed.expect_err("the commit failed");
    assert!(error.is_busy(), "{error}");
    let tegu_core::DiError::Hook { source, .. } = &error else { panic!("{error:?}") };
    let tx = source.downcast_ref::<TxError>().expect("the commit's TxError");
    assert_eq!(tx.class(), ErrorClass::Busy, "{tx}");
}
