//! An event sent outside a scope's completion phase (emitted outside a scope, or by work after
//! it) whose send meets a busy database (an outbox's write waiting for a lock) is tried again
//! within the background-task timeout, not lost at the first refusal.

#![allow(missing_docs, missing_debug_implementations)]

use std::any::{Any, TypeId};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tegu_core::error::Busy;
use tegu_core::futures::UnitFuture;
use tegu_core::{App, events::EventTransport, singleton_proto};

pub struct Shipped;

/// Busy for its first three sends.
#[singleton_proto(provides(dyn EventTransport))]
#[derive(Default)]
pub struct BusyWire {
    attempts: AtomicUsize,
    sent: Mutex<usize>,
}

impl EventTransport for BusyWire {
    fn carries(&self, event: TypeId) -> bool {
        event == TypeId::of::<Shipped>()
    }

    fn send(&self, _: std::sync::Arc<dyn Any + Send + Sync>, _: &tegu_core::lineage::Lineage) -> UnitFuture {
        if self.attempts.fetch_add(1, Ordering::SeqCst) < 3 {
            return Box::pin(async { Err(Box::new(Busy("the database is locked".into())) as _) });
        }
        *self.sent.lock().unwrap() += 1;
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn an_event_sent_outside_a_scope_is_tried_again_while_the_database_is_busy() {
    let app = App::builder().build().await.unwrap();
    app.events().emit(Shipped);
    app.shutdown().await.unwrap(); // waits for the send
    let wire = app.get_object::<BusyWire>().unwrap();
    assert_eq!(*wire.sent.lock().unwrap(), 1, "sent once the database was free");
    assert_eq!(wire.attempts.load(Ordering::SeqCst), 4);
}
