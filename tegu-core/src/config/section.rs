//! What a config proto's descriptor reads its section with: [`LoadFn`] and [`load_section`],
//! public through `registry` (for macro authors) and `__private`.

use std::sync::Arc;

use crate::config::Config;
use crate::erased::AnyArc;
use crate::error::DiError;

/// Reads a config section as `T`, erased: the loader a config proto's descriptor holds.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, LoadFn, load_section};
/// use tegu_core::{App, config::Config, DiError};
///
/// /// A loader of one's own: the port at `prefix`, raised to 1024 at least.
/// fn unprivileged_port(config: &Config, prefix: &str, _section: &'static str) -> Result<AnyArc, DiError> {
///     let port: u16 = config.get(prefix)?;
///     Ok(Arc::new(port.max(1024)))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().config_known("http").config_value("http.port", 80).build().await?;
/// let read = |load: LoadFn| -> Result<u16, DiError> {
///     let obj = load(app.config(), "http.port", "port")?;
///     Ok(*obj.downcast::<u16>().expect("a u16"))
/// };
/// assert_eq!(read(load_section::<u16>)?, 80);
/// assert_eq!(read(unprivileged_port)?, 1024);
/// # Ok(()) }
/// ```
pub type LoadFn = fn(&Config, &str, &'static str) -> Result<AnyArc, DiError>;

/// The [`LoadFn`] of a section of type `T`.
///
/// # Examples
///
/// ```
/// use tegu_core::registry::load_section;
/// use tegu_core::{App, DiError};
///
/// #[derive(serde::Deserialize)]
/// struct Db { url: String, #[serde(default)] pool: u32 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().config_known("db").config_value("db.url", "sqlite::memory:").build().await?;
/// let db = load_section::<Db>(app.config(), "db", "Db")?.downcast::<Db>().expect("a Db");
/// assert_eq!((db.url.as_str(), db.pool), ("sqlite::memory:", 0));
/// // An absent section reads as an empty table: here, `url` is missing.
/// assert!(matches!(load_section::<Db>(app.config(), "cache", "Db"), Err(DiError::ConfigMissing { .. })));
/// # Ok(()) }
/// ```
pub fn load_section<T: for<'de> serde::Deserialize<'de> + Send + Sync + 'static>(
    config: &Config,
    prefix: &str,
    section: &'static str,
) -> Result<AnyArc, DiError> {
    config.section::<T>(prefix, section).map(|t| Arc::new(t) as AnyArc)
}
