//! `#[intercept]` on something that is neither an async method nor an impl block, with an
//! advice list that is not types, and on an associated function without `self`.
use di_core::{intercept, singleton_proto};

#[singleton_proto]
pub struct Timing;

impl<R> di_core::advice::Advice<R> for Timing {
    async fn around(&self, _call: di_core::advice::Call, next: di_core::advice::Next<'_, R>) -> R {
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
