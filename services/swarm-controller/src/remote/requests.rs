//! Clients' requests arriving over the control link, run through the same router and handlers
//! as the socket ([`App::handle`]), answered with messages ([`super::frames`]).
//!
//! The link already delivers each message once and in order, and keeps what it sent until the
//! client acks it, across copies' deaths. Request ids add the application's half: a request id
//! seen again (a client that sent it twice) never runs twice; while it runs the repeat is
//! ignored (its answer is on its way), after it the stored answer is sent again.
//!
//! Bounds, all per client: [`MAX_REQUEST_BYTES`] per request and for all its requests being sent
//! together, [`MAX_OPEN`] requests being sent or running at once, and a token bucket of `rate`
//! requests a second ([`super::rate`]).
//! Over any of them the request is refused (413 or 429) and nothing runs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use warp::http::{HeaderMap, HeaderName, HeaderValue, Method};
use warp::reply::Response;

use super::frames::{
    self, FromController, Header, MAX_HEADER_BYTES, MAX_HEADERS, MAX_PATH_BYTES, PIECE_BYTES, RequestFrame,
    ToController,
};
use super::outgoing::{NotSent, Outgoing};
use super::rate::TokenBucket;
use crate::api::{ApiError, App, Caller};
use hyperhive_swarm_api::roles::Role;

/// The largest request body, the largest the socket takes on any route (an agent's spec).
pub const MAX_REQUEST_BYTES: usize = crate::api::MAX_CREATE_REQUEST_BYTES;

/// Requests one client may have being sent or running at once (a followed terminal is one).
pub const MAX_OPEN: usize = 16;

/// Answers remembered for repeated ids, in all.
const REMEMBERED: usize = 4096;

/// Bytes of stored answers kept for repeated ids, in all; an answer larger than a sixteenth of
/// this is not stored (a repeat of it is answered 409, saying it ran).
const REMEMBERED_BYTES: usize = 16 * 1024 * 1024;

/// What one client's answers may hold of the totals: a client that sends many requests forgets
/// its own oldest answers, never another client's.
const REMEMBERED_PER_CLIENT: usize = REMEMBERED / 4;
const REMEMBERED_BYTES_PER_CLIENT: usize = REMEMBERED_BYTES / 4;

/// How long an answer waits for room in its client's window before it is given up (its pieces
/// already sent stay with the link and reach the client when it is back).
const ANSWER_PATIENCE: Duration = Duration::from_secs(60);

/// How long a stream waits for room: a client that reads this slowly is dropped, as the socket
/// drops a slow event-stream reader, and resumes by event id.
const STREAM_PATIENCE: Duration = Duration::from_secs(10);

/// What happened to a request id.
#[derive(Debug, Clone)]
enum Outcome {
    /// Being sent or running; the sender ends it with `cancel`.
    Open(tokio::sync::watch::Sender<bool>),
    /// Answered; the messages, to send again on a repeat, when small enough to keep.
    Answered(Option<Arc<Vec<FromController>>>),
}

/// Request ids and their outcomes, bounded per client and in all.
#[derive(Debug, Default)]
struct Outcomes {
    by_id: HashMap<(String, String), Outcome>,
    /// Each client's ids, oldest first, with the bytes of its stored answers.
    clients: HashMap<String, Remembered>,
    /// Ids and stored bytes of every client together.
    total: usize,
    stored_bytes: usize,
    open_per_client: HashMap<String, usize>,
}

/// One client's part of [`Outcomes`].
#[derive(Debug, Default)]
struct Remembered {
    order: VecDeque<String>,
    stored_bytes: usize,
}

impl Outcomes {
    fn open(&mut self, key: (String, String), cancel: tokio::sync::watch::Sender<bool>) {
        *self.open_per_client.entry(key.0.clone()).or_default() += 1;
        if self.by_id.insert(key.clone(), Outcome::Open(cancel)).is_none() {
            self.clients.entry(key.0.clone()).or_default().order.push_back(key.1.clone());
            self.total += 1;
        }
        self.trim(&key.0);
    }

    fn answered(&mut self, key: &(String, String), frames: Option<Vec<FromController>>) {
        let size = frames.as_ref().map_or(0, |f| frames_size(f));
        let kept = frames.filter(|_| size <= REMEMBERED_BYTES / 16).map(Arc::new);
        if let Some(outcome) = self.by_id.get_mut(key) {
            if matches!(outcome, Outcome::Open(_))
                && let Some(open) = self.open_per_client.get_mut(&key.0)
            {
                *open = open.saturating_sub(1);
            }
            let stored = kept.as_ref().map_or(0, |_| size);
            self.stored_bytes += stored;
            self.clients.entry(key.0.clone()).or_default().stored_bytes += stored;
            *outcome = Outcome::Answered(kept);
        }
        self.trim(&key.0);
    }

