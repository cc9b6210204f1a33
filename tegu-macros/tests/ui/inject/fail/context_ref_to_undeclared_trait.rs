//! `ContextRef<dyn Trait>` needs the trait declared a `RefTarget` (`impl RefTarget for dyn
//! Trait {}`); without it the error says so.
use tegu_core::{singleton_proto, ContextRef};

pub trait Tracing: Send + Sync {}

#[singleton_proto]
pub struct Greeter {
    #[inject]
    tracer: ContextRef<dyn Tracing>,
}

fn main() {}
