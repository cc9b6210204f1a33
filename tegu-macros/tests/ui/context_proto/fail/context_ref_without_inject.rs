//! Only the container can fill a `ContextRef`: the field needs `#[inject]`.
use tegu_core::{context_proto, singleton_proto, ContextRef};

#[context_proto]
pub struct Tracer;

#[singleton_proto]
pub struct Greeter {
    tracer: ContextRef<Tracer>,
}

fn main() {}
