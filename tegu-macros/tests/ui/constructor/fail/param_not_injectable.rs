//! Every constructor parameter is injected: a plain value has no proto to come from.
use tegu_core::singleton_proto;

pub struct Server {
    port: u16,
}

#[singleton_proto]
impl Server {
    pub fn new(port: u16) -> Self {
        Server { port }
    }
}

fn main() {}
