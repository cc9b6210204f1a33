//! A proto can only provide a trait it implements.
use di_core::singleton_proto;

pub trait Greeting: Send + Sync {}

#[singleton_proto(provides(dyn Greeting))]
pub struct English;

fn main() {}
