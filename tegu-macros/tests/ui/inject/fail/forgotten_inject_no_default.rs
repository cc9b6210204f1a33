//! A forgotten `#[inject]` on an `Arc` of a singleton without `Default`: the same error, at the
//! field, not ``the trait bound `BookmarkRepo: Default` is not satisfied`` at the attribute.
use std::sync::Arc;

use tegu_core::singleton_proto;

#[singleton_proto]
pub struct BookmarkRepo {
    #[inject]
    clock: Arc<Clock>,
}

#[singleton_proto]
pub struct Clock;

#[singleton_proto]
pub struct BookmarkService {
    repo: Arc<BookmarkRepo>,
}

// Injects `BookmarkService`, whose expansion stands: no second error here.
#[singleton_proto]
pub struct BookmarkController {
    #[inject]
    service: Arc<BookmarkService>,
}

fn main() {}
