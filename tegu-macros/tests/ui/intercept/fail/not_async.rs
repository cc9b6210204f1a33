//! `#[intercept]` wraps async methods, and names at least one advice.
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

impl Todos {
    #[intercept(Timing)]
    pub fn count(&self) -> usize {
        0
    }

    #[intercept()]
    pub async fn none(&self) {}
}

#[intercept(Timing)]
impl Todos {
    fn private(&self) {}
}

fn main() {}
