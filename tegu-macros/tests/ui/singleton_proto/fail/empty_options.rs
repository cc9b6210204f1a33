//! Options and `#[inject]` forms that cannot mean anything: each is reported, in one compile.
use std::sync::Arc;

use tegu_core::singleton_proto;

#[singleton_proto]
pub struct Clock;

#[singleton_proto(name = "", profile = "")]
pub struct Unnamed;

#[singleton_proto(provides())]
pub struct ProvidesNothing;

#[singleton_proto]
pub struct Injected {
    #[inject]
    #[inject]
    twice: Arc<Clock>,
    #[inject = "clock"]
    name_value: Arc<Clock>,
}

fn main() {}
