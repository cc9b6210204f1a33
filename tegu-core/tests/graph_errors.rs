//! The catalogue of bad graphs: each is rejected by `build()` with its own variant and a message
//! that names the types and object names involved.

use std::sync::Arc;

use tegu_core::{
    App, DiError, ProtoDef,
    registry::{Dependency, InjectKind},
};

#[derive(Default)]
struct A;
#[derive(Default)]
struct B;
#[derive(Default)]
struct C;
#[derive(Default)]
struct Tracer;
trait Store: Send + Sync {}
struct Pg;
impl Store for Pg {}
struct Mem;
impl Store for Mem {}

fn dep<T: ?Sized + 'static>(kind: InjectKind) -> Dependency {
    Dependency::new::<T>(kind, None)
}

fn unit<T: Default + Send + Sync + 'static>() -> ProtoDef {
    ProtoDef::singleton::<T>(|_| Ok(T::default()))
}

async fn build(defs: Vec<ProtoDef>) -> DiError {
    match App::builder().without_inventory().register_all(defs).build().await {
        Ok(_) => panic!("the graph should have been rejected"),
        Err(e) => e,
    }
}

async fn build_ok(defs: Vec<ProtoDef>) -> App {
    match App::builder().without_inventory().register_all(defs).build().await {
        Ok(app) => app,
        Err(e) => panic!("the graph should have built: {e}"),
    }
}

fn stores() -> Vec<ProtoDef> {
    vec![
        ProtoDef::singleton::<Pg>(|_| Ok(Pg)).name("pg").provides::<Pg, dyn Store>(|s| s),
        ProtoDef::singleton::<Mem>(|_| Ok(Mem)).name("mem").provides::<Mem, dyn Store>(|s| s),
    ]
}

#[tokio::test]
async fn missing_dependency_names_the_wanted_type_and_who_asked() {
    let err = build(vec![unit::<A>().dep(dep::<B>(InjectKind::Arc))]).await;
    assert!(matches!(err, DiError::Missing { wanted, .. } if wanted.ends_with("::B")), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("graph_errors::A (\"a\")` injects `graph_errors::B`"), "{msg}");
    assert!(msg.contains("no proto provides it"), "{msg}");
}

#[tokio::test]
async fn cycle_lists_the_whole_path() {
    let err = build(vec![
        unit::<A>().dep(dep::<B>(InjectKind::Arc)),
        unit::<B>().dep(dep::<C>(InjectKind::Arc)),
        unit::<C>().dep(dep::<A>(InjectKind::Arc)),
    ])
    .await;
    let DiError::Cycle { chain, .. } = &err else { panic!("{err:?}") };
    assert_eq!(chain.len(), 4, "{chain:?}");
    assert_eq!(chain.first(), chain.last());
    let msg = err.to_string();
    assert!(
        msg.contains(
            "graph_errors::A (\"a\") -> graph_errors::B (\"b\") -> graph_errors::C (\"c\") -> graph_errors::A (\"a\")"
        ),
        "{msg}"
    );
}

#[tokio::test]
async fn self_dependency_is_a_cycle() {
    let err = build(vec![unit::<A>().dep(dep::<A>(InjectKind::Arc))]).await;
    assert!(matches!(&err, DiError::Cycle { chain, .. } if chain.len() == 2), "{err:?}");
}

#[tokio::test]
async fn cycle_through_an_optional_dependency_is_still_a_cycle() {
    let err =
        build(vec![unit::<A>().dep(dep::<B>(InjectKind::Optional)), unit::<B>().dep(dep::<A>(InjectKind::Arc))]).await;
    assert!(matches!(err, DiError::Cycle { .. }), "{err:?}");
}

#[tokio::test]
async fn context_ref_breaks_a_cycle() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer)).dep(dep::<A>(InjectKind::Arc)))
        .register(unit::<A>().dep(dep::<Tracer>(InjectKind::ContextRef)))
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}

#[tokio::test]
async fn two_providers_without_qualifier_are_ambiguous() {
    let mut defs = stores();
    defs.push(unit::<A>().dep(dep::<dyn Store>(InjectKind::Arc)));
    let err = build(defs).await;
    let DiError::Ambiguous { candidates, .. } = &err else { panic!("{err:?}") };
    assert_eq!(candidates.len(), 2);
    let msg = err.to_string();
    assert!(msg.contains("injects `dyn graph_errors::Store`, which 2 protos provide"), "{msg}");
    assert!(msg.contains("graph_errors::Mem (\"mem\")") && msg.contains("graph_errors::Pg (\"pg\")"), "{msg}");
    assert!(msg.contains("qualifier"), "{msg}");
}

