//! A config section is deserialized from the configuration: it needs `serde::Deserialize`.
use tegu_core::config_proto;

#[config_proto(prefix = "db")]
pub struct DbConfig {
    pub url: String,
}

fn main() {}
