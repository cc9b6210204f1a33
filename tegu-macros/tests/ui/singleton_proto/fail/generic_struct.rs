//! Generic structs cannot be registered statically: each instantiation is its own proto.
use tegu_core::singleton_proto;

#[singleton_proto]
pub struct Cache<T> {
    items: Vec<T>,
}

fn main() {}
