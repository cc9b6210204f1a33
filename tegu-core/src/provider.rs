//! `Provider<T>`: a singleton's handle on a transient proto, building a new `T` per call.

use crate::runtime::AppCell;

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Weak};

use crate::erased::downcast;
use crate::error::DiError;

/// A handle that builds a new object of transient proto `T` on every [`get`](Self::get): what
/// a singleton holds where it needs a fresh `T` each time (a builder, a buffer, a per-call
/// client). Taking a transient by value would capture one object for the App's whole life, so
/// the macros refuse `Arc<T>` of a transient in a singleton, naming `Provider<T>`.
///
/// Inside a context scope, the new `T` takes its context dependencies from that scope.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tegu_core::{singleton_proto, transient_proto, App, Provider};
///
/// static NEXT: AtomicU64 = AtomicU64::new(1);
///
/// pub struct Receipt { number: u64 }
/// #[transient_proto]
/// impl Receipt {
///     fn new() -> Self { Receipt { number: NEXT.fetch_add(1, Ordering::Relaxed) } }
/// }
///
/// pub struct Till { receipts: Provider<Receipt> }
/// #[singleton_proto]
/// impl Till {
///     fn new(receipts: Provider<Receipt>) -> Self { Till { receipts } }
///     fn print(&self) -> u64 { self.receipts.get().unwrap().number }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let till = app.get_object::<Till>()?;
/// assert_ne!(till.print(), till.print()); // a new receipt each time
/// # Ok(()) }
/// ```
pub struct Provider<T: ?Sized> {
    app: AppCell,
    key: u32,
    _type: PhantomData<fn() -> Box<T>>,
}

impl<T: Send + Sync + 'static> Provider<T> {
    pub(crate) fn new(app: AppCell, key: u32) -> Self {
        Provider { app, key, _type: PhantomData }
    }

    /// A new `T`.
    ///
    /// # Errors
    ///
    /// [`DiError::AppNotReady`] before `build()` has returned (a singleton's constructor or init
    /// hook cannot use its providers yet) or after the App is dropped; [`DiError::NoScope`]
    /// when `T` takes a context proto by value outside a scope; any error of `T`'s factory.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef, Provider};
    ///
    /// struct Buffer(Vec<u8>);
    /// struct Encoder { buffers: Provider<Buffer> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::transient::<Buffer>(|_| Ok(Buffer(Vec::with_capacity(64)))))
    ///     .register(ProtoDef::singleton::<Encoder>(|r| Ok(Encoder { buffers: r.provider(0)? }))
    ///         .dep(Dependency::new::<Buffer>(InjectKind::Provider, None)))
    ///     .build()
    ///     .await?;
    /// let encoder = app.get_object::<Encoder>()?;
    /// let (a, b) = (encoder.buffers.get()?, encoder.buffers.get()?);
    /// assert!(!Arc::ptr_eq(&a, &b) && a.0.capacity() >= 64);
    /// // Once the App is gone, a provider has nothing to build with.
    /// let buffers = encoder.buffers.clone();
    /// drop((encoder, app));
    /// assert!(matches!(buffers.get(), Err(DiError::AppNotReady { .. })));
    /// # Ok(()) }
    /// ```
    pub fn get(&self) -> Result<Arc<T>, DiError> {
        let wanted = core::any::type_name::<T>();
        let app = self.app.get().and_then(Weak::upgrade).ok_or(DiError::AppNotReady { wanted })?;
        app.build_transient(self.key).map(downcast::<T>)
    }
}

impl<T: ?Sized> Clone for Provider<T> {
    fn clone(&self) -> Self {
        Provider { app: self.app.clone(), key: self.key, _type: PhantomData }
    }
}

impl<T: ?Sized> fmt::Debug for Provider<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Provider<{}>", core::any::type_name::<T>())
    }
}
