//! A plugin: nothing in the application names its types, it only adds an implementation of
//! [`Greeting`]. Its `inventory` registration may be dropped by the linker, so applications
//! reference it with `App::builder().link::<French>()`.

use tegu_core::singleton_proto;

/// Something that greets; the application collects every implementation.
pub trait Greeting: Send + Sync {
    /// The greeting word.
    fn word(&self) -> &'static str;
}

/// The plugin's implementation.
#[derive(Debug)]
#[singleton_proto(provides(dyn Greeting))]
pub struct French;

impl Greeting for French {
    fn word(&self) -> &'static str {
        "bonjour"
    }
}