    fn open_count(&self, client: &str) -> usize {
        self.open_per_client.get(client).copied().unwrap_or(0)
    }

    /// Forgets answered ids beyond the bounds, oldest first: `client`'s beyond its own share,
    /// then, beyond the totals, those of whichever client holds the most. Open ones stay (they
    /// are bounded by [`MAX_OPEN`] per client).
    fn trim(&mut self, client: &str) {
        while self
            .clients
            .get(client)
            .is_some_and(|c| c.order.len() > REMEMBERED_PER_CLIENT || c.stored_bytes > REMEMBERED_BYTES_PER_CLIENT)
        {
            if !self.forget_oldest(client) {
                break;
            }
        }
        while self.total > REMEMBERED || self.stored_bytes > REMEMBERED_BYTES {
            let Some(heaviest) =
                self.clients.iter().max_by_key(|(_, c)| (c.stored_bytes, c.order.len())).map(|(name, _)| name.clone())
            else {
                break;
            };
            if !self.forget_oldest(&heaviest) {
                break;
            }
        }
    }

    /// Forgets `client`'s oldest answered id; `false` when it has none.
    fn forget_oldest(&mut self, client: &str) -> bool {
        let Some(remembered) = self.clients.get_mut(client) else { return false };
        let Some(at) = remembered
            .order
            .iter()
            .position(|id| matches!(self.by_id.get(&(client.to_owned(), id.clone())), Some(Outcome::Answered(_))))
        else {
            return false;
        };
        let id = remembered.order.remove(at).expect("a position found in it");
        if let Some(Outcome::Answered(frames)) = self.by_id.remove(&(client.to_owned(), id)) {
            let size = frames.as_ref().map_or(0, |f| frames_size(f));
            remembered.stored_bytes -= size;
            self.stored_bytes -= size;
        }
        self.total -= 1;
        if remembered.order.is_empty() {
            self.clients.remove(client);
        }
        true
    }
}

fn frames_size(frames: &[FromController]) -> usize {
    frames
        .iter()
        .map(|f| match f {
            FromController::Response { body, .. } | FromController::Body { body, .. } => body.len() + 256,
            FromController::Refused { error } => error.len(),
        })
        .sum()
}

/// A request whose body is still arriving.
#[derive(Debug)]
struct Partial {
    /// The sender's role, as the control plane names it on the message that opened the request.
    role: Option<Role>,
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
    /// Refused already: later pieces are dropped until the last.
    refused: bool,
}

/// Everything about one client the dispatch loop keeps.
#[derive(Debug)]
struct Client {
    bucket: TokenBucket,
    partial: HashMap<String, Partial>,
}

/// The requests side of the link.
#[derive(Debug)]
pub struct Requests {
    app: Arc<App>,
    out: Arc<Outgoing>,
    rate: u32,
    clients: HashMap<String, Client>,
    outcomes: Arc<Mutex<Outcomes>>,
    tasks: tokio::task::JoinSet<()>,
}

impl Requests {
    pub fn new(app: Arc<App>, out: Arc<Outgoing>, rate: u32) -> Self {
        Self { app, out, rate, clients: HashMap::new(), outcomes: Arc::default(), tasks: tokio::task::JoinSet::new() }
    }

