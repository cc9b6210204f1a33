//! Run with: cargo run -p example-testing
//!
//! Serves the greeting service on 127.0.0.1:7002 until Ctrl-C:
//! `curl -H 'x-user: ada' http://127.0.0.1:7002/greet/bob` answers `good morning, bob, from ada`
//! (or afternoon, or evening, by the UTC clock). The point of this example is its tests,
//! `cargo test -p example-testing` (`tests/seams.rs`): they stop the clock, change the
//! phrasebook, open scopes with a given user or request head, and send requests through the
//! router without a socket.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = greeter::app().await?;
    let addr = greeter::ADDR;
    println!("greeter on http://{addr}; try:\n  curl -H 'x-user: ada' http://{addr}/greet/bob");
    tegu_http::serve(app, addr).await?;
    Ok(())
}
