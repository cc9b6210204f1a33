//! Run with: cargo run -p example-hello
//!
//! The tegg article's `HelloWorldController`, without HTTP yet: the controller and the service
//! are singletons holding an `AsyncContextRef<Tracer>` (the tracer has an async init hook) instead of a per-request `Tracer`. The
//! trade-off it shows: the service graph is built once at start-up, and each "request" (a
//! context scope) builds only what it touches, its tracer, destroyed when the request ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, AsyncContextRef, DiError, context_proto, singleton_proto};

static REQUESTS: AtomicU64 = AtomicU64::new(1);

/// Per request: an id and the lines logged while serving it.
#[context_proto(init = start, destroy = finish)]
struct Tracer {
    id: AtomicU64,
    lines: Mutex<Vec<String>>,
}

impl Tracer {
    async fn start(&self) {
        self.id.store(REQUESTS.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
    }

    async fn finish(&self) {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner()).join("; ");
        println!("  request {} ended, tracer destroyed: {lines}", self.id());
    }

    fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    fn log(&self, line: impl Into<String>) {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(line.into());
    }
}

/// A singleton: built once, shared by every request.
#[singleton_proto]
struct HelloService {
    #[inject]
    tracer: AsyncContextRef<Tracer>,
}

impl HelloService {
    async fn hello(&self, who: &str) -> Result<String, DiError> {
        let tracer = self.tracer.get_async().await?;
        tracer.log(format!("saying hello to {who}"));
        tokio::time::sleep(Duration::from_millis(10)).await; // other requests run meanwhile
        Ok(format!("hello, {who} (request {})", tracer.id()))
    }
}

/// The controller, also a singleton.
#[singleton_proto]
struct HelloWorldController {
    #[inject]
    service: Arc<HelloService>,
    #[inject]
    tracer: AsyncContextRef<Tracer>,
}

impl HelloWorldController {
    async fn get(&self, who: &str) -> Result<String, DiError> {
        self.tracer.get_async().await?.log("GET /hello");
        self.service.hello(who).await
    }
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    let app = App::builder().build().await?;
    println!("object graph (Mermaid):\n{}", app.to_mermaid());

    let controller = app.get_object::<HelloWorldController>()?;
    let requests = ["ada", "grace", "linus"].map(|who| {
        let (app, controller) = (app.clone(), controller.clone());
        tokio::spawn(async move { app.run_in_context(async { controller.get(who).await }).await })
    });
    for request in requests {
        let answer = request.await.expect("request task panicked")?;
        println!("{answer}");
    }
    app.shutdown().await
}

#[cfg(test)]
mod tests {
    /// The graph `main` builds, checked with nothing built (`AppBuilder::check`).
    #[test]
    fn the_graph_checks() {
        tegu_core::App::builder().check().unwrap();
    }
}
