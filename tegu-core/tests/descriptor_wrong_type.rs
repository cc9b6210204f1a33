//! A hand-written descriptor whose factory returns another type than its proto's: refused with
//! a panic naming the proto where the factory returns (a panic of the caller, as any factory's:
//! the process goes on), never read by a consumer's generated `take` as a type it is not.

use std::sync::Arc;

use tegu_core::registry::{AnyArc, ProtoDescriptor};
use tegu_core::{
    App, DiError, ProtoDef, Resolver,
    registry::{Dependency, InjectKind, Lifetime},
};

struct Liar;
struct Other;
struct Consumer;

fn liar(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    Ok(Arc::new(Other))
}

inventory::submit! {
    ProtoDescriptor::new::<Liar>("liar", Lifetime::Singleton, liar)
}

/// What the macros generate for `#[inject] liar: Arc<Liar>`.
fn consumer() -> ProtoDef {
    ProtoDef::singleton::<Consumer>(|r| {
        let mut objs = [tegu_core::__private::Own::EMPTY];
        tegu_core::__private::fill(r, &[0], &mut objs)?;
        let _liar: Arc<Liar> = objs[0].take::<Liar>();
        Ok(Consumer)
    })
    .dep(Dependency::new::<Liar>(InjectKind::Arc, None))
}

#[tokio::test]
async fn a_factory_returning_another_type_is_refused_by_name() {
    let built = tokio::spawn(App::builder().register(consumer()).build()).await;
    let panic = match built {
        Err(e) if e.is_panic() => e.into_panic(),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the build should have panicked"),
    };
    let msg = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(msg.contains("the factory of `descriptor_wrong_type::Liar` returned an object of another type"), "{msg}");
    // Refused without a consumer too: where the factory returns.
    let alone = tokio::spawn(App::builder().build()).await;
    assert!(matches!(alone, Err(e) if e.is_panic()), "the liar alone is refused at build");
    // The process goes on: an App without the liar builds.
    App::builder().without_inventory().build().await.expect("an App without the liar builds");
}
