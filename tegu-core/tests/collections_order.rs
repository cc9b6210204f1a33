//! The order of a collection of providers (`Vec<Arc<dyn Trait>>`): by each proto's `order`,
//! lower first, then by object name; the same through the attribute and by hand.

use std::sync::Arc;

use tegu_core::{
    App, ProtoDef,
    registry::{Dependency, InjectKind},
    singleton_proto,
};

/// A step of a pipeline, which takes every step in order.
pub trait Step: Send + Sync {
    /// Which step this is.
    fn name(&self) -> &'static str;
}

macro_rules! step {
    ($ty:ident, $name:literal $(, $($opt:tt)*)?) => {
        /// A step.
        #[singleton_proto(provides(dyn Step) $(, $($opt)*)?)]
        #[derive(Debug)]
        pub struct $ty;
        impl Step for $ty {
            fn name(&self) -> &'static str {
                $name
            }
        }
    };
}

step!(Audit, "audit", order = -10);
step!(Billing, "billing");
step!(Compress, "compress", order = 5);
step!(Decode, "decode", order = -10);
step!(Encrypt, "encrypt");

/// Every step, in order.
#[singleton_proto]
#[allow(missing_debug_implementations)]
pub struct Pipeline {
    #[inject]
    steps: Vec<Arc<dyn Step>>,
}

fn names(steps: &[Arc<dyn Step>]) -> Vec<&'static str> {
    steps.iter().map(|s| s.name()).collect()
}

#[tokio::test]
async fn the_attributes_order_comes_first_then_the_object_name() {
    let app = App::builder().build().await.unwrap();
    let pipeline = app.get_object::<Pipeline>().unwrap();
    // -10 (audit, decode by name), then 0 (billing, encrypt by name), then 5.
    assert_eq!(names(&pipeline.steps), ["audit", "decode", "billing", "encrypt", "compress"]);
}

struct Named(&'static str);
impl Step for Named {
    fn name(&self) -> &'static str {
        self.0
    }
}
struct Hand(Vec<Arc<dyn Step>>);

fn by_hand(steps: &[(&'static str, Option<i32>)]) -> Vec<ProtoDef> {
    let mut defs: Vec<ProtoDef> = steps
        .iter()
        .map(|&(name, order)| {
            let def =
                ProtoDef::singleton::<Named>(move |_| Ok(Named(name))).name(name).provides::<Named, dyn Step>(|s| s);
            match order {
                Some(order) => def.order(order),
                None => def,
            }
        })
        .collect();
    defs.push(
        ProtoDef::singleton::<Hand>(|r| Ok(Hand(r.all(0)?))).dep(Dependency::new::<dyn Step>(InjectKind::All, None)),
    );
    defs
}

#[tokio::test]
async fn by_hand_the_order_is_the_same_whatever_the_registration_order() {
    let steps = [("z", Some(i32::MIN)), ("m", None), ("a", Some(i32::MAX)), ("b", Some(1)), ("c", Some(1))];
    let expected = ["z", "m", "b", "c", "a"];
    for reversed in [false, true] {
        let mut defs = by_hand(&steps);
        if reversed {
            defs.reverse();
        }
        let app = App::builder().without_inventory().register_all(defs).build().await.unwrap();
        assert_eq!(names(&app.get_object::<Hand>().unwrap().0), expected, "reversed: {reversed}");
    }
    // Without any order, by name: the order is what changes it.
    let app = App::builder()
        .without_inventory()
        .register_all(by_hand(&[("z", None), ("m", None), ("a", None)]))
        .build()
        .await
        .unwrap();
    assert_eq!(names(&app.get_object::<Hand>().unwrap().0), ["a", "m", "z"]);
}
