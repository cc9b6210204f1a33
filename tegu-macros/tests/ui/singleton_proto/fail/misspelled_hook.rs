//! A hook option names a method of the struct.
use tegu_core::singleton_proto;

#[singleton_proto(init = strat)]
pub struct Greeter;

impl Greeter {
    async fn start(&self) {}
}

fn main() {}
