//! `ContextRef<T>` resolves a per-request object; a singleton is injected as `Arc<T>`.
use tegu_core::{singleton_proto, ContextRef};

#[singleton_proto]
pub struct Clock;

#[singleton_proto]
pub struct Greeter {
    #[inject]
    clock: ContextRef<Clock>,
}

fn main() {}