#[tokio::test]
async fn qualifier_picks_one_of_several_providers() {
    let app = App::builder()
        .without_inventory()
        .register_all(stores())
        .register(unit::<A>().dep(Dependency::new::<dyn Store>(InjectKind::Arc, Some("pg"))))
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}

#[tokio::test]
async fn unknown_qualifier_lists_the_available_names() {
    let mut defs = stores();
    defs.push(unit::<A>().dep(Dependency::new::<dyn Store>(InjectKind::Arc, Some("mysql"))));
    let err = build(defs).await;
    let DiError::UnknownQualifier { qualifier, available, .. } = &err else { panic!("{err:?}") };
    assert_eq!(qualifier, "mysql");
    assert_eq!(available, &["\"mem\"", "\"pg\""]);
    assert!(err.to_string().contains("named \"mysql\", but no provider has that name"), "{err}");
}

#[tokio::test]
async fn duplicate_type_and_name_is_rejected() {
    let err = build(vec![unit::<A>(), unit::<A>()]).await;
    assert!(matches!(&err, DiError::Duplicate { name, .. } if name == "a"), "{err:?}");
    assert!(err.to_string().contains("are both named \"a\""), "{err}");
}

#[tokio::test]
async fn one_type_under_two_names_is_fine() {
    let app = App::builder()
        .without_inventory()
        .register(unit::<A>().name("one"))
        .register(unit::<A>().name("two"))
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}

