//! The compile errors users see, checked against the `.stderr` files next to each case.
//! Regenerate after a deliberate change with `TRYBUILD=overwrite cargo test -p tegu-macros --test ui`,
//! and review the diff: it is the user experience.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/fail/*.rs");
    t.pass("tests/ui/*/pass/*.rs");
}
