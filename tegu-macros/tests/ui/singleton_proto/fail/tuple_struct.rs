//! Injection fills named fields.
use tegu_core::singleton_proto;

#[singleton_proto]
pub struct Port(u16);

fn main() {}