    /// One message from `from`, as the link delivered it.
    pub fn on_message(&mut self, from: &str, role: Option<Role>, body: &str) {
        // Finished tasks' results are of no interest; reap them so the set stays small.
        while self.tasks.try_join_next().is_some() {}
        let frame = match serde_json::from_str::<ToController>(body) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::info!(client = from, error = %e, "refused a message that is not an API request");
                let error = format!(
                    "not an API request ({e}); send {{\"type\": \"request\", \"id\", \"method\", \"path\", ...}} \
                     as docs/swarm/remote.md describes"
                );
                self.send_later(from, vec![FromController::Refused { error }]);
                return;
            }
        };
        match frame {
            ToController::Request(request) => self.on_request(from, role, request),
            ToController::Body { id, body, more } => self.on_body(from, &id, &body, more),
            ToController::Cancel { id } => {
                let outcomes = self.outcomes.lock().expect("never poisoned");
                if let Some(Outcome::Open(cancel)) = outcomes.by_id.get(&(from.to_owned(), id)) {
                    cancel.send_replace(true);
                }
            }
        }
    }

    fn on_request(&mut self, from: &str, role: Option<Role>, request: RequestFrame) {
        let RequestFrame { id, method, path, headers, size, body, more } = request;
        if let Err(error) = frames::check_id(&id) {
            self.send_later(from, vec![FromController::Refused { error }]);
            return;
        }
        let key = (from.to_owned(), id.clone());
        {
            let outcomes = self.outcomes.lock().expect("never poisoned");
            match outcomes.by_id.get(&key) {
                Some(Outcome::Open(_)) => {
                    tracing::debug!(
                        client = from,
                        id,
                        "a repeated request that is still open: its answer is on its way"
                    );
                    return;
                }
                Some(Outcome::Answered(Some(frames))) => {
                    tracing::info!(client = from, id, "a repeated request: sending its answer again");
                    let frames = frames.as_ref().clone();
                    drop(outcomes);
                    self.send_later(from, frames);
                    return;
                }
                Some(Outcome::Answered(None)) => {
                    drop(outcomes);
                    let error = ApiError::Conflict {
                        message: format!(
                            "request {id} already ran; its answer was not kept; send a new request to see the state now"
                        ),
                        current: None,
                    };
                    self.refuse(from, &id, error);
                    return;
                }
                None => {}
            }
        }
        let now = Instant::now();
        let rate = self.rate;
        let client = self
            .clients
            .entry(from.to_owned())
            .or_insert_with(|| Client { bucket: TokenBucket::new(rate, now), partial: HashMap::new() });
        if let Err(wait) = client.bucket.take(now) {
            let secs = wait.as_secs().max(1);
            self.refuse_then_drop(
                from,
                &id,
                more,
                ApiError::TooManyRequests {
                    message: format!("over {rate} requests a second from this client; try again in {secs} s"),
                    retry_after: secs,
                },
            );
            return;
        }
        let open = self.outcomes.lock().expect("never poisoned").open_count(from) + client.partial.len();
        if open >= MAX_OPEN {
            self.refuse_then_drop(from, &id, more, ApiError::TooManyRequests {
                message: format!(
                    "this client has {MAX_OPEN} requests open already (streams count until they end); wait for one to finish"
                ),
                retry_after: 1,
            });
            return;
        }
        let parsed = parse_head(&method, &path, &headers).and_then(|(method, headers)| {
            if size.is_some_and(|s| s > MAX_REQUEST_BYTES as u64) {
                return Err(too_large(size.unwrap_or_default()));
            }
            Ok((method, headers))
        });
        let (method, headers) = match parsed {
            Ok(head) => head,
            Err(error) => {
                self.refuse_then_drop(from, &id, more, error);
                return;
            }
        };
        let mut partial = Partial { role, method, path, headers, body: Vec::new(), refused: false };
        if let Err(error) = append(&mut partial.body, &body, MAX_REQUEST_BYTES) {
            self.refuse_then_drop(from, &id, more, error);
            return;
        }
        if more {
            self.clients.get_mut(from).expect("inserted above").partial.insert(id, partial);
        } else {
            self.run(from, id, partial);
        }
    }

    fn on_body(&mut self, from: &str, id: &str, body: &str, more: bool) {
        // What the client's other requests being sent hold: together they stay within one
        // request's limit, so a client holds at most that much of the controller's memory.
        let held_elsewhere = self.clients.get(from).map_or(0, |c| {
            c.partial.iter().filter(|(other, _)| other.as_str() != id).map(|(_, p)| p.body.len()).sum::<usize>()
        });
        let Some(partial) = self.clients.get_mut(from).and_then(|c| c.partial.get_mut(id)) else {
            let error =
                format!("a body piece for request {id:?}, which is not being sent; start with a \"request\" message");
            self.send_later(from, vec![FromController::Refused { error }]);
            return;
        };
        if !partial.refused
            && let Err(error) = append(&mut partial.body, body, MAX_REQUEST_BYTES.saturating_sub(held_elsewhere))
        {
            partial.refused = true;
            self.refuse(from, id, error);
        }
        if more {
            return;
        }
        let partial = self.clients.get_mut(from).and_then(|c| c.partial.remove(id)).expect("found above");
        if !partial.refused {
            self.run(from, id.to_owned(), partial);
        }
    }

    /// Refuses `id`; when more of its body is to come, the pieces are dropped as they arrive.
    /// Refused requests are remembered only up to [`MAX_OPEN`] per client, so a client that keeps
    /// starting requests it may not send grows nothing: beyond that its pieces are answered as
    /// pieces of no request.
    fn refuse_then_drop(&mut self, from: &str, id: &str, more: bool, error: ApiError) {
        if more
            && let Some(client) = self.clients.get_mut(from)
            && client.partial.len() < MAX_OPEN
        {
            let partial = Partial {
                role: None,
                method: Method::GET,
                path: String::new(),
                headers: HeaderMap::new(),
                body: Vec::new(),
                refused: true,
            };
            client.partial.insert(id.to_owned(), partial);
        }
        self.refuse(from, id, error);
    }

    fn refuse(&mut self, from: &str, id: &str, error: ApiError) {
        tracing::info!(client = from, id, status = %error.status(), "refused a request");
        let (client, id, out) = (from.to_owned(), id.to_owned(), self.out.clone());
        self.tasks.spawn(async move {
            let _ = answer(&out, &client, &id, error.into_response(), None).await;
        });
    }

    fn send_later(&mut self, to: &str, frames: Vec<FromController>) {
        let (to, out) = (to.to_owned(), self.out.clone());
        self.tasks.spawn(async move {
            for frame in frames {
                if let Err(e) = out.send(&to, &frame, ANSWER_PATIENCE).await {
                    tracing::info!(client = to, error = %e, "gave up sending to a client");
                    return;
                }
            }
        });
    }

    fn run(&mut self, from: &str, id: String, partial: Partial) {
        let key = (from.to_owned(), id.clone());
        let (cancel_tx, cancel) = tokio::sync::watch::channel(false);
        self.outcomes.lock().expect("never poisoned").open(key.clone(), cancel_tx);
        let (app, out, outcomes, client) = (self.app.clone(), self.out.clone(), self.outcomes.clone(), from.to_owned());
        tracing::info!(client, id, method = %partial.method, path = partial.path, "remote request");
        self.tasks.spawn(async move {
            let (path, query) = partial.path.split_once('?').unwrap_or((&partial.path, ""));
            let body = futures::stream::iter([Ok::<_, warp::Error>(Bytes::from(partial.body))]);
            let caller = Caller::device(client.clone(), partial.role);
            let outcome = app.handle(&caller, &partial.method, path, query, &partial.headers, body).await;
            let response = outcome.unwrap_or_else(ApiError::into_response);
            let kept = answer(&out, &client, &id, response, Some(cancel)).await;
            outcomes.lock().expect("never poisoned").answered(&key, kept);
        });
    }

    /// Stops every request still running (the daemon is stopping).
    pub async fn shutdown(mut self) {
        self.tasks.shutdown().await;
    }
}

