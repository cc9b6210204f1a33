//! A singleton's constructor runs once: it cannot take a per-request object by value.
use std::sync::Arc;

use tegu_core::{context_proto, singleton_proto};

#[context_proto]
pub struct Tracer;

pub struct Greeter {
    tracer: Arc<Tracer>,
}

#[singleton_proto]
impl Greeter {
    pub fn new(tracer: Arc<Tracer>) -> Self {
        Greeter { tracer }
    }
}

fn main() {}
