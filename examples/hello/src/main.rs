//! Run with: cargo run -p example-hello
//!
//! The tegg article's `HelloWorldController`, without HTTP yet: a singleton service holds a
//! `ContextRef<Tracer>` instead of a per-request `Tracer`. The trade-off it shows: the service
//! graph is built once at start-up, and each "request" (a context scope) builds only the one
//! object it touches, its tracer, which is destroyed when the request ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use di_core::{App, ContextRef, Dependency, DiError, InjectKind, ProtoDef};

/// Per request: an id and the lines logged while serving it.
struct Tracer {
    id: u64,
    lines: Mutex<Vec<String>>,
}

impl Tracer {
    fn log(&self, line: impl Into<String>) {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(line.into());
    }
}

/// A singleton: built once, shared by every request.
struct HelloService {
    tracer: ContextRef<Tracer>,
}

impl HelloService {
    async fn hello(&self, who: &str) -> String {
        self.tracer.get().log(format!("saying hello to {who}"));
        tokio::time::sleep(Duration::from_millis(10)).await; // other requests run meanwhile
        let id = self.tracer.get().id;
        format!("hello, {who} (request {id})")
    }
}

/// The controller, also a singleton.
struct HelloController {
    service: Arc<HelloService>,
    tracer: ContextRef<Tracer>,
}

impl HelloController {
    async fn get(&self, who: &str) -> String {
        self.tracer.get().log("GET /hello");
        self.service.hello(who).await
    }
}

async fn build_app() -> Result<App, DiError> {
    static REQUESTS: AtomicU64 = AtomicU64::new(1);
    App::builder()
        .register(
            ProtoDef::context::<Tracer>(|_| {
                Ok(Tracer { id: REQUESTS.fetch_add(1, Ordering::Relaxed), lines: Mutex::new(Vec::new()) })
            })
            .on_destroy(|t: Arc<Tracer>| async move {
                let lines = t.lines.lock().unwrap_or_else(|e| e.into_inner()).join("; ");
                println!("  request {} ended, tracer destroyed: {lines}", t.id);
                Ok(())
            }),
        )
        .register(
            ProtoDef::singleton::<HelloService>(|r| Ok(HelloService { tracer: r.context_ref(0)? }))
                .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None).field("tracer")),
        )
        .register(
            ProtoDef::singleton::<HelloController>(|r| {
                Ok(HelloController { service: r.arc(0)?, tracer: r.context_ref(1)? })
            })
            .dep(Dependency::new::<HelloService>(InjectKind::Arc, None).field("service"))
            .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None).field("tracer")),
        )
        .build()
        .await
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    let app = build_app().await?;
    println!("object graph (Mermaid):\n{}", app.to_mermaid());

    let controller = app.get_object::<HelloController>()?;
    let requests = ["ada", "grace", "linus"].map(|who| {
        let (app, controller) = (app.clone(), controller.clone());
        tokio::spawn(async move { app.run_in_context(async { controller.get(who).await }).await })
    });
    for request in requests {
        let answer = request.await.expect("request task panicked");
        println!("{answer}");
    }
    app.shutdown().await
}
