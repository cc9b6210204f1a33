//! A broken graph as `miette` renders it (tegu-core's feature `miette`): what
//! `fn main() -> miette::Result<()>` prints, with the lines of the field and the proto.

#![allow(missing_docs, missing_debug_implementations)]

#[path = "diagnostic/broken.rs"]
mod broken;

#[tokio::test]
async fn the_rendering_shows_the_field_and_the_proto_in_their_source() {
    let error = broken::error().await;
    let expected = r#"tegu::graph

  × `diagnostic::broken::Signup ("signup")` injects `dyn diagnostic::broken::Notifier`, but no
  │ proto provides it; declare a provider: `#[singleton_proto(provides(dyn Notifier))]` on a type
  │ that implements `Notifier` (or `ProtoDef::provides::<ThatType, dyn Notifier>(|it| it)` for one
  │ registered by hand); if that proto is in a crate the program never names, the linker may have
  │ dropped it: name it with `App::builder().link::<ThatProto>()`
    ╭─[tests/tests/diagnostic/broken.rs:14:12]
 13 │ #[singleton_proto]
 14 │ pub struct Signup {
    ·            ┬
    ·            ╰── diagnostic::broken::Signup ("signup") is declared here
 15 │     #[inject]
 16 │     notifier: Arc<dyn Notifier>,
    ·                   ┬
    ·                   ╰── `notifier` of diagnostic::broken::Signup ("signup")
 17 │ }
    ╰────"#;
    let rendered = broken::render(&error, 100);
    assert_eq!(rendered, expected, "\n{rendered}");
}
