//! A reloadable section is one section: a multi-instance one cannot be reloadable.
use tegu_core::config_proto;

#[config_proto(prefix = "shards", instances, reloadable)]
#[derive(serde::Deserialize)]
pub struct Shard {
    pub url: String,
}

fn main() {}
