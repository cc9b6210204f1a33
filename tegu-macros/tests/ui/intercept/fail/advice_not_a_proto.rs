//! An advice is a proto: the container builds it, so `#[intercept]` can reach it.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

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
    pub async fn list(&self) -> usize {
        0
    }
}

fn main() {}
