//! What `build()` and `check()` refuse about crosscuts, naming the crosscut: one that selects
//! no method, one whose advice the App lacks, and one that selects by trait a proto none of
//! whose methods can be advised. (A binary of its own: its crosscuts break every App in it.)

#![allow(missing_docs, missing_debug_implementations)]

use tegu_core::{
    App, DiError,
    advice::{Advice, Call, Next},
    crosscut, intercept, singleton_proto,
};

#[singleton_proto]
pub struct Noop;

impl<R> Advice<R> for Noop {
    async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

pub trait Flagged: Send + Sync {}

/// Provides the marker, but its impl block is not marked `#[intercept]`.
#[singleton_proto(provides(dyn Flagged))]
pub struct Plain;
impl Flagged for Plain {}
impl Plain {
    pub async fn work(&self) {}
}

#[singleton_proto]
pub struct Joined;

#[intercept]
impl Joined {
    pub async fn run(&self) {}
}

crosscut!(Noop, methods = "no_such_*");
crosscut!(Noop, implements = dyn Flagged);
crosscut!(Noop, types = "Joined");
// By trait within a module: `Plain`, outside it, is none of its business.
crosscut!(Noop, implements = dyn Flagged, module = "crate::inner");

pub mod inner {
    use super::*;

    #[singleton_proto(provides(dyn Flagged))]
    pub struct Marked;
    impl Flagged for Marked {}

    #[intercept]
    impl Marked {
        pub async fn work(&self) {}
    }
}

fn errors(error: DiError) -> Vec<String> {
    match error {
        DiError::Multiple(all) => all.iter().map(ToString::to_string).collect(),
        one => vec![one.to_string()],
    }
}

#[tokio::test]
async fn build_and_check_name_each_broken_crosscut() {
    for error in [App::builder().build().await.map(|_| ()).unwrap_err(), App::builder().check().unwrap_err()] {
        let errors = errors(error);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors.contains(
                &"the crosscut of `Noop` (tegu-core/tests/advice_crosscut_errors.rs:40) selects no method: no `pub async \
                 fn` of an impl block marked `#[intercept]` matches methods = \"no_such_*\""
                    .to_owned()
            ),
            "{errors:#?}"
        );
        assert!(
            errors.contains(
                &"`advice_crosscut_errors::Plain (\"plain\")` is selected by the crosscut of `Noop` (implements = dyn \
                 Flagged, tegu-core/tests/advice_crosscut_errors.rs:41), but none of its methods can be advised; mark \
                 its impl block `#[intercept]`, and declare the proto with its attribute (crosscuts do not see a \
                 proto registered by hand)"
                    .to_owned()
            ),
            "{errors:#?}"
        );
    }
}

#[tokio::test]
async fn an_excluded_advice_of_a_crosscut_is_named_with_a_method_it_advises() {
    let error = App::builder().exclude::<Noop>().check().unwrap_err();
    let errors = errors(error);
    assert!(
        errors.iter().any(|e| e.starts_with("method `run` of module `advice_crosscut_errors::Joined`")
            && e.contains("crosscut at tegu-core/tests/advice_crosscut_errors.rs:42")
            && e.contains("is intercepted by `Noop`, but")),
        "{errors:#?}"
    );
}
