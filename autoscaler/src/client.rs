//! The API client, as client-go behaves: an answer of 429, or of 5xx, that
//! carries a `Retry-After` header is retried after that many seconds, up to
//! [`MAX_RETRIES`] times (client-go's `checkWait` and `maxRetries`). Any
//! other answer, a 500 without the header or a PDB's 429 on an eviction
//! among them, goes to the caller at once, whose own pace (backoff, the next
//! loop) decides. kube's default retry layer is off in the binary's client
//! set-up: it retries every 429 on its own backoff. The in-process entry
//! points ([`crate::inprocess`]) wrap the client they are given too.
//!
//! Waits are tokio sleeps, so under the testbed's paused clock they are
//! virtual seconds.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;

/// client-go's `maxRetries` for a request.
pub const MAX_RETRIES: u32 = 10;

/// `client`, retrying what the server asks to be retried.
pub fn honoring_retry_after(client: Client) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        async move { send(&client, request).await }
    });
    Client::new(service, namespace)
}

async fn send(client: &Client, request: Request<Body>) -> Result<Response<Body>, kube::Error> {
    let (parts, body) = request.into_parts();
    let Some(retry_body) = body.try_clone() else {
        // A streamed body cannot be sent twice.
        return client.send(Request::from_parts(parts, body)).await;
    };
    let mut retries = 0;
    loop {
        let mut attempt = Request::builder()
            .method(parts.method.clone())
            .uri(parts.uri.clone())
            .version(parts.version);
        if let Some(headers) = attempt.headers_mut() {
            headers.clone_from(&parts.headers);
        }
        let body = retry_body.try_clone().unwrap_or_else(Body::empty);
        let attempt = attempt
            .body(body)
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        let response = client.send(attempt).await?;
        match retry_after(&response) {
            Some(wait) if retries < MAX_RETRIES => {
                retries += 1;
                tracing::debug!(
                    "{} {}: {} with Retry-After {}s, retry {retries}",
                    parts.method,
                    parts.uri.path(),
                    response.status(),
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
            }
            _ => return Ok(response),
        }
    }
}

/// The wait a 429 or 5xx answer asks for (client-go: the header's seconds,
/// at least 1).
fn retry_after(response: &Response<Body>) -> Option<Duration> {
    let status = response.status();
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let value = response.headers().get(http::header::RETRY_AFTER)?;
    let seconds = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> Response<Body> {
        let mut r = Response::builder().status(status);
        if let Some(v) = retry_after {
            r = r.header("Retry-After", v);
        }
        r.body(Body::empty()).unwrap()
    }

    #[test]
    fn only_429_and_5xx_with_retry_after_are_retried() {
        assert_eq!(
            retry_after(&response(429, Some("3"))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&response(503, Some("0"))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(retry_after(&response(429, None)), None, "a PDB's 429");
        assert_eq!(retry_after(&response(500, None)), None);
        assert_eq!(retry_after(&response(409, Some("1"))), None);
    }
}
