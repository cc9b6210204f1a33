//! Generated code does not depend on what the user's module names `Option`, `Result`, `Arc`,
//! `Box` or `Default`: it reaches everything through `tegu_core::__private`.
#![allow(dead_code)]

use tegu_core::singleton_proto;

struct Option;
struct Result;
struct Box;
struct Default;
mod std {}

#[singleton_proto(name = "clock", access = private, init = start, destroy = stop)]
pub struct Clock {
    ticks: u64,
}

impl Clock {
    async fn start(&self) -> ::std::result::Result<(), ::std::io::Error> {
        Ok(())
    }
    async fn stop(&self) {}
}

fn main() {}
