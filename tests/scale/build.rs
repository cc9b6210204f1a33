//! Generates 1000 annotated services and a consumer that injects all of them.

use tegu_codegen::{Spec, Style, module};

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = module(Spec { services: 1000, consumer: true, style: Style::Macro });
    std::fs::write(out.join("services.rs"), src).expect("writing the generated services");
    println!("cargo::rerun-if-changed=build.rs");
}
