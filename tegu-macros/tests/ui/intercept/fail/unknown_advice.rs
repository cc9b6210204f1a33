//! The advices an `#[intercept]` names must be types in scope.
use tegu_core::{intercept, singleton_proto};

#[singleton_proto]
pub struct Todos;

impl Todos {
    #[intercept(Timing)]
    pub async fn list(&self) -> usize {
        0
    }
}

fn main() {}
