//! Generates the gRPC server and client of `proto/todos.proto` with the `protoc` that
//! `protoc-bin-vendored` ships: no system `protoc` needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure().build_server(true).build_client(true).compile_with_config(
        config,
        &["proto/todos.proto"],
        &["proto"],
    )?;
    // `compile_with_config` says nothing to cargo: without this, any change in the package
    // would run the script again.
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
