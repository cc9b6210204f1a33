//! `external` takes no value; and it skips only the proto check, not the shape of the type.
use std::sync::Arc;

use tegu_core::singleton_proto;

pub struct Pool<T>(T);

#[singleton_proto]
pub struct Repo {
    #[inject(external = true)]
    pool: Arc<Pool<u32>>,
    #[inject(external)]
    size: u32,
}

fn main() {}
