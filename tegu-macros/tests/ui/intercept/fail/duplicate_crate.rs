//! `crate = path` is given at most once over an item's `#[intercept]`s.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
pub struct Todos;

#[intercept(Timing, crate = ::tegu_core)]
impl Todos {
    #[intercept(crate = ::tegu_core, Timing)]
    pub async fn count(&self) -> usize {
        2
    }
}

fn main() {}
