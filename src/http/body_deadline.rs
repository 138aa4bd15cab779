//! One deadline for a whole request body (`gateway.body_timeout_seconds`), counted from the
//! moment its headers arrived.
//!
//! tower-http's `RequestBodyTimeoutLayer` restarts its timer at every chunk, so a client
//! trickling one byte every few seconds would hold a connection (and a handler) for as long as
//! it likes; a fixed deadline bounds that. A body that misses it ends in an error naming the key,
//! which the handler's extractor turns into a 400, and the connection is closed.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::Stream;
use tokio::time::Sleep;

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {0} s (gateway.body_timeout_seconds); send it \
     faster, or raise that key"
)]
pub(super) struct TooSlow(u64);

/// Put the deadline on the request's body, if it has one.
pub(super) async fn limit(
    State(timeout): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let request = request.map(|body| {
        Body::from_stream(Deadline {
            body: body.into_data_stream(),
            sleep: Box::pin(tokio::time::sleep(timeout)),
            seconds: timeout.as_secs(),
        })
    });
    next.run(request).await
}

/// A body's chunks until the deadline, then an error.
struct Deadline {
    body: BodyDataStream,
    sleep: Pin<Box<Sleep>>,
    seconds: u64,
}

impl Stream for Deadline {
    type Item = Result<Bytes, axum::BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Poll::Ready(chunk) = Pin::new(&mut self.body).poll_next(cx) {
            return Poll::Ready(chunk.map(|c| c.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(TooSlow(self.seconds).into()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A client that keeps sending (one byte every 50 ms) still meets the deadline: the timer
    /// is not restarted by each chunk.
    #[tokio::test]
    async fn a_trickling_body_fails_at_the_deadline() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
        let deadline = Duration::from_millis(300);
        let mut stream = Deadline {
            body: body.into_data_stream(),
            sleep: Box::pin(tokio::time::sleep(deadline)),
            seconds: 0,
        };
        tokio::spawn(async move {
            while tx.send(Ok(Bytes::from_static(b"x"))).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let started = Instant::now();
        let mut got = 0;
        let err = loop {
            match futures::StreamExt::next(&mut stream).await {
                Some(Ok(_)) => got += 1,
                Some(Err(err)) => break err,
                None => panic!("the body ended"),
            }
        };
        assert!(started.elapsed() >= deadline, "{:?}", started.elapsed());
        assert!(got >= 2, "{got} chunks before the deadline");
        assert!(
            err.to_string().contains("gateway.body_timeout_seconds"),
            "{err}"
        );
    }
}
