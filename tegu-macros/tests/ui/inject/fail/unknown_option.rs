//! `#[inject]` takes one option, `name = "..."`.
use std::sync::Arc;

use tegu_core::singleton_proto;

#[singleton_proto]
pub struct Clock;

#[singleton_proto]
pub struct Greeter {
    #[inject(qualifier = "utc")]
    clock: Arc<Clock>,
}

fn main() {}
