//! Erased types: objects, hook and build futures, casts, as the container stores and calls
//! them. Floor 0: nothing here knows what a proto is.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::BoxError;

/// A type-erased, shareable object as the container stores it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::AnyArc;
///
/// struct Clock { now: u64 }
///
/// // What a factory returns: the object, its type erased.
/// let obj: AnyArc = Arc::new(Clock { now: 42 });
/// assert!(obj.is::<Clock>());
/// let clock: Arc<Clock> = obj.downcast::<Clock>().expect("stored as a Clock");
/// assert_eq!(clock.now, 42);
/// ```
pub type AnyArc = Arc<dyn Any + Send + Sync>;

/// The future returned by lifecycle hooks.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use di_core::registry::{AnyArc, HookFuture};
///
/// #[derive(Default)]
/// struct Pool { open: AtomicBool }
///
/// /// An init hook as the macros write it: the erased object in, a boxed future out.
/// fn open(obj: AnyArc) -> HookFuture {
///     let pool = obj.downcast::<Pool>().expect("registered as a Pool");
///     Box::pin(async move {
///         pool.open.store(true, Ordering::SeqCst);
///         Ok(())
///     })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// let pool = Arc::new(Pool::default());
/// let hook: HookFuture = open(pool.clone());
/// assert!(!pool.open.load(Ordering::SeqCst)); // nothing runs until it is polled
/// tokio::spawn(hook).await??; // `Send + 'static`: it may run on a task of its own
/// assert!(pool.open.load(Ordering::SeqCst));
/// # Ok(()) }
/// ```
pub type HookFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + 'static>>;

/// What an async constructor returns, erased: the object, or the constructor's error.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, BuildFuture};
///
/// struct Pool { size: usize }
///
/// /// An async construction, erased as the container awaits it.
/// fn connect(size: usize) -> BuildFuture {
///     Box::pin(async move {
///         tokio::task::yield_now().await; // the I/O of a real constructor
///         Ok(Arc::new(Pool { size }) as AnyArc)
///     })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// let obj: AnyArc = connect(4).await?;
/// assert_eq!(obj.downcast::<Pool>().expect("a Pool").size, 4);
/// # Ok(()) }
/// ```
pub type BuildFuture = Pin<Box<dyn Future<Output = Result<AnyArc, BoxError>> + Send + 'static>>;

/// A type-erased lifecycle hook in a static descriptor.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use di_core::registry::{AnyArc, HookFn, HookFuture};
///
/// #[derive(Default)]
/// struct Conn { log: Mutex<Vec<&'static str>> }
///
/// fn open(obj: AnyArc) -> HookFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("open"); Ok(()) })
/// }
/// fn close(obj: AnyArc) -> HookFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("close"); Ok(()) })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// // What `ProtoDescriptor::init` and `destroy` hold, and the container calls.
/// let hooks: [HookFn; 2] = [open, close];
/// let conn = Arc::new(Conn::default());
/// for hook in hooks {
///     hook(conn.clone()).await?;
/// }
/// assert_eq!(*conn.log.lock().unwrap(), ["open", "close"]);
/// # Ok(()) }
/// ```
pub type HookFn = fn(AnyArc) -> HookFuture;

/// Turns an object into an `Arc<U>` (its own type or a `dyn Trait` it provides), written into
/// `out`, an `&mut Option<Arc<U>>` on the caller's stack: a cast allocates nothing. See
/// [`cast_to`] and [`put`].
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, CastFn, cast_to, put};
///
/// trait Tick: Send + Sync { fn now(&self) -> u64; }
/// struct Clock;
/// impl Tick for Clock { fn now(&self) -> u64 { 42 } }
///
/// /// The cast `#[singleton_proto(provides(dyn Tick))]` generates.
/// fn clock_as_tick(obj: AnyArc, out: &mut dyn Any) {
///     let clock: Arc<dyn Tick> = obj.downcast::<Clock>().expect("registered as a Clock");
///     put(out, clock);
/// }
///
/// // A descriptor holds two kinds: to its own type, and to each type it provides.
/// let casts: [CastFn; 2] = [cast_to::<Clock>, clock_as_tick];
/// let obj: AnyArc = Arc::new(Clock);
/// let mut own: Option<Arc<Clock>> = None;
/// casts[0](obj.clone(), &mut own);
/// let mut tick: Option<Arc<dyn Tick>> = None;
/// casts[1](obj, &mut tick);
/// assert!(own.is_some());
/// assert_eq!(tick.expect("written by the cast").now(), 42);
/// ```
pub type CastFn = fn(AnyArc, &mut dyn Any);

