//! The access level is `public` or `private`.
use tegu_core::singleton_proto;

#[singleton_proto(access = protected)]
pub struct Greeter;

fn main() {}
