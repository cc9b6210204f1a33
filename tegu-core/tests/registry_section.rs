//! Where the macros register protos: in a link section on Linux and Android,
//! through `inventory` elsewhere, found by `App::builder()` beside descriptors submitted to
//! `inventory` by hand; and a proto with nothing to declare but its factory takes
//! `Proto::DESCRIPTOR`'s default, under its type's name in lowerCamelCase.

use std::sync::Arc;

use tegu_core::registry::{AnyArc, ProtoDescriptor};
use tegu_core::{
    App, DiError, Proto, Resolver,
    registry::{Access, Dependency, InjectKind, Lifetime},
    singleton_proto,
};

/// Nothing to declare: the default descriptor.
#[singleton_proto]
struct PlainClock;

/// A dependency: a descriptor of its own.
#[singleton_proto]
struct Ticker {
    #[inject]
    clock: Arc<PlainClock>,
}

/// A name: a descriptor of its own.
#[singleton_proto(name = "wallClock")]
struct NamedClock;

/// A constructor with no parameter: the default descriptor too.
struct Counter(u32);

#[singleton_proto]
impl Counter {
    fn new() -> Self {
        Counter(7)
    }
}

/// Submitted to `inventory` by hand, which works on every target.
struct ByHand;

fn by_hand(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    r.arc::<PlainClock>(0)?;
    Ok(Arc::new(ByHand))
}

inventory::submit! {
    ProtoDescriptor::new::<ByHand>("byHand", Lifetime::Singleton, by_hand)
        .deps(const { &[Dependency::new::<PlainClock>(InjectKind::Arc, None)] })
}

#[tokio::test]
async fn the_macros_registrations_and_those_by_hand_are_found_together() {
    let app = App::builder().build().await.unwrap();
    // The four macro protos, the one by hand, and tegu-core's own: `EventBus`, and the lineage
    // types `Tenant`, `TraceContext` and `TraceState`.
    assert_eq!(app.proto_count(), 9);
    let clock = app.get_object_named::<PlainClock>("plainClock").unwrap();
    assert!(Arc::ptr_eq(&clock, &app.get_object::<Ticker>().unwrap().clock), "one singleton");
    assert!(app.get_object_named::<NamedClock>("wallClock").is_ok());
    assert_eq!(app.get_object_named::<Counter>("counter").unwrap().0, 7);
    assert!(app.get_object_named::<ByHand>("byHand").is_ok());
}

#[tokio::test]
async fn without_inventory_ignores_the_section_too() {
    let app = App::builder().without_inventory().build().await.unwrap();
    assert!(app.get_object::<PlainClock>().is_err());
    assert!(app.get_object::<ByHand>().is_err());
}

#[test]
fn a_default_descriptor_names_its_type_and_the_factory_the_macros_wrote() {
    let shown = format!("{:?}", PlainClock::descriptor());
    assert!(shown.contains("name: \"plainClock\"") && shown.contains("scope: Singleton"), "{shown}");
    assert!(shown.contains("registry_section::PlainClock"), "{shown}");
    let counter = format!("{:?}", Counter::descriptor());
    assert!(counter.contains("name: \"counter\""), "{counter}");
}

#[tokio::test]
async fn link_registers_a_default_descriptor_once() {
    let app = App::builder().without_inventory().link::<PlainClock>().link::<PlainClock>().build().await.unwrap();
    assert_eq!(app.proto_count(), 1);
    assert!(app.get_object_named::<PlainClock>("plainClock").is_ok());
    // And beside the section's own registration of the same proto.
    let app = App::builder().link::<PlainClock>().build().await.unwrap();
    assert_eq!(app.proto_count(), 9);
}

/// Private to another crate, by hand.
struct Ledger;
/// Public, with no `access(..)`: its crate is its type's, this test's.
struct Report;

fn ledger(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    Ok(Arc::new(Ledger))
}
fn report(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    r.arc::<Ledger>(0)?;
    Ok(Arc::new(Report))
}

impl Proto for Ledger {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Ledger>("ledger", Lifetime::Singleton, ledger)
        .access(Access::Private, "billing::ledger");
}
impl Proto for Report {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Report>("report", Lifetime::Singleton, report)
        .deps(const { &[Dependency::new::<Ledger>(InjectKind::Arc, None)] });
}

#[tokio::test]
async fn a_descriptor_without_access_belongs_to_its_types_crate() {
    let err = App::builder().without_inventory().link::<Ledger>().link::<Report>().build().await.unwrap_err();
    let DiError::Private { by_crate, owner_crate, .. } = &err else { panic!("{err}") };
    assert_eq!((by_crate.as_str(), owner_crate.as_str()), ("registry_section", "billing"), "{err}");
}

/// The path this build takes: the macros' protos in the link section on Linux and Android,
/// submitted to `inventory` elsewhere and under `--cfg tegu_inventory` (how `.ci/run` runs the
/// other platforms' path on Linux).
#[test]
fn the_macros_protos_take_this_builds_path() {
    let submitted = tegu_core::__private::inventory::iter::<ProtoDescriptor>
        .into_iter()
        .any(|d| format!("{d:?}").starts_with(r#"ProtoDescriptor { type: "registry_section::PlainClock""#));
    let section = cfg!(all(any(target_os = "linux", target_os = "android"), not(miri), not(tegu_inventory)));
    assert_eq!(submitted, !section, "submitted to inventory: {submitted}; link section expected: {section}");
}
