//! A lazy singleton is built by a synchronous first use: no init hook, no async constructor.
//! Only singletons are lazy.
use tegu_core::{context_proto, singleton_proto};

#[singleton_proto(lazy, init = warm)]
pub struct Geo;
impl Geo {
    async fn warm(&self) {}
}

pub struct Index;
#[singleton_proto(lazy)]
impl Index {
    async fn new() -> Index {
        Index
    }
}

#[context_proto(lazy)]
pub struct Session;

fn main() {}
