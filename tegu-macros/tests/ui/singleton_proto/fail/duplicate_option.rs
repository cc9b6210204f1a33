//! Each option is given at most once; the second occurrence is flagged.
use tegu_core::singleton_proto;

#[singleton_proto(name = "a", name = "b")]
pub struct Greeter;

fn main() {}
