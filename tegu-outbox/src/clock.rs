//! The outbox's clock: milliseconds since the Unix epoch, as the store keeps its times.

/// Now, in milliseconds since the Unix epoch: the store's times.
pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
