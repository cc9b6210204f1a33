//! Crosscuts at their edges: an advice the scope can no longer give leaves the method running
//! without it (a crosscut only observes), logged once; crosscuts of equal `order` nest in the
//! order they are declared (by module path, then place in the file), whatever their advices are
//! named.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tegu_core::{
    App,
    advice::{Advice, Call, Next, Outcome},
    context_proto, crosscut, intercept, singleton_proto,
};

/// What the advices saw, in order.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn log(line: String) {
    LOG.lock().unwrap().push(line);
}

/// Logs around each call it advises.
macro_rules! recorder {
    ($name:ident) => {
        #[singleton_proto]
        #[derive(Default)]
        pub struct $name;

        impl<R> Advice<R> for $name {
            async fn around(&self, call: Call, next: Next<'_, R>) -> R {
                log(format!("enter {} {}", stringify!($name), call.method()));
                let out = next.run().await;
                log(format!("leave {} {}", stringify!($name), call.method()));
                out
            }
        }
    };
}

/// Named `Alpha`, in a module that sorts late.
pub mod m_late {
    use super::*;
    recorder!(Alpha);
}

/// Named `Zeta`, in a module that sorts early; `Beta`'s crosscut is declared here, above the
/// others in the file but in a module whose path sorts after theirs.
pub mod m_early {
    use super::*;
    recorder!(Zeta);
    recorder!(Beta);
    crosscut!(Beta, types = "Ordered");
}

use m_late::Alpha;

// Equal orders: `Alpha` by an imported name, `Zeta` by its path. They nest as declared here
// (`Alpha` outside `Zeta`), whatever their types are named or the paths written (which an added
// `use` would change), and outside `Beta`, declared in `m_early`: a module's path sorts after
// its parent's.
crosscut!(Alpha, types = "Ordered");
crosscut!(crate::m_early::Zeta, types = "Ordered");

#[singleton_proto]
pub struct Ordered;

#[intercept]
impl Ordered {
    pub async fn run(&self) {
        log("body run".into());
    }
}

#[tokio::test]
async fn crosscuts_of_equal_order_nest_in_the_order_they_are_declared_whatever_their_names() {
    let app = App::builder().build().await.unwrap();
    let ordered = app.get_object::<Ordered>().unwrap();
    LOG.lock().unwrap().clear();
    app.run_in_context(ordered.run()).await;
    let seen = std::mem::take(&mut *LOG.lock().unwrap());
    let expected = ["enter Alpha run", "enter Zeta run", "enter Beta run", "body run"];
    assert_eq!(seen[..4], expected, "{seen:?}");
    assert_eq!(seen[4..], ["leave Beta run", "leave Zeta run", "leave Alpha run"], "{seen:?}");
}

/// A per-request tracer with a completion hook: it cannot be built once its request's
/// completion phase is over.
#[context_proto(complete = flush)]
#[derive(Default)]
pub struct RequestTracer;

impl RequestTracer {
    async fn flush(&self) -> Result<(), tegu_core::error::BoxError> {
        Ok(())
    }
}

impl Advice<Outcome> for RequestTracer {
    async fn around(&self, _: Call, next: Next<'_, Outcome>) -> Outcome {
        next.run().await
    }
}

crosscut!(RequestTracer, types = "Payments");

#[singleton_proto]
#[derive(Default)]
pub struct Payments {
    made: AtomicUsize,
}

#[intercept]
impl Payments {
    pub async fn pay(&self) {
        self.made.fetch_add(1, Ordering::SeqCst);
    }
}

/// A task of the request pays after the completion phase, where the crosscut's advice (a
/// context proto with a completion hook) can no longer be built: the payment is made, without
/// the advice, and that is logged once for the method, however often it is called.
#[test]
fn an_advice_the_scope_cannot_give_leaves_the_method_running_without_it() {
    let ((), logs) = tegu_test_support::capture_logs(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let app = App::builder().build().await.unwrap();
            let payments = app.get_object::<Payments>().unwrap();
            app.run_in_context(payments.pay()).await; // advised
            let late = std::sync::Arc::clone(&payments);
            app.run_in_context(async move {
                tegu_core::scope::complete_scope().await.unwrap();
                let task = tegu_core::spawn(async move {
                    late.pay().await;
                    late.pay().await;
                });
                task.await.unwrap();
            })
            .await;
            assert_eq!(payments.made.load(Ordering::SeqCst), 3, "a payment was not made");
            app.shutdown().await.unwrap();
        });
    });
    let warnings = logs.matches("the method runs without it").count();
    assert_eq!(warnings, 1, "{logs}");
    assert!(logs.contains("Payments::pay") && logs.contains("RequestTracer"), "{logs}");
}
