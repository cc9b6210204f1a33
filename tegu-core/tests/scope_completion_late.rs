//! An event another task of the scope emits while the completion hooks run (a commit under
//! way) cannot be prepared before that commit: it is released after the phase, its
//! `before_commit` handler run then, and a failure there fails nothing that was committed.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::{Arc, Mutex};

use tegu_core::{App, context_proto, handlers, singleton_proto};

pub struct Late;

static JOURNAL: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// A unit of work whose commit waits for a task of the scope to emit.
#[context_proto(complete = commit)]
#[derive(Default)]
pub struct Unit {
    emitted: tokio::sync::Notify,
}

impl Unit {
    async fn commit(&self) {
        self.emitted.notified().await;
        JOURNAL.lock().unwrap().push("committed");
    }
}

#[singleton_proto]
#[derive(Default)]
pub struct Refuser;

#[handlers]
impl Refuser {
    #[event_handler(before_commit)]
    async fn refuse(&self, _: &Late) -> Result<(), String> {
        JOURNAL.lock().unwrap().push("before_commit ran");
        Err("too late to refuse".into())
    }
}

#[tokio::test]
async fn an_event_emitted_while_the_completion_hooks_run_fails_nothing_that_committed() {
    let app = App::builder().build().await.unwrap();
    let unit = app
        .try_run_in_context(async {
            let unit = app.get_object::<Unit>().unwrap();
            let (events, waiting) = (app.events(), Arc::clone(&unit));
            drop(tegu_core::spawn(async move {
                // The handler has returned: the completion phase waits in the unit's commit.
                tokio::task::yield_now().await;
                events.emit(Late);
                waiting.emitted.notify_one();
            }));
            unit
        })
        .await;
    assert!(unit.is_ok(), "a commit that was made was answered as failed: {:?}", unit.err());
    app.shutdown().await.unwrap();
    assert_eq!(*JOURNAL.lock().unwrap(), ["committed", "before_commit ran"]);
}
