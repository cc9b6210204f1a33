//! A transport is given the lineage an event was emitted with, not that of the scope it is sent
//! from: an event held by a transaction of tenant `a`'s scope, emitted in a scope of tenant `b`
//! inside it, travels as `b`'s.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

use tegu_core::events::{EventHold, EventTransport};
use tegu_core::futures::UnitFuture;
use tegu_core::lineage::{Lineage, Tenant};
use tegu_core::{App, singleton_proto};

pub struct Moved;

#[singleton_proto(provides(dyn EventTransport))]
#[derive(Default)]
pub struct Wire {
    /// The tenant each send was given, and the one of the scope it ran in.
    sent: Mutex<Vec<(Option<String>, Option<String>)>>,
}

impl EventTransport for Wire {
    fn carries(&self, event: TypeId) -> bool {
        event == TypeId::of::<Moved>()
    }

    fn send(&self, _: Arc<dyn Any + Send + Sync>, lineage: &Lineage) -> UnitFuture {
        let key = |l: &Lineage| l.get::<Tenant>().map(|t| t.key().to_owned());
        self.sent.lock().unwrap().push((key(lineage), key(&Lineage::current())));
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn an_event_travels_with_the_lineage_it_was_emitted_with() {
    let app = App::builder().build().await.unwrap();
    let wire = app.get_object::<Wire>().unwrap();
    app.scope()
        .tenant("a")
        .unwrap()
        .try_run(async {
            // What a transaction begun in `a`'s scope does: hold the events of its work, then
            // send them before its commit, in `a`'s scope.
            let hold = EventHold::new();
            hold.run(app.scope().tenant("b").unwrap().run(async { app.events().emit(Moved) })).await;
            hold.prepare().await.unwrap();
            hold.release(true);
            // Emitted in `a`'s own scope: held by it, sent in its completion phase.
            app.events().emit(Moved);
        })
        .await
        .unwrap();
    let sent = wire.sent.lock().unwrap().clone();
    let some = |k: &str| Some(k.to_owned());
    assert_eq!(sent, [(some("b"), some("a")), (some("a"), some("a"))]);
}
