//! A program shaped as the README's and the examples' `main`, with a broken graph: a proto
//! injects a trait that no proto says it provides. What it prints when it fails is what a
//! newcomer sees first; `tests/main_prints_the_fix.rs` reads it.

#![allow(missing_debug_implementations)]

use std::sync::Arc;

use tegu_core::{App, DiError, singleton_proto};

/// A trait `Email` implements, without saying that it provides it.
pub trait Notifier: Send + Sync {}

/// Implements `Notifier`; its attribute lacks `provides(dyn Notifier)`.
#[singleton_proto]
pub struct Email;
impl Notifier for Email {}

/// Injects the trait.
#[singleton_proto]
pub struct Signup {
    #[inject]
    _notifier: Arc<dyn Notifier>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), DiError> {
    let app = App::builder().build().await?;
    app.shutdown().await
}
