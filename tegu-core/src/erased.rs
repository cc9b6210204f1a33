//! Erased types: objects, hook and build futures, casts, as the container stores and calls
//! them. Floor 0: nothing here knows what a proto is.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::error::BoxError;

/// A type-erased, shareable object as the container stores it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::AnyArc;
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
/// use tegu_core::registry::{AnyArc, UnitFuture};
///
/// #[derive(Default)]
/// struct Pool { open: AtomicBool }
///
/// /// An init hook as the macros write it: the erased object in, a boxed future out.
/// fn open(obj: AnyArc) -> UnitFuture {
///     let pool = obj.downcast::<Pool>().expect("registered as a Pool");
///     Box::pin(async move {
///         pool.open.store(true, Ordering::SeqCst);
///         Ok(())
///     })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let pool = Arc::new(Pool::default());
/// let hook: UnitFuture = open(pool.clone());
/// assert!(!pool.open.load(Ordering::SeqCst)); // nothing runs until it is polled
/// tokio::spawn(hook).await??; // `Send + 'static`: it may run on a task of its own
/// assert!(pool.open.load(Ordering::SeqCst));
/// # Ok(()) }
/// ```
pub type UnitFuture = BoxFuture<'static, Result<(), BoxError>>;

/// A boxed, `Send` future of `T` that lives for `'a`: what a trait object's async method
/// returns (an event transport's send, a schedule lock's claim, a broker's publish).
///
/// # Examples
///
/// ```
/// use tegu_core::futures::BoxFuture;
///
/// trait Lock: Send + Sync {
///     fn claim<'a>(&'a self, job: &'a str) -> BoxFuture<'a, bool>;
/// }
///
/// struct Always;
/// impl Lock for Always {
///     fn claim<'a>(&'a self, job: &'a str) -> BoxFuture<'a, bool> {
///         Box::pin(async move { !job.is_empty() })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert!(Always.claim("nightly").await);
/// # }
/// ```
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an async constructor returns, erased: the object, or the constructor's error.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, BuildFuture};
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
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let obj: AnyArc = connect(4).await?;
/// assert_eq!(obj.downcast::<Pool>().expect("a Pool").size, 4);
/// # Ok(()) }
/// ```
pub type BuildFuture = BoxFuture<'static, Result<AnyArc, BoxError>>;

/// A type-erased lifecycle hook in a static descriptor.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tegu_core::registry::{AnyArc, HookFn, UnitFuture};
///
/// #[derive(Default)]
/// struct Conn { log: Mutex<Vec<&'static str>> }
///
/// fn open(obj: AnyArc) -> UnitFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("open"); Ok(()) })
/// }
/// fn close(obj: AnyArc) -> UnitFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("close"); Ok(()) })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// // What `ProtoDescriptor::init` and `destroy` hold, and the container calls.
/// let hooks: [HookFn; 2] = [open, close];
/// let conn = Arc::new(Conn::default());
/// for hook in hooks {
///     hook(conn.clone()).await?;
/// }
/// assert_eq!(*conn.log.lock().unwrap(), ["open", "close"]);
/// # Ok(()) }
/// ```
pub type HookFn = fn(AnyArc) -> UnitFuture;

/// Turns an object into an `Arc<U>` (its own type or a `dyn Trait` it provides), written into
/// `out`, an `&mut Option<Arc<U>>` on the caller's stack: a cast allocates nothing. See
/// [`cast_to`] and [`put`].
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, CastFn, cast_to, put};
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
/// // Two kinds: to the object's own type, and to a type it provides (a descriptor needs
/// // only the second: its own type is converted where it is asked for).
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

pub(crate) type DynHook = dyn Fn(AnyArc) -> UnitFuture + Send + Sync;

pub(crate) type DynCast = dyn Fn(AnyArc, &mut dyn Any) + Send + Sync;

/// The erased object as its own type: the one downcast every typed accessor goes through.
#[inline]
pub fn downcast<T: Send + Sync + 'static>(obj: AnyArc) -> Arc<T> {
    match obj.downcast::<T>() {
        Ok(t) => t,
        Err(_) => stored_as_another_type(),
    }
}

/// A [`CastFn`] to the object's own type: `Arc<dyn Any>` back to `Arc<T>`, for a
/// [`Provide`](crate::registry::Provide) entry that names a concrete type. A descriptor's own
/// type needs none (a cast per proto is a large part of a large crate's debug build).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, cast_to};
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

