//! Every mistake in one struct is reported in one compile.
use tegu_core::singleton_proto;

#[singleton_proto(nmae = "greeter", access = everyone)]
pub struct Greeter<T> {
    #[inject]
    clock: Box<T>,
}

fn main() {}
