//! An event crosses tasks, so it is `Send + Sync`; a handler returns `()` or `Result<(), E>`.
use std::rc::Rc;

use tegu_core::{handlers, singleton_proto};

pub struct Created(pub Rc<u8>);

#[singleton_proto]
pub struct Stats;

#[handlers]
impl Stats {
    #[event_handler]
    async fn on_created(&self, _: &Created) {}

    #[event_handler]
    async fn wrong_output(&self, _: &u32) -> u32 {
        1
    }
}

fn main() {}
