//! What the workspace's tests share, in one place (a dev-dependency of di-core, di-http, the
//! examples and the integration tests; the benchmarks install its allocator):
//!
//! - [`http_client`]: a raw HTTP/1.1 client over a real socket, so that a test sees exactly
//!   what went over the wire, hang-ups mid-request included;
//! - [`alloc`]: the one counting global allocator, process-wide or per thread;
//! - [`child_env`]: running a test again in a child process with environment variables set.

pub mod alloc;
pub mod child_env;
pub mod http_client;
