//! A stand-in S3 endpoint for behaviours no real server here shows on demand: a bucket that
//! ignores conditional headers (it never answers 412) or ignores them on DELETE only, a PUT that lands but whose answer is lost
//! (a 503 after storing), and a 409 ConditionalRequestConflict. It answers path-style PUT, GET,
//! DELETE and ListObjectsV2 (always empty) like S3.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use warp::Filter;
use warp::http::{HeaderMap, Method, Response, StatusCode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Ignores If-None-Match and If-Match: every write succeeds.
    IgnoresConditions,
    /// Honours conditions on PUT, but ignores If-Match on DELETE: a stale delete removes.
    IgnoresDeleteConditions,
    /// Honours conditions, but the first PUT is stored and then answered with 503, and the
    /// first GET after it answers 503 too: the writer's retry then meets a 412 for its own write.
    FirstPutLandsThenFails,
    /// Honours conditions, but answers the first PUT with 409 ConditionalRequestConflict
    /// without storing it (what some providers say when two conditional writes overlap).
    FirstPutConflicts,
}

#[derive(Debug, Default)]
struct State {
    objects: HashMap<String, Vec<u8>>,
    puts: usize,
    gets_failed: usize,
    conflicts: usize,
}

#[derive(Debug)]
pub struct StandIn {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    _server: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub async fn start(behaviour: Behaviour) -> StandIn {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let route =
            warp::method().and(warp::path::full()).and(warp::header::headers_cloned()).and(warp::body::bytes()).map(
                move |method: Method, path: warp::path::FullPath, headers: HeaderMap, body: bytes::Bytes| {
                    answer(&shared, behaviour, &method, path.as_str(), &headers, &body)
                },
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(warp::serve(route).incoming(listener).run());
        StandIn { addr, state, _server: server }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The objects stored, by key (bucket included).
    pub fn objects(&self) -> HashMap<String, Vec<u8>> {
        self.state.lock().unwrap().objects.clone()
    }
}

fn etag(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    format!("\"{}\"", digest[..16].iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn error(status: StatusCode, code: &str) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .body(
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{code}</Message></Error>"
            )
            .into_bytes(),
        )
        .unwrap()
}

/// The SDK may send a body as `aws-chunked` (size;signature CRLF data CRLF ... 0 CRLF trailers).
fn decode_body(headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let chunked = headers.get("content-encoding").is_some_and(|v| v.to_str().unwrap_or("").contains("aws-chunked"));
    if !chunked {
        return body.to_vec();
    }
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = std::str::from_utf8(&rest[..line_end]).unwrap_or("0");
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        out.extend_from_slice(&rest[start..start + size]);
        rest = &rest[(start + size + 2).min(rest.len())..];
    }
    out
}

fn answer(
    state: &Mutex<State>,
    behaviour: Behaviour,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response<Vec<u8>> {
    let mut state = state.lock().unwrap();
    let key = path.trim_start_matches('/').to_owned();
    let honours = behaviour != Behaviour::IgnoresConditions;
    let current = state.objects.get(&key).cloned();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let if_none_match_fails = header("if-none-match").as_deref() == Some("*") && current.is_some();
    let if_match_fails = header("if-match").is_some_and(|wanted| current.as_deref().map(etag) != Some(wanted));
    match *method {
        Method::GET if !key.trim_end_matches('/').contains('/') => {
            // ListObjectsV2 on the bucket: this stand-in reports an empty listing.
            let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>";
            Response::builder()
                .status(200)
                .header("content-type", "application/xml")
                .body(xml.as_bytes().to_vec())
                .unwrap()
        }
        Method::GET => {
            if behaviour == Behaviour::FirstPutLandsThenFails && state.puts == 1 && state.gets_failed == 0 {
                state.gets_failed += 1;
                return error(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable");
            }
            match current {
                Some(bytes) => Response::builder().status(200).header("etag", etag(&bytes)).body(bytes).unwrap(),
                None => error(StatusCode::NOT_FOUND, "NoSuchKey"),
            }
        }
        Method::PUT => {
            if honours && (if_none_match_fails || if_match_fails) {
                return error(StatusCode::PRECONDITION_FAILED, "PreconditionFailed");
            }
            if behaviour == Behaviour::FirstPutConflicts && state.conflicts == 0 {
                state.conflicts += 1;
                return error(StatusCode::CONFLICT, "ConditionalRequestConflict");
            }
            let bytes = decode_body(headers, body);
            let tag = etag(&bytes);
            state.objects.insert(key, bytes);
            state.puts += 1;
            if behaviour == Behaviour::FirstPutLandsThenFails && state.puts == 1 {
                return error(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable");
            }
            Response::builder().status(200).header("etag", tag).body(Vec::new()).unwrap()
        }
        Method::DELETE => {
            if honours && behaviour != Behaviour::IgnoresDeleteConditions && if_match_fails {
                return error(StatusCode::PRECONDITION_FAILED, "PreconditionFailed");
            }
            state.objects.remove(&key);
            Response::builder().status(204).body(Vec::new()).unwrap()
        }
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
    }
}
