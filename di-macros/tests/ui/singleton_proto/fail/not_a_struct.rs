//! Protos are structs.
use di_core::singleton_proto;

#[singleton_proto]
pub enum Mode {
    Fast,
    Safe,
}

fn main() {}
