//! A broken graph as `miette` renders it (tegu-core's feature `miette`): what
//! `fn main() -> miette::Result<()>` prints, with the lines of the field and the proto.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme};
use tegu_core::{App, DiError, singleton_proto};

pub trait Notifier: Send + Sync {}

#[singleton_proto]
pub struct Signup {
    #[inject]
    notifier: Arc<dyn Notifier>,
}

impl Signup {
    /// Uses the field, so that it is not dead code.
    pub fn notifier(&self) -> &dyn Notifier {
        &*self.notifier
    }
}

async fn broken() -> DiError {
    App::builder().without_inventory().link::<Signup>().build().await.expect_err("nothing provides `dyn Notifier`")
}

fn render(error: &DiError) -> String {
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
    handler.render_report(&mut out, error).expect("renders");
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn the_rendering_shows_the_field_and_the_proto_in_their_source() {
    let error = broken().await;
    let expected = r#"tegu::graph

  × `diagnostic::Signup ("signup")` injects `dyn diagnostic::Notifier`, but no proto provides it;
  │ declare a provider: `#[singleton_proto(provides(dyn Notifier))]` on a type that implements
  │ `Notifier` (or `ProtoDef::provides::<ThatType, dyn Notifier>(|it| it)` for one registered by
  │ hand); if that proto is in a crate the program never names, the linker may have dropped it:
  │ name it with `App::builder().link::<ThatProto>()`
    ╭─[tests/tests/diagnostic.rs:14:12]
 13 │ #[singleton_proto]
 14 │ pub struct Signup {
    ·            ┬
    ·            ╰── diagnostic::Signup ("signup") is declared here
 15 │     #[inject]
 16 │     notifier: Arc<dyn Notifier>,
    ·                   ┬
    ·                   ╰── `notifier` of diagnostic::Signup ("signup")
 17 │ }
    ╰────"#;
    let rendered = render(&error);
    assert_eq!(rendered, expected, "\n{rendered}");
}