fn too_large(size: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the request body is {size} bytes; requests through the control plane are at most {MAX_REQUEST_BYTES} bytes"
    ))
}

/// Adds a piece to `body`, which may hold at most `room` bytes.
fn append(body: &mut Vec<u8>, piece: &str, room: usize) -> Result<(), ApiError> {
    let bytes = frames::decode_piece(piece).map_err(ApiError::BadRequest)?;
    let size = body.len() + bytes.len();
    if size > room {
        return Err(if room < MAX_REQUEST_BYTES {
            ApiError::PayloadTooLarge(format!(
                "this client's requests being sent hold more than {MAX_REQUEST_BYTES} bytes together; send large \
                 requests one at a time"
            ))
        } else {
            too_large(size as u64)
        });
    }
    body.extend_from_slice(&bytes);
    Ok(())
}

/// The method and headers of a request, checked.
fn parse_head(method: &str, path: &str, headers: &[Header]) -> Result<(Method, HeaderMap), ApiError> {
    let bad = ApiError::BadRequest;
    let method = Method::from_bytes(method.as_bytes())
        .ok()
        .filter(|_| !method.is_empty() && method.len() <= 16)
        .ok_or_else(|| bad(format!("{method:?} is not an HTTP method; use GET, POST, PUT, PATCH or DELETE")))?;
    if !path.starts_with('/') || path.len() > MAX_PATH_BYTES || path.bytes().any(|b| b.is_ascii_control() || b == b' ')
    {
        return Err(bad(format!(
            "the path must start with '/', hold no spaces or control characters and be at most {MAX_PATH_BYTES} bytes, e.g. /api/schedules"
        )));
    }
    if headers.len() > MAX_HEADERS || headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>() > MAX_HEADER_BYTES {
        return Err(bad(format!("at most {MAX_HEADERS} headers of {MAX_HEADER_BYTES} bytes in all")));
    }
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("{name:?} is not a header name")))?;
        let value =
            HeaderValue::from_str(value).map_err(|_| bad(format!("the value of {name} is not a header value")))?;
        map.append(header, value);
    }
    Ok((method, map))
}

