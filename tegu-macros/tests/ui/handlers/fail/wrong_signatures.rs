//! A handler is `async fn(&self, event: &E)`, a job `async fn(&self)`, and both live on singletons.
use tegu_core::{context_proto, handlers, singleton_proto};

pub struct Created;

#[singleton_proto]
pub struct Stats;

#[handlers]
impl Stats {
    #[event_handler]
    async fn by_value(&self, event: Created) {}

    #[event_handler]
    async fn no_event(&self) {}

    #[event_handler]
    fn not_async(&self, event: &Created) {}

    #[schedule(every = "30s")]
    async fn with_argument(&self, n: u32) {}
}

#[context_proto]
pub struct PerRequest;

#[handlers]
impl PerRequest {
    #[event_handler]
    async fn on_created(&self, event: &Created) {}
}

fn main() {}
