//! `Keyed<T>`: every provider of `T`, by object name.

use std::fmt;
use std::sync::Arc;

use crate::error::DiError;

/// Every provider of `T` by object name: the instances of a multi-instance proto, picked at
/// run time (`Keyed<Redis>`, then `redis.get(tenant.cache_name())`). Injected like a
/// `Vec<Arc<T>>`; `T` may be a `dyn Trait`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
///
/// struct Bucket(&'static str);
/// struct Store { buckets: Keyed<Bucket> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
///     .build()
///     .await?;
/// let store = app.get_object::<Store>()?;
/// assert_eq!(store.buckets.get("logs")?.0, "logs-eu");
/// assert_eq!(store.buckets.names().collect::<Vec<_>>(), ["logs", "photos"]);
/// let error = store.buckets.get("videos").err().unwrap().to_string();
/// assert!(error.contains("\"logs\", \"photos\""), "{error}");
/// # Ok(()) }
/// ```
pub struct Keyed<T: ?Sized> {
    /// Sorted by name.
    entries: Vec<(String, Arc<T>)>,
}

impl<T: ?Sized> Keyed<T> {
    pub(crate) fn new(mut entries: Vec<(String, Arc<T>)>) -> Self {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Keyed { entries }
    }

    /// The provider named `name`.
    ///
    /// # Errors
    ///
    /// [`DiError::UnknownInstance`], listing the names there are.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// struct Bucket(&'static str);
    /// struct Store { buckets: Keyed<Bucket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
    ///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
    ///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let buckets = &app.get_object::<Store>()?.buckets;
    /// assert_eq!(buckets.get("photos")?.0, "photos-eu");
    /// assert!(buckets.get("videos").is_err());
    /// # Ok(()) }
    /// ```
    pub fn get(&self, name: &str) -> Result<Arc<T>, DiError> {
        match self.entries.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) => Ok(self.entries[i].1.clone()),
            Err(_) => Err(DiError::UnknownInstance {
                wanted: core::any::type_name::<T>(),
                name: name.to_owned(),
                known: self.entries.iter().map(|(n, _)| format!("\"{n}\"")).collect(),
            }),
        }
    }

    /// The names, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// struct Bucket(&'static str);
    /// struct Store { buckets: Keyed<Bucket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
    ///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
    ///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let buckets = &app.get_object::<Store>()?.buckets;
    /// assert_eq!(buckets.names().collect::<Vec<_>>(), ["logs", "photos"]);
    /// # Ok(()) }
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The providers and their names, in name order.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// struct Bucket(&'static str);
    /// struct Store { buckets: Keyed<Bucket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
    ///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
    ///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let buckets = &app.get_object::<Store>()?.buckets;
    /// let all: Vec<(&str, &str)> = buckets.iter().map(|(name, b)| (name, b.0)).collect();
    /// assert_eq!(all, [("logs", "logs-eu"), ("photos", "photos-eu")]);
    /// # Ok(()) }
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<T>)> {
        self.entries.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// How many providers there are.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// struct Bucket(&'static str);
    /// struct Store { buckets: Keyed<Bucket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
    ///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
    ///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let buckets = &app.get_object::<Store>()?.buckets;
    /// assert_eq!(buckets.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// struct Bucket(&'static str);
    /// struct Store { buckets: Keyed<Bucket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("photos-eu"))).name("photos"))
    ///     .register(ProtoDef::singleton::<Bucket>(|_| Ok(Bucket("logs-eu"))).name("logs"))
    ///     .register(ProtoDef::singleton::<Store>(|r| Ok(Store { buckets: r.keyed(0)? }))
    ///         .dep(Dependency::new::<Bucket>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let buckets = &app.get_object::<Store>()?.buckets;
    /// assert!(!buckets.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<T: ?Sized> Clone for Keyed<T> {
    fn clone(&self) -> Self {
        Keyed { entries: self.entries.clone() }
    }
}

impl<T: ?Sized> fmt::Debug for Keyed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keyed<{}>", core::any::type_name::<T>())?;
        f.debug_list().entries(self.names()).finish()
    }
}
