//! A crosscut names its advice and at least one well-formed selector, each once.
use tegu_core::{crosscut, singleton_proto, advice::{Advice, Call, Next}};

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

pub trait Audited {}

// No selector: which methods?
crosscut!(Timing);
// An option that does not exist.
crosscut!(Timing, classes = "Foo");
// A pattern that is no name pattern, and a module that is no path.
crosscut!(Timing, methods = "get-*");
crosscut!(Timing, module = "crate::");
// A trait without `dyn`.
crosscut!(Timing, implements = Audited);
// A selector given twice.
crosscut!(Timing, methods = "a", methods = "b");
// Nothing at all, and a selector without a value.
crosscut!();
crosscut!(Timing, methods);

fn main() {}
