//! Generates the groups and controllers of the tegg benchmark (see `di_codegen::tegg`).

use di_codegen::tegg::{app, total_services};

fn main() {
    let total = total_services(std::env::var("TEGG_SERVICES").ok().as_deref(), &std::env::var("PROFILE").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("app.rs"), app(total)).expect("writing the app");
    println!("cargo::rerun-if-env-changed=TEGG_SERVICES");
    println!("cargo::rerun-if-changed=build.rs");
}
