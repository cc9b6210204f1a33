//! What a proto can be injected as besides itself: a `dyn Trait` it provides, and its cast.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::erased::{AnyArc, CastFn, DynCast, cast_to_another_type};

/// A type a proto can be injected as, besides its own: usually a `dyn Trait`.
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
///
/// // The list `#[singleton_proto(provides(dyn Greet))]` on `English` declares.
/// const PROVIDES: &[Provide] = &[Provide::new::<dyn Greet>(english_as_greet)];
/// assert!(format!("{:?}", PROVIDES[0]).contains("Greet"), "{:?}", PROVIDES[0]);
/// // The container calls the cast with the built object and a slot of the provided type.
/// let mut slot: Option<Arc<dyn Greet>> = None;
/// english_as_greet(Arc::new(English), &mut slot);
/// assert_eq!(slot.expect("filled by the cast").hi(), "hello");
/// ```
#[derive(Clone)]
pub struct Provide {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) cast: ProvideCast,
}

impl Provide {
    /// Declares that the proto can be injected as `U`. `cast` receives the object (its concrete
    /// type erased) and [`put`](crate::registry::put)s it, as an `Arc<U>`, into its second argument; the macros
    /// generate it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::Any;
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor, Provide, put};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// trait Greet: Send + Sync { fn hi(&self) -> &str; }
    /// struct English;
    /// impl Greet for English { fn hi(&self) -> &str { "hello" } }
    ///
    /// fn english(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(English))
    /// }
    /// fn english_as_greet(obj: AnyArc, out: &mut dyn Any) {
    ///     let english: Arc<dyn Greet> = obj.downcast::<English>().expect("registered as English");
    ///     put(out, english);
    /// }
    ///
    /// impl Proto for English {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<English>("english", Lifetime::Singleton, english)
    ///             .provides(const { &[Provide::new::<dyn Greet>(english_as_greet)] });
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<English>().build().await?;
    /// assert_eq!(app.get_provider::<dyn Greet>()?.hi(), "hello");
    /// # Ok(()) }
    /// ```
    pub const fn new<U: ?Sized + 'static>(cast: CastFn) -> Self {
        Provide { type_id: TypeId::of::<U>, type_name: core::any::type_name::<U>, cast: ProvideCast::Fn(cast) }
    }
}

impl fmt::Debug for Provide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Provide").field(&(self.type_name)()).finish()
    }
}

/// A provided type's cast: a static `fn` (from a descriptor, no allocation) or a closure (from
/// [`ProtoDef::provides`](crate::ProtoDef::provides)). The proto's own type has none: the
/// object already is one, and [`own_as`](crate::erased::own_as) converts it where it is asked
/// for, so that no cast is compiled per proto.
#[derive(Clone)]
pub(crate) enum ProvideCast {
    Fn(CastFn),
    Closure(Arc<DynCast>),
}

/// Runs `cast` on `obj` and returns the `Arc<U>` it yields. The dispatch is not generic: per
/// type, only the output slot and its check are compiled (generic code per proto is what a
/// large project's build spends its time on).
#[inline]
pub(crate) fn cast_with<U: ?Sized + 'static>(cast: &ProvideCast, obj: AnyArc) -> Arc<U> {
    let mut out: Option<Arc<U>> = None;
    run_cast(cast, obj, &mut out);
    match out {
        Some(value) => value,
        None => cast_to_another_type(core::any::type_name::<U>()),
    }
}

pub(crate) fn run_cast(cast: &ProvideCast, obj: AnyArc, out: &mut dyn Any) {
    match cast {
        ProvideCast::Fn(f) => f(obj, out),
        ProvideCast::Closure(f) => f(obj, out),
    }
}