/// Sends `response` to `client` as messages: one `response`, then a `body` per piece while the
/// body lasts (a stream's until it ends or `cancel` says stop). Returns the messages when the
/// answer is whole and small enough to keep for a repeat.
async fn answer(
    out: &Outgoing,
    client: &str,
    id: &str,
    response: Response,
    cancel: Option<tokio::sync::watch::Receiver<bool>>,
) -> Option<Vec<FromController>> {
    let status = response.status().as_u16();
    let headers: Vec<Header> = response
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let streaming = response
        .headers()
        .get(warp::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut body = response.into_body();
    if !streaming {
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                tracing::warn!(client, id, error = %e, "a response body failed");
                Bytes::new()
            }
        };
        let header_bytes: usize = headers.iter().map(|(n, v)| n.len() + v.len() + 8).sum();
        let pieces = frames::pieces(&bytes, PIECE_BYTES.saturating_sub(header_bytes));
        let last = pieces.len() - 1;
        let mut sent = Vec::with_capacity(pieces.len());
        for (index, piece) in pieces.into_iter().enumerate() {
            let (body, more) = (frames::encode_piece(piece), index < last);
            let frame = if index == 0 {
                FromController::Response { id: id.to_owned(), status, headers: headers.clone(), body, more }
            } else {
                FromController::Body { id: id.to_owned(), body, more, error: None }
            };
            if let Err(e) = out.send(client, &frame, ANSWER_PATIENCE).await {
                tracing::info!(client, id, error = %e, "gave up sending an answer");
                return None;
            }
            sent.push(frame);
        }
        return Some(sent);
    }
    let head = FromController::Response { id: id.to_owned(), status, headers, body: String::new(), more: true };
    if out.send(client, &head, ANSWER_PATIENCE).await.is_err() {
        return None;
    }
    let mut cancel = cancel;
    let ended = loop {
        let next = async {
            match cancel.as_mut() {
                Some(rx) => tokio::select! {
                    frame = body.frame() => Some(frame),
                    _ = rx.wait_for(|stop| *stop) => None,
                },
                None => Some(body.frame().await),
            }
        };
        let frame = match next.await {
            None => {
                tracing::info!(client, id, "the client stopped following a stream");
                return None;
            }
            Some(frame) => frame,
        };
        match frame {
            None => break None,
            Some(Err(e)) => break Some(e.to_string()),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                for piece in data.chunks(PIECE_BYTES) {
                    let frame = FromController::Body {
                        id: id.to_owned(),
                        body: frames::encode_piece(piece),
                        more: true,
                        error: None,
                    };
                    if let Err(e) = out.send(client, &frame, STREAM_PATIENCE).await {
                        log_dropped(client, id, &e);
                        return None;
                    }
                }
            }
        }
    };
    let end = FromController::Body { id: id.to_owned(), body: String::new(), more: false, error: ended };
    let _ = out.send(client, &end, ANSWER_PATIENCE).await;
    None
}

