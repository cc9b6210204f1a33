//! Constructors: sync and async, returning `Self` or `Result<Self, E>`, `new` or
//! `#[constructor]`, with every kind of parameter and hooks on the `impl` attribute.
use std::sync::Arc;

use tegu_core::{AsyncContextRef, ContextRef, Keyed, config_proto, context_proto, singleton_proto};

#[config_proto(prefix = "db")]
#[derive(serde::Deserialize)]
pub struct DbConfig {
    #[serde(default)]
    pub url: String,
}

pub trait Clock: Send + Sync {}
#[singleton_proto(name = "primary", provides(dyn Clock))]
pub struct SystemClock;
impl Clock for SystemClock {}

pub struct Db {
    pub url: String,
}

#[singleton_proto(destroy = close)]
impl Db {
    pub async fn new(config: Arc<DbConfig>, #[inject(name = "primary")] _clock: Arc<dyn Clock>) -> Result<Self, std::io::Error> {
        Ok(Db { url: config.url.clone() })
    }
    async fn close(&self) {}
}

#[context_proto]
pub struct Tracer;

pub struct Session;
#[context_proto]
impl Session {
    #[constructor]
    async fn open(_db: Arc<Db>, _tracer: Arc<Tracer>) -> Session {
        Session
    }
}

pub struct Service {
    pub tracer: ContextRef<Tracer>,
    pub session: AsyncContextRef<Session>,
    pub clocks: Vec<Arc<dyn Clock>>,
    pub dbs: Keyed<Db>,
    pub missing: Option<Arc<Db>>,
}

#[singleton_proto(name = "service")]
impl Service {
    fn new(
        tracer: ContextRef<Tracer>,
        session: AsyncContextRef<Session>,
        clocks: Vec<Arc<dyn Clock>>,
        dbs: Keyed<Db>,
        missing: Option<Arc<Db>>,
    ) -> Self {
        Service { tracer, session, clocks, dbs, missing }
    }
}

fn main() {}

/// The `impl` block may name the type by a path: it resolves where the block is.
mod models {
    pub struct Remote {
        pub port: u16,
    }
}

#[singleton_proto(name = "remote")]
impl models::Remote {
    fn new() -> Self {
        models::Remote { port: 7001 }
    }
}

/// `Self` in a parameter type names the proto's type (the parameters move into a generated
/// free function). This compiles; `build()` would report the cycle of a proto on itself.
pub struct Node;

#[singleton_proto]
impl Node {
    fn new(_me: Option<Arc<Self>>) -> Self {
        Node
    }
}
