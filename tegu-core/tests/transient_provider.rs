//! Transient protos: a new object per injection and per `Provider::get`, never kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tegu_core::{
    App, ContextRef, DiError, ProtoDef, Provider, context_proto,
    registry::{Dependency, InjectKind},
    singleton_proto, transient_proto,
};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Numbered on construction.
struct Ticket {
    number: u64,
    /// The request's tracer, when built inside a scope.
    tracer: Option<Arc<Tracer>>,
}

#[transient_proto]
impl Ticket {
    fn new(tracer: Option<Arc<Tracer>>) -> Ticket {
        Ticket { number: NEXT.fetch_add(1, Ordering::SeqCst), tracer }
    }
}

/// No dependencies: built anywhere.
struct Stamp(u64);

#[transient_proto]
impl Stamp {
    fn new() -> Stamp {
        Stamp(NEXT.fetch_add(1, Ordering::SeqCst))
    }
}

#[context_proto]
struct Tracer {
    id: AtomicU64,
}

/// A context proto taking the transient by value twice: two tickets.
#[context_proto]
struct Booking {
    #[inject]
    first: Arc<Ticket>,
    #[inject]
    second: Arc<Ticket>,
}

#[singleton_proto]
struct Desk {
    #[inject]
    stamps: Provider<Stamp>,
    #[inject]
    tickets: Provider<Ticket>,
    #[inject]
    booking: ContextRef<Booking>,
}

#[tokio::test]
async fn a_transient_is_new_for_every_injection_and_every_get() {
    let app = App::builder().build().await.unwrap();
    let desk = app.get_object::<Desk>().unwrap();
    let (a, b) = (desk.stamps.get().unwrap(), desk.stamps.get().unwrap());
    assert_ne!(a.0, b.0);
    // Ticket takes a context object (even as an `Option`): it needs a scope, and the error
    // names that object.
    let e = desk.tickets.get().err().unwrap();
    assert!(matches!(e, DiError::NoScope { wanted: "transient_provider::Tracer" }), "{e}");
    let (first, second, tracer_shared) = app
        .run_in_context(async {
            let booking = desk.booking.get();
            let from_provider = desk.tickets.get().unwrap();
            let tracer = booking.first.tracer.clone().unwrap();
            tracer.id.store(7, Ordering::SeqCst);
            // Built in the scope, the transient takes the scope's context objects.
            let shared = Arc::ptr_eq(&tracer, from_provider.tracer.as_ref().unwrap());
            (booking.first.number, booking.second.number, shared)
        })
        .await;
    assert_ne!(first, second, "two injections, two objects");
    assert!(tracer_shared, "the scope's tracer, one per scope");
    // get_object and get_provider build a new one too.
    assert_ne!(app.get_object::<Stamp>().unwrap().0, app.get_object::<Stamp>().unwrap().0);
}

struct Eager {
    _ticket: Option<Arc<Ticket>>,
}

#[tokio::test]
async fn a_provider_waits_for_the_app_and_a_singleton_cannot_hold_a_transient() {
    // A singleton's factory using a provider while the App is being built.
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::transient::<u64>(|_| Ok(1)))
        .register(
            ProtoDef::singleton::<Eager>(|r| {
                let provider: Provider<u64> = r.provider(0)?;
                provider.get().map(|_| Eager { _ticket: None })
            })
            .dep(Dependency::new::<u64>(InjectKind::Provider, None)),
        )
        .build()
        .await
        .err()
        .unwrap();
    assert!(e.to_string().starts_with("`Provider<u64>` was used while its App is not built"), "{e}");

    // Registered by hand, the captive dependency is a build error.
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::transient::<u64>(|_| Ok(1)))
        .register(
            ProtoDef::singleton::<Eager>(|_| Ok(Eager { _ticket: None }))
                .dep(Dependency::new::<u64>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "singleton `transient_provider::Eager (\"eager\")` takes transient proto `u64` by value, which would keep one `u64` for the App's whole life; hold `Provider<u64>` and call `get()` for a new one each time"
    );
}

#[tokio::test]
async fn handles_of_the_wrong_kind_and_hooks_on_transients_are_refused() {
    let wrong = |dep: Dependency| {
        App::builder()
            .without_inventory()
            .register(ProtoDef::singleton::<u32>(|_| Ok(1)))
            .register(ProtoDef::transient::<u64>(|_| Ok(1)))
            .register(ProtoDef::singleton::<Eager>(|_| Ok(Eager { _ticket: None })).dep(dep))
            .build()
    };
    let e = wrong(Dependency::new::<u32>(InjectKind::Provider, None)).await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "`transient_provider::Eager (\"eager\")` holds `Provider<u32>`, but `u32` is a singleton proto; inject it as `Arc<u32>`"
    );
    let e = wrong(Dependency::new::<u64>(InjectKind::ContextRef, None)).await.err().unwrap();
    assert_eq!(
        e.to_string(),
        "`transient_provider::Eager (\"eager\")` holds `ContextRef<u64>`, but `u64` is a transient proto; hold `Provider<u64>` for a new one per call"
    );
    // A `Provider` of a trait that a transient provides.
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::transient::<u64>(|_| Ok(1)).provides::<u64, dyn std::fmt::Debug + Send + Sync>(|n| n))
        .register(ProtoDef::singleton::<Eager>(|_| Ok(Eager { _ticket: None })).dep(Dependency::new::<
            dyn std::fmt::Debug + Send + Sync,
        >(
            InjectKind::Provider, None
        )))
        .build()
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().ends_with("is a transient proto; a `Provider` names the proto's own type: hold `Provider<u64>`"),
        "{e}"
    );
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::transient::<u64>(|_| Ok(1)).on_destroy(|_: Arc<u64>| async { Ok(()) }))
        .build()
        .await
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "transient proto `u64 (\"u64\")` has a destroy hook, but the container does not keep transients, so it can neither await nor destroy them; make it a context proto (one per request), or do that work in its factory"
    );
    assert!(matches!(e, DiError::TransientHook { what: "a destroy hook", .. }));
}

struct Session;
struct Page {
    _session: Arc<Session>,
}
struct View {
    _page: Arc<Page>,
}

#[tokio::test]
async fn a_context_proto_built_from_a_transient_that_needs_async_context_awaits_it() {
    // View (context) takes Page (transient) by value, which takes Session (context, async
    // init): View needs get_async, and gets it.
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Session>(|_| Ok(Session)).on_init(|_: Arc<Session>| async {
            tokio::task::yield_now().await;
            Ok(())
        }))
        .register(
            ProtoDef::transient::<Page>(|r| Ok(Page { _session: r.arc(0)? }))
                .dep(Dependency::new::<Session>(InjectKind::Arc, None)),
        )
        .register(
            ProtoDef::context::<View>(|r| Ok(View { _page: r.arc(0)? }))
                .dep(Dependency::new::<Page>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .unwrap();
    app.run_in_context(async {
        assert!(matches!(app.get_object::<View>(), Err(DiError::AsyncInit { .. })));
        app.get_object_async::<View>().await.unwrap();
    })
    .await;
}
