//! Pairing over the network: `POST /v1/pair` to the code's control URL (TLS with the code's pin
//! when it carries one), then [`crate::identity::PendingPairing::finish`] checks the answer.

use crate::identity::{Identity, IdentityError, start_pairing};
use crate::tls::Pin;
use crate::transport::{Target, TransportError};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use hyperhive_control_proto::ErrorBody;
use hyperhive_control_proto::code::Code;
use hyperhive_control_proto::pair::{DeviceName, PairResponse};
use std::time::Duration;
use tokio::time::timeout;

/// The largest answer read from `POST /v1/pair` (a pair response is a few hundred bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How long pairing waits: a control plane that accepts the connection and never answers must
/// not hang the device's `pair` for ever.
#[derive(Debug, Clone, Copy)]
pub struct PairTimeouts {
    /// For the connection (TCP and TLS).
    pub connect: Duration,
    /// For the whole answer once connected (the copy does a few store requests).
    pub answer: Duration,
}

impl Default for PairTimeouts {
    fn default() -> Self {
        PairTimeouts { connect: Duration::from_secs(10), answer: Duration::from_secs(30) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{0}")]
    Identity(#[from] IdentityError),
    #[error("{0}")]
    Transport(#[from] TransportError),
    #[error("POST /v1/pair to {url}: {detail}")]
    Http { url: String, detail: String },
    #[error("the control plane refused the pairing ({status}): {error}")]
    Refused { status: u16, error: String },
    #[error("POST /v1/pair to {url}: {what} within {}s; check the control plane is up, then pair again", after.as_secs_f64())]
    TimedOut { url: String, what: &'static str, after: Duration },
}

/// Pairs this device with the code and returns its identity (not yet saved), named as the
/// control plane answered: `name`, or the code's suggested name when `name` is a default.
pub async fn pair(code_token: &str, name: DeviceName<'_>) -> Result<Identity, PairError> {
    pair_within(code_token, name, PairTimeouts::default()).await
}

/// [`pair`], waiting at most `timeouts`.
pub async fn pair_within(
    code_token: &str,
    name: DeviceName<'_>,
    timeouts: PairTimeouts,
) -> Result<Identity, PairError> {
    let (request, pending) = start_pairing(code_token, name, &mut rand::rng())?;
    let code = Code::parse(code_token).map_err(IdentityError::Code)?;
    let pin: Option<Pin> = code.pin.as_deref().map(str::parse).transpose().map_err(IdentityError::Pin)?;
    let target = Target::parse(&code.control_url)?;
    let url = format!("{}/v1/pair", code.control_url.trim_end_matches('/'));
    let http = |detail: String| PairError::Http { url: url.clone(), detail };

    let timed_out = |what, after| PairError::TimedOut { url: url.clone(), what, after };
    let stream = timeout(timeouts.connect, target.connect(pin))
        .await
        .map_err(|_| timed_out("no connection", timeouts.connect))??;
    let exchange = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| http(e.to_string()))?;
        let driver = tokio::spawn(connection);
        let body = serde_json::to_vec(&request).map_err(|e| http(e.to_string()))?;
        let request = Request::post("/v1/pair")
            .header("host", target.authority())
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(body)))
            .map_err(|e| http(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(|e| http(e.to_string()))?;
        let status = response.status().as_u16();
        let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES);
        let answer = limited.collect().await.map_err(|e| http(e.to_string()))?.to_bytes();
        driver.abort();
        Ok::<_, PairError>((status, answer))
    };
    let (status, answer) =
        timeout(timeouts.answer, exchange).await.map_err(|_| timed_out("no answer", timeouts.answer))??;
    if status != 200 {
        let error = serde_json::from_slice::<ErrorBody>(&answer)
            .map(|body| body.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&answer).chars().take(200).collect());
        return Err(PairError::Refused { status, error });
    }
    let response: PairResponse =
        serde_json::from_slice(&answer).map_err(|e| http(format!("the answer is not a pair response: {e}")))?;
    Ok(pending.finish(&response)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_control_proto::DeviceKind;

    /// A control plane that accepts the connection, reads, and never answers.
    #[tokio::test]
    async fn a_control_plane_that_never_answers_fails_the_pairing_in_time() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let code = Code {
            control_url: format!("http://{addr}"),
            control_public_key: [1; 32],
            pin: None,
            kind: DeviceKind::Host,
            secret: [2; 32],
        };
        let timeouts = PairTimeouts { connect: Duration::from_secs(5), answer: Duration::from_millis(300) };
        let started = std::time::Instant::now();
        let error = pair_within(&code.to_token(), DeviceName::Chosen("box"), timeouts).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
        let message = error.to_string();
        assert!(matches!(error, PairError::TimedOut { .. }), "{message}");
        assert!(message.contains("no answer within 0.3s") && message.contains(&addr.to_string()), "{message}");
        silent.abort();
    }
}
