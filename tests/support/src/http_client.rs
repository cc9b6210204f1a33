//! A raw HTTP/1.1 client for tests over a real socket: one request per connection
//! (`connection: close`), the reply read to the end. No client library, so a test sees exactly
//! what went over the wire.

use std::collections::HashMap;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A parsed reply.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: HashMap<String, String>,
    /// The body, as text.
    pub body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response head in {text:?}"));
        let mut lines = head.lines();
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Reply { status, headers, body: body.to_owned() }
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The chunks of a `transfer-encoding: chunked` body, in order, and whether the body ended
    /// with its last (empty) chunk: `false` for a response cut short. `None` if the body is not
    /// chunked.
    pub fn chunks(&self) -> Option<(Vec<String>, bool)> {
        if self.header("transfer-encoding") != Some("chunked") {
            return None;
        }
        let mut chunks = Vec::new();
        let mut rest = self.body.as_str();
        while let Some((size, after)) = rest.split_once("\r\n") {
            let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
            if size == 0 {
                return Some((chunks, true));
            }
            let Some(chunk) = after.get(..size) else { break };
            chunks.push(chunk.to_owned());
            rest = after.get(size + 2..).unwrap_or_default();
        }
        Some((chunks, false))
    }
}

/// Sends one request on its own connection and reads the whole reply.
pub async fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server may answer (413) before reading the whole body, and close.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    Reply::parse(&raw)
}

/// Sends a JSON body.
pub async fn send_json(addr: SocketAddr, method: &str, path: &str, json: &str) -> Reply {
    send(addr, method, path, &[("content-type", "application/json")], json.as_bytes()).await
}
