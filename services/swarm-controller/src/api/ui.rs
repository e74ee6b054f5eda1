//! Agent icons (`GET`, `PUT`, `DELETE /api/agents/{name}/icon`) and `GET /api/quick-links`.

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_hive_proto::AgentName;
use hyperhive_json_body::BodyError;
use serde_json::json;
use warp::Reply;
use warp::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use warp::http::{HeaderMap, HeaderValue, StatusCode};
use warp::reply::Response;

use std::sync::Arc;

use super::{ApiError, json};
use crate::lifecycle::roster::Roster;
use crate::ui::assets::{Asset, CONTENT_SECURITY_POLICY, ICON_POLICY};
use crate::ui::icons::{self, IconStore, MAX_ICON_BYTES};
use crate::ui::quick_links::QuickLink;

/// The agent on the roster named `name` (400 malformed, 404 unknown).
pub(super) async fn known_agent(roster: &Roster, name: &str) -> Result<AgentName, ApiError> {
    let agent = AgentName::parse(name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if roster.contains(&agent).await.map_err(ApiError::Unavailable)? {
        Ok(agent)
    } else {
        Err(ApiError::NotFound(format!("no agent {agent} on the roster (see GET /api/agents)")))
    }
}

/// What the icon and quick-link routes need.
#[derive(Debug, Clone)]
pub struct UiApi {
    /// Uploaded agent icons.
    pub icons: IconStore,
    /// The configured quick links.
    pub quick_links: Arc<Vec<QuickLink>>,
    /// Only agents on the roster have icons.
    pub roster: Roster,
}

impl UiApi {
    /// The uploaded PNG, else the generated SVG; `304` when `If-None-Match` names the same one.
    pub(super) async fn icon(&self, name: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let (body, media_type) = match self.icons.get(agent.as_str()).await.map_err(ApiError::Unavailable)? {
            Some(png) => (png, "image/png"),
            None => (Bytes::from(icons::generated_svg(agent.as_str())), "image/svg+xml"),
        };
        Ok(with_policy(revalidated(body.to_vec(), media_type, headers), ICON_POLICY))
    }

    pub(super) async fn put_icon(&self, name: &str, png: &[u8]) -> Result<Response, ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let (width, height) = icons::check_png(png).map_err(ApiError::BadRequest)?;
        self.icons.put(agent.as_str(), Bytes::copy_from_slice(png)).await.map_err(ApiError::Unavailable)?;
        tracing::info!(%agent, width, height, bytes = png.len(), "agent icon uploaded");
        Ok(json(StatusCode::OK, &json!({"agent": agent, "etag": icons::etag(png), "width": width, "height": height})))
    }

    pub(super) async fn delete_icon(&self, name: &str) -> Result<Response, ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let removed = self.icons.remove(agent.as_str()).await.map_err(ApiError::Unavailable)?;
        Ok(json(StatusCode::OK, &json!({"agent": agent, "removed": removed})))
    }

    pub(super) fn quick_links(&self) -> Response {
        json(StatusCode::OK, &*self.quick_links)
    }
}

/// `body` with its type and an ETag, or a bare 304 when `If-None-Match` names that tag. Cached
/// but asked again each time (`no-cache`): a change shows at once, an unchanged file costs a 304.
fn revalidated(body: Vec<u8>, media_type: &'static str, headers: &HeaderMap) -> Response {
    let tag = icons::etag(&body);
    let fresh =
        headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut response = if fresh {
        warp::reply::with_status(Vec::new(), StatusCode::NOT_MODIFIED).into_response()
    } else {
        body.into_response()
    };
    let out = response.headers_mut();
    out.insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
    out.insert(ETAG, HeaderValue::from_str(&tag).expect("a hex tag is a header value"));
    out.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// One of the UI's embedded files, with its type, its policy and a revalidated cache.
pub(super) fn asset(asset: Asset, headers: &HeaderMap) -> Response {
    with_policy(revalidated(asset.body.as_bytes().to_vec(), asset.media_type, headers), CONTENT_SECURITY_POLICY)
}

/// A served file's content security policy, and no sniffing of its type: a browser reads it
/// only as the type it was sent with.
fn with_policy(mut response: Response, policy: &'static str) -> Response {
    let out = response.headers_mut();
    out.insert("content-security-policy", HeaderValue::from_static(policy));
    out.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    out.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

/// An icon upload: declared as `image/png` (else 415), at most [`MAX_ICON_BYTES`] (else 413).
pub(super) async fn icon_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let declared = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !declared.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("image/png") {
        return Err(ApiError::UnsupportedMediaType(format!(
            "an icon is a PNG sent with Content-Type: image/png (got {declared:?})"
        )));
    }
    hyperhive_json_body::limited_body(headers, body, MAX_ICON_BYTES).await.map_err(|e| match e {
        BodyError::TooLarge { .. } => ApiError::PayloadTooLarge(format!("{e}; an icon is at most 256 KiB")),
        other => ApiError::BadRequest(other.to_string()),
    })
}
