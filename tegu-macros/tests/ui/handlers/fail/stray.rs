//! `#[event_handler]` and `#[schedule]` register nothing on their own: their impl block needs `#[handlers]`.
use tegu_core::singleton_proto;

pub struct Created;

#[singleton_proto]
pub struct Stats;

impl Stats {
    #[tegu_core::event_handler]
    async fn on_created(&self, _: &Created) {}

    #[tegu_core::schedule(every = "1m")]
    async fn tick(&self) {}
}

fn main() {}
