//! A config section has a prefix and no hooks, injections or provides.
use std::sync::Arc;

use tegu_core::{config_proto, singleton_proto};

#[config_proto]
#[derive(serde::Deserialize)]
pub struct NoPrefix {
    pub url: String,
}

#[config_proto(prefix = "db", init = open, provides(dyn Send))]
#[derive(serde::Deserialize)]
pub struct WithHooks {
    pub url: String,
}

#[config_proto(prefix = "db..pool")]
#[derive(serde::Deserialize)]
pub struct BadPrefix {
    pub size: u32,
}

#[singleton_proto]
pub struct Clock;

#[config_proto(prefix = "app")]
#[derive(serde::Deserialize)]
pub struct Injecting {
    #[inject]
    #[serde(skip)]
    clock: Option<Arc<Clock>>,
}

#[singleton_proto(prefix = "db", instances)]
pub struct NotAConfig;

fn main() {}
