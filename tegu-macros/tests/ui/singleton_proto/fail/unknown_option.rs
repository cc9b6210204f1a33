//! Unknown options are rejected, naming the ones that exist.
use tegu_core::singleton_proto;

#[singleton_proto(scope = "request")]
pub struct Greeter;

fn main() {}
