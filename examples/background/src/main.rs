//! Run with: cargo run -p example-background
//!
//! A request answers at once and leaves work behind: `tegu_core::spawn` runs it on a task that
//! still sees the request's context objects, and the scope waits for such tasks (at most
//! `AppBuilder::background_task_timeout`, 5 s by default) before its destroy hooks run. With
//! `end_in_background()` the caller gets the answer before that wait, as tegu-http's clients do.
//! A task started with `tokio::spawn` would not see the scope at all.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, ContextRef, DiError, context_proto, singleton_proto};

/// What happened, in order.
#[singleton_proto]
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
}

impl Log {
    fn push(&self, line: impl Into<String>) {
        let line = line.into();
        println!("  {line}");
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
}

/// Per request: its audit trail, written out when the request's scope is destroyed.
#[context_proto(destroy = flush)]
struct AuditTrail {
    #[inject]
    log: Arc<Log>,
    entries: Mutex<Vec<String>>,
}

impl AuditTrail {
    fn record(&self, entry: &str) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).push(entry.to_owned());
    }

    async fn flush(&self) {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner()).join(", ");
        self.log.push(format!("audit trail destroyed: {entries}"));
    }
}

#[singleton_proto]
struct Uploads {
    #[inject]
    audit: ContextRef<AuditTrail>,
    #[inject]
    log: Arc<Log>,
}

impl Uploads {
    /// Answers at once; the thumbnail is made in the background, in the same scope.
    fn upload(self: &Arc<Self>, name: &str) -> String {
        self.audit.get().record("uploaded");
        let this = self.clone();
        tegu_core::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            // Still the request's audit trail: the scope came along.
            this.audit.get().record("thumbnail made");
            this.log.push("thumbnail made");
        });
        self.log.push(format!("answered: {name} stored"));
        format!("{name} stored")
    }
}

async fn run() -> Result<Vec<String>, DiError> {
    let app = App::builder().build().await?;
    let uploads = app.get_object::<Uploads>()?;
    let answer = app.run_in_context(async { uploads.upload("cat.png") }).end_in_background().await;
    assert_eq!(answer, "cat.png stored");
    app.shutdown().await?; // waits for the scope still ending: its task, then its destroy hook
    let log = app.get_object::<Log>()?;
    let lines = log.lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(lines)
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    println!("a request with background work:");
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
    async fn the_answer_comes_first_and_the_scope_waits_for_its_task() {
        let lines = super::run().await.unwrap();
        assert_eq!(
            lines,
            ["answered: cat.png stored", "thumbnail made", "audit trail destroyed: uploaded, thumbnail made"]
        );
    }
}
