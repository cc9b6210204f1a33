//! An `#[inject]` field is `Arc<T>`, `ContextRef<T>`, `Option<Arc<T>>` or `Vec<Arc<T>>`.
use tegu_core::singleton_proto;

#[singleton_proto]
pub struct Clock;

#[singleton_proto]
pub struct Greeter {
    #[inject]
    clock: Box<Clock>,
}

fn main() {}
