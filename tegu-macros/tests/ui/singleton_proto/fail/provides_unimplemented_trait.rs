//! A proto can only provide a trait it implements.
use tegu_core::singleton_proto;

pub trait Greeting: Send + Sync {}

#[singleton_proto(provides(dyn Greeting))]
pub struct English;

fn main() {}
