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
use hyperhive_control_proto::pair::PairResponse;

/// The largest answer read from `POST /v1/pair` (a pair response is a few hundred bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

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
}

/// Pairs this device with the code and returns its identity (not yet saved).
pub async fn pair(code_token: &str, name: &str) -> Result<Identity, PairError> {
    let (request, pending) = start_pairing(code_token, name, &mut rand::rng())?;
    let code = Code::parse(code_token).map_err(IdentityError::Code)?;
    let pin: Option<Pin> = code.pin.as_deref().map(str::parse).transpose().map_err(IdentityError::Pin)?;
    let target = Target::parse(&code.control_url)?;
    let url = format!("{}/v1/pair", code.control_url.trim_end_matches('/'));
    let http = |detail: String| PairError::Http { url: url.clone(), detail };

    let stream = target.connect(pin).await?;
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
