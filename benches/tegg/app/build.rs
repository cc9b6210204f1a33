//! Generates the size of this build of the tegg benchmark (see `tegu_codegen::tegg`).

use tegu_codegen::tegg::{base, total_services};

fn main() {
    let total = total_services(std::env::var("TEGG_SERVICES").ok().as_deref(), &std::env::var("PROFILE").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("base.rs"), base(total)).expect("writing the size of the build");
    println!("cargo::rerun-if-env-changed=TEGG_SERVICES");
    println!("cargo::rerun-if-changed=build.rs");
}
