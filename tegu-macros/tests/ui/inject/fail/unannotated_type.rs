//! A type without an attribute: injected, it is not a proto; not injected, it has no
//! `Default`. Each message says which, at the field.
use std::sync::Arc;

use tegu_core::singleton_proto;

pub struct Database {
    pub url: String,
}

impl Database {
    pub fn new(url: &str) -> Database {
        Database { url: url.to_owned() }
    }
}

#[singleton_proto]
pub struct Injected {
    #[inject]
    db: Arc<Database>,
}

#[singleton_proto]
pub struct NotInjected {
    db: Arc<Database>,
}

fn main() {}
