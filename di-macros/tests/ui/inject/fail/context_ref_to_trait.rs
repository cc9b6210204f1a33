//! `ContextRef<T>` names the context proto's own type, not a trait it provides.
use di_core::{singleton_proto, ContextRef};

pub trait Tracing: Send + Sync {}

#[singleton_proto]
pub struct Greeter {
    #[inject]
    tracer: ContextRef<dyn Tracing>,
}

fn main() {}
