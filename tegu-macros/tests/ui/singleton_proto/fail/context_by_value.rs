//! A singleton lives longer than any request: it must hold a context proto as `ContextRef<T>`.
use std::sync::Arc;

use tegu_core::{context_proto, singleton_proto};

#[context_proto]
pub struct Tracer;

#[singleton_proto]
pub struct Greeter {
    #[inject]
    tracer: Arc<Tracer>,
}

fn main() {}
