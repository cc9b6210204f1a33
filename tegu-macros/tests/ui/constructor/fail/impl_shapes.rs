//! A constructor's impl block is for a named struct, and the constructor is not generic.
use tegu_core::singleton_proto;

pub struct Greeter;

#[singleton_proto]
impl Greeter {
    fn new<T: Default>() -> Self {
        let _ = T::default();
        Greeter
    }
}

pub struct Pair(u8, u8);

#[singleton_proto]
impl <Pair as Clone>::Output {
    fn new() -> Self {
        Pair(0, 0)
    }
}

fn main() {}
