//! A crosscut's advice is a proto that handles every output (`Advice<Outcome>`).
use tegu_core::{crosscut, singleton_proto, advice::{Advice, Call, Next}};

/// Refuses with an error: it handles `Result`s only, so it cannot be a crosscut.
#[singleton_proto]
pub struct Guard;

impl<T> Advice<Result<T, String>> for Guard {
    async fn around(&self, call: Call, _next: Next<'_, Result<T, String>>) -> Result<T, String> {
        Err(format!("{call} refused"))
    }
}

crosscut!(Guard, methods = "*");

/// Not a proto at all.
pub struct Loose;

impl<R> Advice<R> for Loose {
    async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

crosscut!(Loose, methods = "*");

fn main() {}
