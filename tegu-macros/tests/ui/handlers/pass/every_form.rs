//! Handlers take `&E` and return `()` or `Result<(), E>`, in any of the three phases; jobs run
//! on a period or a cron expression; `crate = path` names tegu-core where a crate re-exports it.
use std::sync::atomic::{AtomicUsize, Ordering};

use tegu_core::{handlers, singleton_proto, App};

mod reexport {
    pub use tegu_core;
}

pub struct Created(pub u32);

#[singleton_proto]
#[derive(Default)]
pub struct Stats {
    seen: AtomicUsize,
}

#[handlers(crate = reexport::tegu_core)]
impl Stats {
    #[event_handler]
    async fn on_created(&self, event: &Created) {
        self.seen.fetch_add(event.0 as usize, Ordering::SeqCst);
    }

    #[event_handler]
    async fn checked(&self, _: &Created) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[event_handler(before_commit)]
    async fn inside(&self, _: &Created) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[event_handler(after_commit)]
    async fn after(&self, _: &Created) {}

    #[event_handler(after_rollback)]
    async fn undone(&self, _: &Created) {}

    #[event_handler(emits(Created, std::string::String))]
    async fn relay(&self, _: &Created) {}

    #[event_handler(before_commit, emits(Created))]
    async fn relay_inside(&self, _: &Created) {}

    #[event_handler(once_per_cluster)]
    async fn mail(&self, _: &Created) {}

    #[event_handler(after_commit, once_per_cluster, emits(Created))]
    async fn mail_and_relay(&self, _: &Created) {}

    #[schedule(every = "1h30m", emits(Created))]
    async fn report(&self) {}

    #[schedule(every = "1h", once_per_cluster, config = "reports.rollup_every")]
    async fn rollup(&self) {}

    #[schedule(once_per_cluster, cron = "0 0 3 * * *")]
    async fn nightly(&self) {}

    #[schedule(cron = "0 */5 * * * *")]
    async fn purge(&self) -> Result<(), std::io::Error> {
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = App::builder().without_schedules().build().await.unwrap();
    assert_eq!(app.events().handler_count::<Created>(), 9);
    let cluster: Vec<String> = app
        .events()
        .handlers()
        .into_iter()
        .filter(|h| h.once == tegu_core::events::Once::PerCluster)
        .map(|h| h.name.rsplit("::").next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(cluster, ["mail", "mail_and_relay"]);
    app.events().emit(Created(3));
    app.run_schedule::<Stats>("purge").await.unwrap();
    app.shutdown().await.unwrap(); // waits for the handlers
    assert_eq!(app.get_object::<Stats>().unwrap().seen.load(Ordering::SeqCst), 3);
}
