//! A hook returns `()` or `Result<(), E>`.
use tegu_core::singleton_proto;

#[singleton_proto(init = start)]
pub struct Greeter;

impl Greeter {
    async fn start(&self) -> u32 {
        1
    }
}

fn main() {}
