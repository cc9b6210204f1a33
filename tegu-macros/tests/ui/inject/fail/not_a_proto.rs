//! An `#[inject]`ed type must be a proto (or a `dyn Trait` that a proto provides).
use std::sync::Arc;

use tegu_core::context_proto;

pub struct Config;

#[context_proto]
pub struct Handler {
    #[inject]
    config: Arc<Config>,
}

fn main() {}
