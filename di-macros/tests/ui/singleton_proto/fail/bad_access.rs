//! The access level is `public` or `private`.
use di_core::singleton_proto;

#[singleton_proto(access = protected)]
pub struct Greeter;

fn main() {}
