//! An advice says which outputs it wraps (`Advice<R>`); a method returning another type is refused.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

/// Handles only `Result`s.
#[singleton_proto]
pub struct Transactional;

impl<T, E> Advice<Result<T, E>> for Transactional {
    async fn around(&self, _: Call, next: Next<'_, Result<T, E>>) -> Result<T, E> {
        next.run().await
    }
}

#[singleton_proto]
pub struct Todos;

impl Todos {
    #[intercept(Transactional)]
    pub async fn count(&self) -> usize {
        0
    }
}

fn main() {}
