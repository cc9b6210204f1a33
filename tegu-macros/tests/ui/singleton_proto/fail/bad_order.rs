//! `order` is an integer literal of 32 bits, maybe negative; a config section has none.
use tegu_core::{config_proto, singleton_proto};

#[singleton_proto(order = "first")]
pub struct Quoted;

#[singleton_proto(order = 3000000000)]
pub struct TooBig;

#[singleton_proto(order = 1u8)]
pub struct Suffixed;

#[singleton_proto(order = 1, order = 2)]
pub struct Twice;

#[config_proto(prefix = "a", order = 1)]
#[derive(serde::Deserialize)]
pub struct Section;

fn main() {}