#[tokio::test]
async fn singleton_taking_context_object_by_value_suggests_context_ref() {
    let err =
        build(vec![ProtoDef::context::<Tracer>(|_| Ok(Tracer)), unit::<A>().dep(dep::<Tracer>(InjectKind::Arc))]).await;
    assert!(matches!(err, DiError::ContextByValue { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("singleton `graph_errors::A (\"a\")` takes context proto `graph_errors::Tracer` by value; use `ContextRef<graph_errors::Tracer>`"),
        "{msg}"
    );
}

#[tokio::test]
async fn singleton_collecting_a_context_provider_is_rejected() {
    let err = build(vec![
        ProtoDef::context::<Pg>(|_| Ok(Pg)).provides::<Pg, dyn Store>(|s| s),
        unit::<A>().dep(dep::<dyn Store>(InjectKind::All)),
    ])
    .await;
    assert!(matches!(err, DiError::ContextByValue { .. }), "{err:?}");
}

#[tokio::test]
async fn context_ref_to_a_singleton_suggests_arc() {
    let err = build(vec![unit::<B>(), unit::<A>().dep(dep::<B>(InjectKind::ContextRef))]).await;
    assert!(matches!(err, DiError::ContextRefToSingleton { .. }), "{err:?}");
    assert!(err.to_string().contains("inject it as `Arc<graph_errors::B>`"), "{err}");
}

#[tokio::test]
async fn a_context_ref_called_with_get_to_an_async_context_proto_fails_the_build() {
    // Through a trait, so that no compile-time check could see it; async because of an init
    // hook of what it takes by value.
    let err = build(vec![
        ProtoDef::context::<B>(|_| Ok(B)).on_init(|_: Arc<B>| async { Ok(()) }),
        ProtoDef::context::<Pg>(|r| {
            r.arc::<B>(0)?;
            Ok(Pg)
        })
        .dep(dep::<B>(InjectKind::Arc))
        .provides::<Pg, dyn Store>(|s| s),
        unit::<A>().dep(Dependency::new::<dyn Store>(InjectKind::ContextRef, None).sync_only()),
    ])
    .await;
    assert!(matches!(err, DiError::ContextRefToAsync { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "`graph_errors::A (\"a\")` holds `ContextRef<dyn graph_errors::Store>`, but `graph_errors::Pg` is built asynchronously (an async constructor or init hook, its own or a by-value dependency's), so `get()` could not return it; hold `AsyncContextRef<dyn graph_errors::Store>` and call `get_async().await`"
    );
    // Without `sync_only` (a hand-written holder that calls `get_async`), it builds.
    build_ok(vec![
        ProtoDef::context::<B>(|_| Ok(B)).on_init(|_: Arc<B>| async { Ok(()) }),
        ProtoDef::context::<Pg>(|_| Ok(Pg)).dep(dep::<B>(InjectKind::Arc)).provides::<Pg, dyn Store>(|s| s),
        unit::<A>().dep(dep::<dyn Store>(InjectKind::ContextRef)),
    ])
    .await;
}

#[tokio::test]
async fn private_proto_from_another_crate_is_rejected() {
    let err =
        build(vec![unit::<B>().private_to("billing"), unit::<A>().in_crate("web").dep(dep::<B>(InjectKind::Arc))])
            .await;
    assert!(
        matches!(&err, DiError::Private { owner_crate, by_crate, .. } if owner_crate == "billing" && by_crate == "web")
    );
    assert!(err.to_string().contains("private to crate `billing`"), "{err}");
}

#[tokio::test]
async fn private_proto_from_its_own_crate_is_fine() {
    let app = App::builder()
        .without_inventory()
        .register(unit::<B>().private_to("billing"))
        .register(unit::<A>().in_crate("billing").dep(dep::<B>(InjectKind::Arc)))
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}

#[tokio::test]
async fn several_errors_are_reported_together() {
    let err =
        build(vec![unit::<A>().dep(dep::<B>(InjectKind::Arc)), unit::<C>().dep(dep::<Tracer>(InjectKind::Arc))]).await;
    let DiError::Multiple(errors) = &err else { panic!("{err:?}") };
    assert_eq!(errors.len(), 2);
    assert!(err.to_string().starts_with("2 errors in the object graph:"), "{err}");
}

#[tokio::test]
async fn override_of_an_unknown_type_is_rejected() {
    let err = App::builder().without_inventory().override_with(A).build().await.unwrap_err();
    assert!(matches!(err, DiError::OverrideUnknown { .. }), "{err:?}");
}

#[tokio::test]
async fn factory_asking_for_an_undeclared_dependency_is_explained() {
    let err = App::builder()
        .without_inventory()
        .register(unit::<B>())
        .register(
            ProtoDef::singleton::<A>(|r| {
                let _b: Arc<B> = r.arc(1)?; // only dependency #0 exists
                Ok(A)
            })
            .dep(dep::<B>(InjectKind::Arc)),
        )
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, DiError::Undeclared { index: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("declared as nothing"), "{err}");
}

#[tokio::test]
async fn a_generated_fill_of_a_dependency_that_is_no_arc_is_explained() {
    // What the macros' `fill` checks of each field (one entry of the graph per dependency):
    // dependency #1 exists but is a `ContextRef`, and #2 does not exist.
    for (index, declared) in [(1, "ContextRef"), (2, "nothing")] {
        let err = App::builder()
            .without_inventory()
            .register(unit::<B>())
            .register(ProtoDef::context::<C>(|_| Ok(C)))
            .register(
                ProtoDef::singleton::<A>(move |r| {
                    let mut objs = [tegu_core::__private::Own::EMPTY, tegu_core::__private::Own::EMPTY];
                    tegu_core::__private::fill(r, &[0, index], &mut objs)?;
                    Ok(A)
                })
                .dep(dep::<B>(InjectKind::Arc))
                .dep(dep::<C>(InjectKind::ContextRef)),
            )
            .build()
            .await
            .unwrap_err();
        assert!(matches!(err, DiError::Undeclared { index: i, .. } if i == index), "{err:?}");
        assert!(err.to_string().contains(declared), "{err}");
    }
}

#[tokio::test]
async fn factory_asking_with_the_wrong_type_is_explained() {
    let err = App::builder()
        .without_inventory()
        .register(unit::<B>())
        .register(unit::<C>())
        .register(
            ProtoDef::singleton::<A>(|r| {
                let _c: Arc<C> = r.arc(0)?;
                Ok(A)
            })
            .dep(dep::<B>(InjectKind::Arc)),
        )
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("declared as `Arc<graph_errors::B>`"), "{err}");
}

#[tokio::test]
async fn optional_dependency_may_be_absent() {
    let app = App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<A>(|r| {
                assert!(r.optional::<B>(0)?.is_none());
                Ok(A)
            })
            .dep(dep::<B>(InjectKind::Optional)),
        )
        .build()
        .await;
    assert!(app.is_ok(), "{:?}", app.err());
}
