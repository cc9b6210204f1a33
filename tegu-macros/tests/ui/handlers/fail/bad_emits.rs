//! `emits(..)` lists event types, once, on a schedule or a handler.
use tegu_core::{handlers, singleton_proto};

pub struct Ticked;

#[singleton_proto]
pub struct Jobs;

#[handlers]
impl Jobs {
    #[schedule(every = "1h", emits())]
    async fn empty(&self) {}

    #[schedule(every = "1h", emits(Ticked), emits(Ticked))]
    async fn twice(&self) {}

    #[event_handler(after_rollback, emits = Ticked)]
    async fn not_a_list(&self, _: &Ticked) {}
}

fn main() {}
