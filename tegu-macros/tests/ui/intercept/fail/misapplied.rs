//! `#[intercept]` on something that is neither an async method nor an impl block, with an
//! advice list that is not types, and on an associated function without `self`.
use tegu_core::{intercept, singleton_proto};

#[singleton_proto]
pub struct Timing;

impl<R> tegu_core::advice::Advice<R> for Timing {
    async fn around(&self, _call: tegu_core::advice::Call, next: tegu_core::advice::Next<'_, R>) -> R {
        next.run().await
    }
}

#[intercept(Timing)]
pub struct NotAMethod;

#[singleton_proto]
pub struct Todos;

impl Todos {
    #[intercept("Timing")]
    pub async fn quoted(&self) {}

    #[intercept(Timing)]
    pub async fn no_self() {}
}

fn main() {}
