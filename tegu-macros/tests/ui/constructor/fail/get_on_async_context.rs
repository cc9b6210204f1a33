//! `ContextRef::get` cannot build a context proto whose constructor is async: the reference
//! must be an `AsyncContextRef`, which only has `get_async`. The same holds for a context proto
//! with an init hook, and for one that takes such a proto by value.
use std::sync::Arc;

use tegu_core::{ContextRef, context_proto, singleton_proto};

pub struct Session;

#[context_proto]
impl Session {
    async fn new() -> Session {
        Session
    }
}

#[context_proto(init = warm)]
pub struct Cache;
impl Cache {
    async fn warm(&self) {}
}

#[context_proto]
pub struct Page {
    #[inject]
    cache: Arc<Cache>,
}

#[singleton_proto]
pub struct Handler {
    #[inject]
    session: ContextRef<Session>,
    #[inject]
    page: ContextRef<Page>,
}

fn main() {}

/// Built from a list of async protos: async too.
#[context_proto]
pub struct Pages {
    #[inject]
    all: Vec<Arc<Page>>,
}

#[singleton_proto]
pub struct Index {
    #[inject]
    pages: ContextRef<Pages>,
}
