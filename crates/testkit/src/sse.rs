//! A server-sent events client over a unix socket, for the controller's relay routes: events are
//! read as they arrive, and the answer's end is seen.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// `id:`, when numeric.
    pub id: Option<u64>,
    /// `event:` (`message` when absent).
    pub event: String,
    /// `data:` lines, joined.
    pub data: String,
}

/// One open SSE answer.
pub struct SseClient {
    body: hyper::body::Incoming,
    buffer: String,
    _connection: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for SseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseClient").field("buffered", &self.buffer.len()).finish()
    }
}

impl SseClient {
    /// `GET path` on the server at `socket`, with `Last-Event-ID` when given.
    ///
    /// # Errors
    /// The connection or the request failed.
    pub async fn open(
        socket: &Path,
        path: &str,
        last_event_id: Option<u64>,
    ) -> anyhow::Result<(StatusCode, SseClient)> {
        let stream = tokio::net::UnixStream::connect(socket).await?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = hyper::Request::builder().method("GET").uri(path).header("host", "localhost");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = sender.send_request(request.body(Empty::<Bytes>::new())?).await?;
        let status = response.status();
        Ok((status, SseClient { body: response.into_body(), buffer: String::new(), _connection: connection }))
    }

    /// The next event (comments skipped), or `None` when the answer ended.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&block) {
                    return Some(event);
                }
                continue;
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// The next `n` events within `patience`.
    ///
    /// # Errors
    /// Fewer came: the answer ended, or time ran out (the message says how many came).
    pub async fn take(&mut self, n: usize, patience: Duration) -> anyhow::Result<Vec<SseEvent>> {
        let mut events = Vec::new();
        let outcome = tokio::time::timeout(patience, async {
            while events.len() < n {
                match self.next().await {
                    Some(event) => events.push(event),
                    None => return false,
                }
            }
            true
        })
        .await;
        match outcome {
            Ok(true) => Ok(events),
            Ok(false) => anyhow::bail!("the answer ended after {} of {n} events: {events:?}", events.len()),
            Err(_) => anyhow::bail!("{} of {n} events within {patience:?}: {events:?}", events.len()),
        }
    }
}

/// One event block, or `None` for a block of comments only.
fn parse(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent { id: None, event: "message".into(), data: String::new() };
    let mut fields = 0;
    for line in block.lines() {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match name {
            "id" => event.id = value.trim().parse().ok(),
            "event" => event.event = value.to_owned(),
            "data" if event.data.is_empty() => event.data = value.to_owned(),
            "data" => {
                event.data.push('\n');
                event.data.push_str(value);
            }
            _ => continue,
        }
        fields += 1;
    }
    (fields > 0).then_some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_comments_are_told_apart() {
        assert_eq!(parse(":keepalive\n\n"), None);
        let event = parse("id:7\nevent:term\ndata:{\"text\":\"a\"}\n\n").unwrap();
        assert_eq!((event.id, event.event.as_str(), event.data.as_str()), (Some(7), "term", "{\"text\":\"a\"}"));
        assert_eq!(parse("data: one\ndata: two\n\n").unwrap().data, "one\ntwo");
    }
}
