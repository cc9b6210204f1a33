//! A context proto may have an init, a completion and a destroy hook, returning `()` or a
//! `Result`.
use tegu_core::context_proto;

#[context_proto(init = open, complete = commit, destroy = roll_back)]
pub struct UnitOfWork;

impl UnitOfWork {
    async fn open(&self) {}
    async fn commit(&self) -> Result<(), std::io::Error> {
        Ok(())
    }
    async fn roll_back(&self) {}
}

fn main() {}
