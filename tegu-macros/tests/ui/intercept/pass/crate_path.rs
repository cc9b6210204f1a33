//! `crate = path` names tegu-core where a crate re-exports it, on an impl block or a method.
use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

mod reexport {
    pub use tegu_core;
}

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
pub struct Todos;

#[intercept(Timing, crate = reexport::tegu_core)]
impl Todos {
    pub async fn count(&self) -> usize {
        2
    }
}

#[singleton_proto]
pub struct Notes;

impl Notes {
    #[intercept(crate = ::tegu_core, Timing)]
    pub async fn count(&self) -> usize {
        3
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = tegu_core::App::builder().build().await.unwrap();
    let (todos, notes) = (app.get_object::<Todos>().unwrap(), app.get_object::<Notes>().unwrap());
    let counts = app.run_in_context(async { (todos.count().await, notes.count().await) }).await;
    assert_eq!(counts, (2, 3));
}
