//! The forge routes: `POST /api/forge/webhook` (deliveries), `GET /api/config-prs`,
//! `GET /api/agents/{agent}/config-pr` and `GET /api/issues` (docs/swarm/forge.md).
//!
//! A delivery is taken only when its signature verifies against the webhook secret, compared in
//! constant time; anything else is 401 and changes nothing. The checks run in this order, each
//! refusing before anything is written: the body is JSON (415) and at most
//! [`MAX_DELIVERY_BYTES`] (413), a secret is configured (503), the signature verifies (401), the event is named
//! (400), the delivery id was not taken before (200, nothing done), the payload reads (400).

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_hive_proto::AgentName;
use hyperhive_json_body::BodyError;
use serde_json::json;
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use std::sync::Arc;

use super::{ApiError, json};
use crate::forge::ForgeHub;
use crate::forge::Outcome;
use crate::forge::webhook::{self, MAX_DELIVERY_BYTES};

/// A delivery's body: JSON (415) of at most [`MAX_DELIVERY_BYTES`] (413). A refused body is
/// read on and dropped (up to a bound) before the answer: a proxy in front (Caddy) streams the
/// body after the headers, and a connection closed before it is sent turns the 413 or 415 into
/// its own 502.
async fn delivery_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_DELIVERY_BYTES).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(format!("{e}; set the webhook's content type to json")),
        BodyError::TooLarge { .. } => ApiError::PayloadTooLarge(format!("{e}; no forge delivery is that large")),
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}

/// What the forge routes need.
#[derive(Debug, Clone)]
pub struct ForgeApi {
    /// The webhook secret, `config-prs` and the issue report.
    pub forge: Arc<ForgeHub>,
    /// Reads `config-prs` whole.
    pub js: async_nats::jetstream::Context,
}

impl ForgeApi {
    pub(super) async fn forge_webhook<S, B>(&self, headers: &HeaderMap, body: S) -> Result<Response, ApiError>
    where
        S: Stream<Item = Result<B, warp::Error>> + Send,
        B: Buf,
    {
        let hub = &self.forge;
        // Read before anything is judged, so that even a refusal reaches a proxied sender.
        let body = delivery_body(headers, body).await?;
        let Some(secret) = &hub.secret else {
            return Err(ApiError::NotConfigured(
                "no webhook secret: set SWARM_STATE_DIR to the controller's state directory and restart".into(),
            ));
        };
        let Some(signature) = webhook::signature(headers) else {
            return Err(ApiError::Unauthorized(
                "no X-Forgejo-Signature or X-Gitea-Signature header; deliveries come from the forge's webhook".into(),
            ));
        };
        if !secret.verifies(&body, signature) {
            return Err(ApiError::Unauthorized(
                "the signature does not match the body: not signed with this swarm's webhook secret".into(),
            ));
        }
        let Some(event) = webhook::event_name(headers) else {
            return Err(ApiError::BadRequest("no X-Forgejo-Event or X-Gitea-Event header".into()));
        };
        let again = |e: String| ApiError::Unavailable(format!("{e}; the forge may send it again"));
        if hub.taken.taken(&body).await.map_err(again)? {
            let delivery = webhook::delivery_id(headers).unwrap_or("none");
            tracing::info!(
                event,
                delivery,
                "a webhook delivery taken already (the same signed body): not applied again"
            );
            return Ok(json(StatusCode::OK, &json!({"event": event, "outcome": "duplicate"})));
        }
        let parsed = webhook::parse(event, &body).map_err(ApiError::BadRequest)?;
        let outcome = hub.apply(parsed).await.map_err(again)?;
        hub.taken.record(&body, event).await;
        let outcome = match outcome {
            Outcome::Applied => "applied",
            Outcome::Ignored => "ignored",
        };
        Ok(json(StatusCode::OK, &json!({"event": event, "outcome": outcome})))
    }

    pub(super) async fn config_prs(&self) -> Result<Response, ApiError> {
        let all =
            self.forge.config_prs.list(&self.js).await.map_err(|e| ApiError::Unavailable(format!("{e}; try again")))?;
        Ok(json(StatusCode::OK, &all))
    }

    pub(super) async fn config_pr(&self, agent: &str) -> Result<Response, ApiError> {
        let agent = AgentName::parse(agent).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let found =
            self.forge.config_prs.get(&agent).await.map_err(|e| ApiError::Unavailable(format!("{e}; try again")))?;
        match found {
            Some(pr) => Ok(json(StatusCode::OK, &pr)),
            None => Err(ApiError::NotFound(format!(
                "agent {agent} has no config pull request (none opened yet, or it is not on the roster)"
            ))),
        }
    }

    pub(super) fn issues(&self) -> Response {
        json(StatusCode::OK, &self.forge.issues.view())
    }
}
