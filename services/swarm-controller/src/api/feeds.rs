//! `GET /api/agents/{name}/terminal` and `GET /api/agents/{name}/turn`: an agent's terminal feed
//! and turn header as server-sent events (see [`crate::feeds`]). `Last-Event-ID` resumes after that event.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use warp::Reply;
use warp::http::HeaderMap;
use warp::reply::Response;

use std::sync::Arc;

use super::ApiError;
use super::ui::known_agent;
use crate::feeds::FeedHub;
use crate::feeds::FeedKind;
use crate::feeds::watch::{Queued, Start};
use crate::lifecycle::roster::Roster;

/// How often an idle connection gets a comment, so proxies and browsers keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// What the feed routes need.
#[derive(Debug, Clone)]
pub struct FeedsApi {
    /// The agents' terminal feeds and turn headers.
    pub hub: Arc<FeedHub>,
    /// Only agents on the roster are watched.
    pub roster: Roster,
}

impl FeedsApi {
    pub(super) async fn feed(&self, name: &str, kind: FeedKind, headers: &HeaderMap) -> Result<Response, ApiError> {
        let start = last_event_id(headers)?;
        let agent = known_agent(&self.roster, name).await?;
        let frames = self.hub.watch(kind, agent.as_str(), start).await.map_err(ApiError::Unavailable)?;
        let events = warp::sse::keep_alive().interval(KEEPALIVE).stream(Frames(frames));
        let mut response = warp::sse::reply(events).into_response();
        // nginx buffers a proxied answer unless told not to; events must flow as they come.
        response.headers_mut().insert("x-accel-buffering", warp::http::HeaderValue::from_static("no"));
        Ok(response)
    }
}

/// `Last-Event-ID`: the sequence of the last event the client has, or none for a new watcher.
fn last_event_id(headers: &HeaderMap) -> Result<Start, ApiError> {
    let Some(value) = headers.get("last-event-id") else { return Ok(Start::Fresh) };
    let text = value.to_str().unwrap_or("").trim();
    let id = text.parse::<u64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "Last-Event-ID must be the id of an event this route sent (a stream sequence), not {text:?}"
        ))
    })?;
    if id == u64::MAX {
        // Nothing can follow it (the next sequence would overflow): no stream sent it.
        return Err(ApiError::BadRequest(format!(
            "Last-Event-ID {id}: no event follows that id, so no stream sent it; reconnect without Last-Event-ID"
        )));
    }
    Ok(Start::After(id))
}

/// A watcher's frames as the events warp writes.
struct Frames(mpsc::Receiver<Queued>);

impl Stream for Frames {
    type Item = Result<warp::sse::Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|frame| frame.map(|f| Ok((*f).into_event())))
    }
}
