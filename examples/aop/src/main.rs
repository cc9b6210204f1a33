//! Run with: cargo run -p example-aop
//!
//! Interceptors, events and scheduled jobs around one service, without HTTP:
//! - `Audit`, an advice (`#[intercept(Audit)]`) that sees every call of `Orders`' public
//!   methods with their arguments, and the request it runs in;
//! - `OrderPlaced`, an event emitted by `Orders::place` and handled by `Mailer` once the
//!   request has succeeded (the failed request's event is dropped);
//! - `Mailer::send_digest`, a job every night at 02:00 UTC, run here by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{
    App, ContextRef, DiError,
    advice::{Advice, Call, Next},
    context_proto,
    events::EventBus,
    handlers, intercept, singleton_proto,
};

static REQUESTS: AtomicU64 = AtomicU64::new(1);

/// Per request: its number.
struct Request {
    id: u64,
}

#[context_proto]
impl Request {
    fn new() -> Request {
        Request { id: REQUESTS.fetch_add(1, Ordering::Relaxed) }
    }
}

/// What happened, in order: the example prints it, its test reads it.
#[singleton_proto]
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
}

impl Log {
    fn push(&self, line: String) {
        println!("  {line}");
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
}

/// The advice: logs each call with its arguments and outcome, naming the request.
#[singleton_proto]
struct Audit {
    #[inject]
    log: Arc<Log>,
    #[inject]
    request: ContextRef<Request>,
}

impl<T, E: std::fmt::Display> Advice<Result<T, E>> for Audit {
    async fn around(&self, _: Call, next: Next<'_, Result<T, E>>) -> Result<T, E> {
        let args = format!("{:?}", next.args());
        let out = next.run().await;
        let outcome = match &out {
            Ok(_) => "ok".to_owned(),
            Err(e) => format!("failed: {e}"),
        };
        self.log.push(format!("[request {}] {args}: {outcome}", self.request.get().id));
        out
    }
}

/// Emitted when an order is placed.
#[derive(Debug)]
struct OrderPlaced {
    item: String,
}

#[singleton_proto]
struct Orders {
    #[inject]
    events: Arc<EventBus>,
}

#[intercept(Audit)]
impl Orders {
    pub async fn place(&self, item: &str, quantity: u32) -> Result<u32, String> {
        // Held by the request until it has succeeded.
        self.events.emit(OrderPlaced { item: item.to_owned() });
        if quantity == 0 {
            return Err("nothing to order".to_owned());
        }
        Ok(quantity * 10)
    }
}

#[singleton_proto]
struct Mailer {
    #[inject]
    log: Arc<Log>,
}

#[handlers]
impl Mailer {
    #[event_handler]
    async fn on_order(&self, order: &OrderPlaced) {
        self.log.push(format!("mail: your {} is on its way", order.item));
    }

    #[schedule(cron = "0 0 2 * * *")]
    async fn send_digest(&self) -> Result<(), String> {
        self.log.push("digest sent".to_owned());
        Ok(())
    }
}

/// Two requests (one fails), then the nightly job by hand; returns the log.
async fn run() -> Result<Vec<String>, DiError> {
    let app = App::builder().build().await?;
    let orders = app.get_object::<Orders>()?;
    let placed = app.run_in_context(orders.place("teapot", 2)).await;
    assert_eq!(placed, Ok(20));
    // A failed request: `try_run_in_context` would commit nothing either; here the scope's
    // event is dropped because the caller says the work failed.
    let failed = app
        .run_in_context(async {
            let out = orders.place("kettle", 0).await;
            if out.is_err() {
                tegu_core::events::discard_events();
            }
            out
        })
        .await;
    assert!(failed.is_err());
    app.run_schedule::<Mailer>("send_digest").await?;
    app.shutdown().await?; // waits for the event handlers
    let log = app.get_object::<Log>()?;
    let lines = log.lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(lines)
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    println!("interceptors, events and jobs:");
    run().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The graph `main` builds, checked with nothing built (`AppBuilder::check`).
    #[test]
    fn the_graph_checks() {
        tegu_core::App::builder().check().unwrap();
    }

    #[tokio::test]
    async fn the_advice_sees_each_call_and_only_the_good_request_mails() {
        let lines = super::run().await.unwrap();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].ends_with("place { item: \"teapot\", quantity: 2 }: ok"), "{lines:?}");
        assert!(lines[1].ends_with("place { item: \"kettle\", quantity: 0 }: failed: nothing to order"), "{lines:?}");
        assert!(lines.contains(&"mail: your teapot is on its way".to_owned()), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("kettle is on its way")), "{lines:?}");
        assert!(lines.contains(&"digest sent".to_owned()), "{lines:?}");
    }
}
