//! Config sections: serde attributes, instances, profiles, a tuple struct, and injection by
//! `Arc`, name, `Vec` and `Keyed`.
use std::sync::Arc;

use tegu_core::{Keyed, config_proto, singleton_proto};

#[config_proto(prefix = "http")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    #[serde(default)]
    pub port: u16,
}

#[config_proto(prefix = "redis", instances)]
#[derive(serde::Deserialize)]
pub struct RedisConfig {
    pub url: String,
}

#[config_proto(prefix = "feature.flag", profile = "test", name = "flag")]
#[derive(serde::Deserialize)]
pub struct Flag(#[serde(default)] pub bool);

pub struct Redis {
    pub url: String,
}

#[singleton_proto(instances_of = RedisConfig)]
impl Redis {
    fn new(config: Arc<RedisConfig>) -> Self {
        Redis { url: config.url.clone() }
    }
}

#[singleton_proto]
pub struct Caches {
    #[inject(name = "cache")]
    pub cache: Arc<Redis>,
    #[inject]
    pub all: Vec<Arc<Redis>>,
    #[inject]
    pub by_name: Keyed<Redis>,
    #[inject]
    pub http: Arc<HttpConfig>,
}

fn main() {}