/// `obj` as an `Arc<U>`, `U` being the object's own type: how every proto's own entry is
/// reached (a `ContextRef<U>`, `get_provider::<U>()`), compiled once per type *asked for*
/// instead of a cast compiled per proto, which weighs on a large crate's debug build
/// (`docs/decisions.md`).
///
/// `U` is `?Sized` because its callers are (`ContextRef<dyn Trait>` goes through a provided
/// type's cast instead); an unsized `U` is never an object's own type, so it fails the check.
///
/// # Panics
///
/// When the object is not a `U`: a factory returned another type than its proto's, a
/// programming error in hand-written registration.
#[inline]
pub(crate) fn own_as<U: ?Sized + 'static>(obj: AnyArc) -> Arc<U> {
    let any: &dyn Any = &*obj;
    if any.type_id() != TypeId::of::<U>() {
        stored_as_another_type()
    }
    let data: *const () = Arc::into_raw(obj).cast::<()>();
    assert!(size_of::<*const U>() == size_of::<*const ()>(), "a sized type's pointer is thin");
    // SAFETY: the object's concrete type has `U`'s `TypeId`, so it *is* `U`, and `U` is sized:
    // `*const U` is a thin pointer (checked above), which `transmute_copy` makes from `data`,
    // the address of that `U`. `data` comes from `Arc::into_raw` of an `Arc<dyn Any + Send +
    // Sync>` whose data is that `U`, allocated by `Arc` with `U`'s layout (an `Arc<U>` coerced,
    // or `Arc::from` a box): what `Arc::<U>::from_raw` requires ("its data pointer must have
    // the same size and alignment as T"). The strong count `into_raw` kept is the one the new
    // `Arc` owns. This is `Arc::downcast`'s own conversion, minus its `T: Sized` bound.
    // Checked under miri: `cargo +nightly miri test -p tegu-core --lib erased`.
    #[expect(unsafe_code, reason = "a cast back to the own type: measured reason above and in docs/decisions.md")]
    unsafe {
        Arc::from_raw(std::mem::transmute_copy::<*const (), *const U>(&data))
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
/// use tegu_core::registry::{AnyArc, Provide, put};
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
    if let Some(slot) = out.downcast_mut::<Option<Arc<U>>>() {
        *slot = Some(value);
        return;
    }
    // A factory's `fill`, for a fake of a proto's own type: the `Arc` raw, once its type is
    // known to be the one asked for (and so sized: a proto's own type).
    match out.downcast_mut::<RawOut>() {
        Some(raw) if raw.ty == TypeId::of::<U>() => raw.raw = Some(thin(Arc::into_raw(value))),
        _ => cast_to_another_type(core::any::type_name::<U>()),
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

/// One `#[inject] x: Arc<T>` field's object (`T` a proto, checked at compile time, so sized) on
/// its way from [`fill`](crate::private::fill) to [`Own::take`]: a factory holds an array of them,
/// one per such field.
///
/// Sixteen bytes, empty when null, so that a factory's array starts without a `memset` and an
/// object costs `fill` one store: `fill` resolves every object (an error drops the ones
/// before it with the array), and [`Own::take`] checks its type and turns it into an `Arc<T>`
/// with no code per type but `Arc::from_raw`'s, the least a typed `Arc` costs (a downcast with a
/// typed fallback compiled per type was most of the code a 2000-field consumer compiled; see
/// `docs/decisions.md`). A fake stored as another type is converted by its target's cast in
/// `fill`, into a `Converted` that `take` reads on its rare path.
#[derive(Debug)]
pub struct Own(Option<AnyArc>);

impl Own {
    /// An empty place, for the factory's array.
    pub const EMPTY: Own = Own(None);

    /// Puts a resolved object in this place.
    #[inline]
    pub(crate) fn set(&mut self, obj: AnyArc) {
        self.0 = Some(obj);
    }

    /// For an object stored as another type than the declared one, `declared` (a fake given to
    /// `override_provider`): what `cast`, its target's cast, writes through `put`, kept as a
    /// [`Converted`]. `fill` converts after every object is resolved, so that an error drops
    /// them all.
    pub(crate) fn convert_by(
        &mut self,
        declared: TypeId,
        cast: impl FnOnce(AnyArc, &mut RawOut),
        name: impl FnOnce() -> &'static str,
    ) {
        let Some(obj) = self.0.take() else { unfilled() };
        let mut out = RawOut { ty: declared, raw: None };
        cast(obj, &mut out);
        match out.raw {
            Some(raw) => self.0 = Some(Arc::new(Converted { ptr: AtomicPtr::new(raw.as_ptr()), ty: declared })),
            None => left_empty(name()),
        }
    }

    /// The raw pointer of this place's object, if it is of type `ty` (or a fake converted to
    /// it), and the place emptied. Not generic. Aborts otherwise, which no generated factory
    /// reaches: a descriptor's factory that returns another type than its proto's is refused
    /// where it returns (`SyncFactory::call`).
    #[inline]
    fn raw(&mut self, ty: TypeId) -> NonNull<()> {
        match self.0.take() {
            Some(obj) if (*obj).type_id() == ty => thin(Arc::into_raw(obj)),
            Some(obj) => converted(obj, ty),
            None => unfilled(),
        }
    }

    /// This place's object as an `Arc<T>`, taken out of the factory's array: the second step of
    /// [`fill`](crate::private::fill). A method, so that the macros' call for each dependency
    /// is a few tokens (each costs a large crate's rebuild). Inlined into the factory, with no
    /// function per dependency type but `Arc::from_raw` and no unwinding: a place that is not a
    /// `T` aborts (the macros never make one), so the factory's takes need no cleanup paths.
    #[inline]
    pub fn take<T: Send + Sync + 'static>(&mut self) -> Arc<T> {
        let ptr = self.raw(TypeId::of::<T>());
        // SAFETY: `raw` returned either `Arc::into_raw` of an `Arc<dyn Any + Send + Sync>` whose
        // object's `TypeId` is `T`'s (an `Arc<T>` coerced), or the pointer a `Converted` of
        // `T`'s `TypeId` holds, which `put` made with `Arc::into_raw` of an `Arc<U>` whose `U`
        // has that `TypeId`: either way, the address of a `T` in an allocation of `Arc<T>`'s
        // layout, what `Arc::<T>::from_raw` requires. The strong count
        // `into_raw` kept is the one the new `Arc` owns, and `raw` emptied the place (a
        // `Converted` is read once: it goes with the place's `Arc`), so no other `Arc` is made
        // from it. Checked under miri: `cargo +nightly miri test -p tegu-core --lib erased`.
        #[expect(unsafe_code, reason = "a cast back to the own type: measured reason above and in docs/decisions.md")]
        unsafe {
            Arc::from_raw(ptr.as_ptr() as *const T)
        }
    }
}

/// A fake converted by its target's cast for [`Own`]: the address of the `T` inside an
/// `Arc<T>` that owns one strong count of it (an `AtomicPtr` only to be `Send` and `Sync`
/// without `unsafe`: it is written once, before it is shared), and `T`'s `TypeId`. Made only by
/// [`Own::convert_by`] (the type is private, so no factory returns one). Dropped untaken (a
/// later cast of the same `fill` panicked), it leaks that count: the fake outlives the test.
#[derive(Debug)]
struct Converted {
    ptr: AtomicPtr<()>,
    ty: TypeId,
}

/// [`Own::raw`]'s rare path: a [`Converted`] fake of type `ty`, else an abort (see `unfilled`).
#[cold]
#[inline(never)]
fn converted(obj: AnyArc, ty: TypeId) -> NonNull<()> {
    match obj.downcast::<Converted>() {
        Ok(fake) if fake.ty == ty => match NonNull::new(fake.ptr.load(Ordering::Relaxed)) {
            Some(ptr) => ptr,
            None => unreachable!("Arc::into_raw is never null"),
        },
        _ => unfilled(),
    }
}

/// Where [`put`](crate::registry::put) writes an `Arc<U>` raw, for `fill`: `U` is `ty`, the
/// dependency's declared type, checked by `put`.
pub(crate) struct RawOut {
    pub(crate) ty: TypeId,
    pub(crate) raw: Option<NonNull<()>>,
}

/// The data address of an `Arc::into_raw` pointer, without its metadata.
pub(crate) fn thin<U: ?Sized>(ptr: *const U) -> NonNull<()> {
    match NonNull::new(ptr.cast::<()>().cast_mut()) {
        Some(ptr) => ptr,
        None => unreachable!("Arc::into_raw is never null"),
    }
}

#[cold]
#[inline(never)]
fn left_empty(ty: &str) -> ! {
    panic!("the cast of a fake for `{ty}` returned without `put`")
}

/// An object `fill` did not write, or not of the type asked for, which the macros never
/// make: they give it as many places as indices and take each as its declared type.
/// `extern "C"`, so that it adds no unwind path to each dependency of a factory.
#[cold]
#[inline(never)]
extern "C" fn unfilled() -> ! {
    eprintln!(
        "tegu-core: a generated factory took a dependency as a type its object is not (fill was not called, or a hand-written factory returned another type than its proto's)"
    );
    std::process::abort()
}

#[cfg(test)]
mod tests {
    //! Run under miri too: `cargo +nightly miri test -p tegu-core --lib erased`.

    use std::any::Any;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use std::any::TypeId;

    use super::{AnyArc, Own, RawOut, downcast, own_as, put};

    #[repr(align(64))]
    struct Wide([u8; 3]);

    struct Counted<'a>(&'a AtomicUsize);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn own_as_yields_the_same_object_with_its_count() {
        let obj: AnyArc = Arc::new(42u64);
        let again = obj.clone();
        let n = own_as::<u64>(obj);
        assert_eq!(*n, 42);
        assert_eq!(Arc::strong_count(&n), 2);
        assert!(Arc::ptr_eq(&n, &again.clone().downcast::<u64>().unwrap()));
        drop(again);
        assert_eq!(Arc::strong_count(&n), 1);
    }

    #[test]
    fn own_as_keeps_alignment_sizes_and_drops_once() {
        let wide = own_as::<Wide>(Arc::new(Wide([1, 2, 3])));
        assert_eq!(wide.0, [1, 2, 3]);
        assert_eq!(std::ptr::from_ref::<Wide>(&wide) as usize % 64, 0);
        let unit = own_as::<()>(Arc::new(()));
        assert_eq!(*unit, ());
        let boxed: Box<dyn Any + Send + Sync> = Box::new(String::from("from a box"));
        assert_eq!(*own_as::<String>(Arc::from(boxed)), "from a box");

        static DROPS: AtomicUsize = AtomicUsize::new(0);
        let counted = own_as::<Counted<'static>>(Arc::new(Counted(&DROPS)));
        let weak = Arc::downgrade(&counted);
        drop(counted);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn own_as_refuses_another_type_and_any_unsized_one() {
        let wrong = std::panic::catch_unwind(|| own_as::<u32>(Arc::new(1u64)));
        assert!(wrong.is_err(), "a u64 is not a u32");
        let unsized_ = std::panic::catch_unwind(|| own_as::<dyn Send>(Arc::new(1u64)));
        assert!(unsized_.is_err(), "no object's own type is unsized");
        let slice = std::panic::catch_unwind(|| own_as::<[u64]>(Arc::new(1u64)));
        assert!(slice.is_err());
    }

    #[derive(Debug, PartialEq)]
    struct Svc(u64);

    fn filled(obj: AnyArc) -> Own {
        let mut own = Own::EMPTY;
        own.set(obj);
        own
    }

    #[test]
    fn an_object_of_the_declared_type_is_taken_as_itself() {
        let obj: AnyArc = Arc::new(Svc(7));
        let keep = obj.clone();
        let mut own = filled(obj);
        let svc: Arc<Svc> = own.take();
        assert_eq!(*svc, Svc(7));
        assert_eq!(Arc::strong_count(&svc), 2, "the same object, one count moved into the `Arc`");
        drop(svc);
        assert_eq!(Arc::strong_count(&keep), 1);
    }

    #[test]
    fn a_fake_stored_as_another_type_is_taken_through_its_cast() {
        let fake = Arc::new(Svc(9));
        // How `override_provider` stores a fake: an `Arc<Svc>` inside the object.
        let obj: AnyArc = Arc::new(fake.clone());
        let mut own = Own::EMPTY;
        own.set(obj);
        let cast = |obj, out: &mut RawOut| put(out as &mut dyn Any, (*downcast::<Arc<Svc>>(obj)).clone());
        own.convert_by(TypeId::of::<Svc>(), cast, || "Svc");
        let svc: Arc<Svc> = own.take();
        assert!(Arc::ptr_eq(&svc, &fake));
        assert_eq!(Arc::strong_count(&fake), 2, "the wrapper is gone, the taken `Arc` holds one count");
        drop(svc);
        assert_eq!(Arc::strong_count(&fake), 1, "the converted fake held no count of its own");
    }

    #[test]
    fn objects_resolved_but_not_converted_are_dropped_with_the_array() {
        let obj: AnyArc = Arc::new(Svc(1));
        let keep = obj.clone();
        let mut objs = [Own::EMPTY, Own::EMPTY];
        objs[0].set(obj);
        // As when the second dependency's resolution fails: `fill` returns before converting.
        drop(objs);
        assert_eq!(Arc::strong_count(&keep), 1);
    }

    #[test]
    #[should_panic(expected = "a cast yields `Arc<")]
    fn a_cast_that_puts_another_type_is_refused() {
        let obj: AnyArc = Arc::new(Svc(3));
        let mut own = Own::EMPTY;
        own.set(obj);
        // Declared as `u8`, and the cast puts a `Svc`: `put` checks the type asked for.
        own.convert_by(
            TypeId::of::<u8>(),
            |obj, out: &mut RawOut| put(out as &mut dyn Any, downcast::<Svc>(obj)),
            || "u8",
        );
    }
}
