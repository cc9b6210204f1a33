//! Plain arguments keep their names, so an attribute below `#[intercept]` still finds them.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
pub struct Accounts;

impl Accounts {
    #[intercept(Timing)]
    #[tracing::instrument(skip(self, password))]
    pub async fn login(&self, user: String, password: String, mut attempts: u32) -> bool {
        attempts += 1;
        !user.is_empty() && !password.is_empty() && attempts < 3
    }
}

fn main() {}
