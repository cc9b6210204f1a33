//! A constructor parameter names a type that is not a proto (and is not marked `external`).
use std::sync::Arc;

use tegu_core::singleton_proto;

pub struct Settings;

pub struct Server {
    settings: Arc<Settings>,
}

#[singleton_proto]
impl Server {
    pub fn new(settings: Arc<Settings>) -> Self {
        Server { settings }
    }
}

fn main() {}