pub(crate) type DynHook = dyn Fn(AnyArc) -> HookFuture + Send + Sync;

pub(crate) type DynCast = dyn Fn(AnyArc, &mut dyn Any) + Send + Sync;

/// The erased object as its own type: the one downcast every typed accessor goes through.
#[inline]
pub fn downcast<T: Send + Sync + 'static>(obj: AnyArc) -> Arc<T> {
    match obj.downcast::<T>() {
        Ok(t) => t,
        Err(_) => stored_as_another_type(),
    }
}

/// The standard [`CastFn`] for a proto's own type: `Arc<dyn Any>` back to `Arc<T>`.
///
/// Compiled once per proto type, so written with no generic helper of its own: a large
/// project's build time goes to code instantiated per type (issue 13).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, cast_to};
///
/// struct Clock(u64);
///
/// let obj: AnyArc = Arc::new(Clock(42));
/// let mut out: Option<Arc<Clock>> = None; // on the caller's stack
/// cast_to::<Clock>(obj.clone(), &mut out);
/// let clock = out.expect("written by the cast");
/// assert_eq!(clock.0, 42);
/// assert_eq!(Arc::strong_count(&clock), 2); // the same object as `obj`, not a copy
/// ```
pub fn cast_to<T: Send + Sync + 'static>(obj: AnyArc, out: &mut dyn Any) {
    let Some(slot) = out.downcast_mut::<Option<Arc<T>>>() else { cast_to_another_type(core::any::type_name::<T>()) };
    match obj.downcast::<T>() {
        Ok(t) => *slot = Some(t),
        Err(_) => stored_as_another_type(),
    }
}

/// Writes `value` into a cast's `out`, the caller's `Option<Arc<U>>`: the last step of every
/// [`CastFn`].
///
/// # Panics
///
/// When `out` is not an `Option<Arc<U>>`: the cast was registered for another type than the
/// one it yields, a programming error in hand-written registration.
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, Provide, put};
///
/// trait Greet: Send + Sync { fn hi(&self) -> &str; }
/// struct English;
/// impl Greet for English { fn hi(&self) -> &str { "hello" } }
///
/// fn english_as_greet(obj: AnyArc, out: &mut dyn Any) {
///     let english: Arc<dyn Greet> = obj.downcast::<English>().expect("registered as English");
///     put(out, english);
/// }
/// const PROVIDES: &[Provide] = &[Provide::new::<dyn Greet>(english_as_greet)];
///
/// let mut out: Option<Arc<dyn Greet>> = None;
/// english_as_greet(Arc::new(English), &mut out);
/// assert_eq!(out.unwrap().hi(), "hello");
/// ```
pub fn put<U: ?Sized + 'static>(out: &mut dyn Any, value: Arc<U>) {
    match out.downcast_mut::<Option<Arc<U>>>() {
        Some(slot) => *slot = Some(value),
        None => cast_to_another_type(core::any::type_name::<U>()),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn cast_to_another_type(yields: &str) -> ! {
    panic!("a cast yields `Arc<{yields}>`, but was registered for another type")
}

/// The panic of the casts, out of line so that each monomorphized cast stays small.
#[cold]
#[inline(never)]
pub(crate) fn stored_as_another_type() -> ! {
    unreachable!("the container stores each proto as its own type")
}