fn log_dropped(client: &str, id: &str, error: &NotSent) {
    tracing::info!(client, id, %error, "dropped a stream its client did not read; it resumes by event id");
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::StatusCode;

    #[test]
    fn heads_are_checked() {
        let (method, headers) = parse_head("PUT", "/api/x?y=1", &[("X-Set-By".into(), "swarmctl".into())]).unwrap();
        assert_eq!(method, Method::PUT);
        assert_eq!(headers["x-set-by"], "swarmctl");
        for (method, path, headers, why) in [
            ("", "/", vec![], "not an HTTP method"),
            ("G E T", "/", vec![], "not an HTTP method"),
            ("GET", "api", vec![], "must start with '/'"),
            ("GET", "/a b", vec![], "no spaces"),
            ("GET", "/a\nb", vec![], "control characters"),
            ("GET", "/", vec![("bad name".to_owned(), "v".to_owned())], "not a header name"),
            ("GET", "/", vec![("x".to_owned(), "a\nb".to_owned())], "not a header value"),
            ("GET", "/", vec![("x".to_owned(), "v".to_owned()); MAX_HEADERS + 1], "at most"),
        ] {
            let err = parse_head(method, path, &headers).unwrap_err();
            assert_eq!(err.status(), StatusCode::BAD_REQUEST);
            let ApiError::BadRequest(message) = err else { unreachable!() };
            assert!(message.contains(why), "{message}");
        }
    }

    #[test]
    fn pieces_fill_a_request_up_to_its_room() {
        let mut body = Vec::new();
        append(&mut body, &frames::encode_piece(&[1; 100]), 150).unwrap();
        let err = append(&mut body, &frames::encode_piece(&[2; 100]), 150).unwrap_err();
        let ApiError::PayloadTooLarge(message) = err else { panic!("not a 413") };
        assert!(message.contains("together"), "{message}");
        assert_eq!(body.len(), 100, "a refused piece adds nothing");
        let err = append(&mut body, &frames::encode_piece(&[2; 100]), 100 + 99).unwrap_err();
        assert!(matches!(err, ApiError::PayloadTooLarge(_)));
        assert!(matches!(append(&mut body, "not base64!", MAX_REQUEST_BYTES), Err(ApiError::BadRequest(_))));
        let mut big = vec![0; MAX_REQUEST_BYTES];
        let err = append(&mut big, &frames::encode_piece(&[1]), MAX_REQUEST_BYTES).unwrap_err();
        let ApiError::PayloadTooLarge(message) = err else { panic!("not a 413") };
        assert!(message.contains("requests through the control plane are at most"), "{message}");
    }

    #[test]
    fn outcomes_stay_bounded_and_keep_open_requests() {
        let mut outcomes = Outcomes::default();
        let open = ("c".to_owned(), "open".to_owned());
        outcomes.open(open.clone(), tokio::sync::watch::channel(false).0);
        for n in 0..REMEMBERED_PER_CLIENT + 10 {
            let key = ("c".to_owned(), format!("r{n}"));
            outcomes.open(key.clone(), tokio::sync::watch::channel(false).0);
            outcomes.answered(&key, Some(vec![FromController::Refused { error: "e".into() }]));
        }
        assert!(outcomes.by_id.len() <= REMEMBERED_PER_CLIENT);
        assert!(matches!(outcomes.by_id.get(&open), Some(Outcome::Open(_))), "an open request is never forgotten");
        assert_eq!(outcomes.open_count("c"), 1);
        assert!(outcomes.by_id.contains_key(&("c".to_owned(), format!("r{}", REMEMBERED_PER_CLIENT + 9))));
        assert!(!outcomes.by_id.contains_key(&("c".to_owned(), "r0".to_owned())), "the oldest answers go first");
    }

    #[test]
    fn a_client_flooding_requests_forgets_its_own_answers_not_anothers() {
        let mut outcomes = Outcomes::default();
        let answer = |outcomes: &mut Outcomes, client: &str, id: String, bytes: usize| {
            let key = (client.to_owned(), id);
            outcomes.open(key.clone(), tokio::sync::watch::channel(false).0);
            let body = "x".repeat(bytes);
            outcomes
                .answered(&key, Some(vec![FromController::Body { id: key.1.clone(), body, more: false, error: None }]));
        };
        for n in 0..10 {
            answer(&mut outcomes, "quiet", format!("q{n}"), 100);
        }
        // Many small answers, then a few large ones: past every bound, per client and in all.
        for n in 0..REMEMBERED * 2 {
            answer(&mut outcomes, "flood", format!("f{n}"), 100);
        }
        for n in 0..64 {
            answer(&mut outcomes, "flood", format!("big{n}"), REMEMBERED_BYTES / 32);
        }
        for n in 0..10 {
            let key = ("quiet".to_owned(), format!("q{n}"));
            assert!(
                matches!(outcomes.by_id.get(&key), Some(Outcome::Answered(Some(_)))),
                "the quiet client's answer {n} is still remembered"
            );
        }
        let flood = &outcomes.clients["flood"];
        assert!(flood.order.len() <= REMEMBERED_PER_CLIENT && flood.stored_bytes <= REMEMBERED_BYTES_PER_CLIENT);
        assert!(outcomes.total <= REMEMBERED && outcomes.stored_bytes <= REMEMBERED_BYTES);
        assert_eq!(outcomes.total, outcomes.by_id.len(), "the count follows the table");
    }
}
