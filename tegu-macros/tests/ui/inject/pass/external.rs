//! A type registered by hand (generic, or from another crate) is injected by concrete type
//! with `#[inject(external)]`: checked at build, not at compile time.
use std::sync::Arc;

use tegu_core::singleton_proto;

pub struct Pool<T>(pub T);

#[singleton_proto]
pub struct Repo {
    #[inject(external)]
    pub pool: Arc<Pool<u32>>,
    #[inject(external)]
    pub names: Arc<std::collections::BTreeMap<String, String>>,
}

fn main() {}
