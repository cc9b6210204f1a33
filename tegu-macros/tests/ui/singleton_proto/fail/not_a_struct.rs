//! Protos are structs.
use tegu_core::singleton_proto;

#[singleton_proto]
pub enum Mode {
    Fast,
    Safe,
}

fn main() {}
