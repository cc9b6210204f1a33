//! A connection's socket as the server tracks it: it says when it is dropped (so that an
//! upgraded connection, whose socket hyper handed to a WebSocket task, stays counted until that
//! task lets go of it), and it can be cut (reads and writes fail from then on, pending ones are
//! woken), so that a shutdown can end an upgraded connection at its deadline.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// What a connection's task and its socket share.
#[derive(Default)]
pub(crate) struct Tracker {
    cut: AtomicBool,
    reader: AtomicWaker,
    writer: AtomicWaker,
    dropped: AtomicBool,
    gone: Notify,
    /// A request has come on the connection.
    requested: AtomicBool,
}

impl Tracker {
    /// Makes every read and write of the socket fail from now on, waking those pending.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.reader.wake();
        self.writer.wake();
    }

    /// Notes that a request has come on the connection.
    pub(crate) fn requested(&self) {
        if !self.requested.load(Ordering::Relaxed) {
            self.requested.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a request has come on the connection.
    pub(crate) fn was_requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// Whether the socket still exists (after hyper is done with a connection: it was upgraded).
    pub(crate) fn alive(&self) -> bool {
        !self.dropped.load(Ordering::Acquire)
    }

    /// Waits until the socket is dropped.
    pub(crate) async fn gone(&self) {
        while self.alive() {
            self.gone.notified().await;
        }
    }

    fn check(&self) -> io::Result<()> {
        if self.cut.load(Ordering::Acquire) {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server cut the connection at its shutdown deadline",
            ))
        } else {
            Ok(())
        }
    }
}

/// A socket that reports to its [`Tracker`].
pub(crate) struct TrackedStream {
    inner: TcpStream,
    tracker: Arc<Tracker>,
}

impl TrackedStream {
    pub(crate) fn new(inner: TcpStream, tracker: Arc<Tracker>) -> Self {
        TrackedStream { inner, tracker }
    }

    /// Polls `op` on the socket unless it was cut; a pending `op` registers `waker` so that a cut
    /// wakes it.
    fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        waker: fn(&Tracker) -> &AtomicWaker,
        op: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        self.tracker.check()?;
        match op(Pin::new(&mut self.inner), cx) {
            Poll::Pending => {
                waker(&self.tracker).register(cx.waker());
                // A cut between the check above and the registration is not missed.
                self.tracker.check()?;
                Poll::Pending
            }
            ready => ready,
        }
    }
}

impl Drop for TrackedStream {
    fn drop(&mut self) {
        self.tracker.dropped.store(true, Ordering::Release);
        self.tracker.gone.notify_one();
    }
}

impl AsyncRead for TrackedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll(cx, |t| &t.reader, |io, cx| io.poll_read(cx, buf))
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll(cx, |t| &t.writer, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll(cx, |t| &t.writer, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll(cx, |t| &t.writer, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Shutting down a cut socket is not an error: it is what the cut was for.
        if self.tracker.cut.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        self.get_mut().poll(cx, |t| &t.writer, |io, cx| io.poll_shutdown(cx))
    }
}
