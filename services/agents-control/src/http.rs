//! The HTTP routes of a copy: `/healthz`, `/readyz`, `/metrics`, `POST /v1/pair` and
//! `POST /v1/recheck/<device id>` (read a device's record now: how a forget made with the
//! command line reaches every copy at once). The two
//! WebSockets, the device link `GET /v1/link` ([`crate::link`]) and the link between copies
//! `GET /v1/peer` ([`crate::peer_link`]), are upgraded by [`crate::server`] in front of these.
//! Every error is JSON `{"error": "..."}` with a fitting 4xx or 503 status; nothing a client
//! sends produces a 500 or a panic.

use crate::control::Control;
use crate::pairing;
use hyperhive_control_proto::ErrorBody;
use hyperhive_control_proto::pair::{PairRequest, PairResponse};
use std::convert::Infallible;
use std::sync::Arc;
use warp::http::StatusCode;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

/// A pair request is a few hundred bytes; refuse anything far larger before reading it. No
/// other route takes a body.
pub const MAX_BODY: u64 = 16 * 1024;

/// The address a request came from, set by [`crate::server`] (absent in in-process tests).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub std::net::IpAddr);

pub fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    warp::reply::with_status(warp::reply::json(&ErrorBody { error: message.into() }), status).into_response()
}

/// Every route of a copy.
pub fn routes(
    control: Arc<Control>,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    let with_control = {
        let control = control.clone();
        warp::any().map(move || control.clone())
    };
    let healthz = warp::path!("healthz")
        .and(warp::get())
        .map(|| warp::reply::with_status("ok\n", StatusCode::OK).into_response());
    let readyz = warp::path!("readyz").and(warp::get()).and(with_control.clone()).map(|control: Arc<Control>| {
        match control.readiness() {
            Ok(()) => warp::reply::with_status("ready\n", StatusCode::OK).into_response(),
            Err(reason) => warp::reply::with_status(format!("not ready: {reason}\n"), StatusCode::SERVICE_UNAVAILABLE)
                .into_response(),
        }
    });
    let metrics = warp::path!("metrics").and(warp::get()).and(with_control.clone()).map(|control: Arc<Control>| {
        let mut text = control.metrics.render_with(control.sessions.counts());
        text.push_str(&format!(
            "# HELP agents_control_open_connections Connections held now (devices, peers, HTTP), against \
             AGENTS_CONTROL_MAX_CONNECTIONS.\n# TYPE agents_control_open_connections gauge\n\
             agents_control_open_connections {}\n",
            control.guards.gate.open()
        ));
        warp::reply::with_header(text, "content-type", "text/plain; version=0.0.4").into_response()
    });
    let pair = warp::path!("v1" / "pair")
        .and(warp::post())
        .and(warp::body::content_length_limit(MAX_BODY))
        .and(warp::body::bytes())
        .and(warp::ext::optional::<ClientAddress>())
        .and(with_control.clone())
        .then(|body: bytes::Bytes, from: Option<ClientAddress>, control: Arc<Control>| async move {
            pair(&control, &body, from.map(|a| a.0)).await
        });
    let recheck = warp::path!("v1" / "recheck" / String)
        .and(warp::post())
        .and(warp::ext::optional::<ClientAddress>())
        .and(with_control)
        .then(|device_id: String, from: Option<ClientAddress>, control: Arc<Control>| async move {
            recheck(&control, &device_id, from.map(|a| a.0)).await
        });
    healthz.or(readyz).unify().or(metrics).unify().or(pair).unify().or(recheck).unify().recover(recover).unify()
}

/// The answer to `POST /v1/recheck/<device id>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rechecked {
    pub device_id: String,
    /// Whether the store holds the device as paired; when not, this copy has cut it and told
    /// its peers.
    pub paired: bool,
    /// The copy that answered.
    pub copy: String,
}

/// How long a recheck may wait on the store before it is answered 503.
const RECHECK_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

async fn recheck(control: &Control, device_id: &str, from: Option<std::net::IpAddr>) -> Response {
    if !crate::records::is_device_id(device_id) {
        return json_error(
            StatusCode::BAD_REQUEST,
            format!("{device_id:?} is not a device id (d followed by 32 hex digits)"),
        );
    }
    // Anyone who reaches the route can ask (it proves nothing), so its store reads are bounded
    // by a budget of their own.
    if !control.guards.rechecks.take(from, std::time::Instant::now()) {
        control.metrics.lookups_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let busy = json_error(StatusCode::TOO_MANY_REQUESTS, "too many rechecks reach this copy just now: try again");
        return warp::reply::with_header(busy, "retry-after", "2").into_response();
    }
    match tokio::time::timeout(RECHECK_WITHIN, control.recheck(device_id)).await {
        Ok(Ok(paired)) => {
            warp::reply::json(&Rechecked { device_id: device_id.to_owned(), paired, copy: control.copy_name.clone() })
                .into_response()
        }
        Ok(Err(error)) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store did not answer ({error}): this copy rechecks every device at its next refresh"),
        ),
        Err(_) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the store did not answer within {}s: this copy rechecks every device at its next refresh",
                RECHECK_WITHIN.as_secs()
            ),
        ),
    }
}

async fn pair(control: &Control, body: &[u8], from: Option<std::net::IpAddr>) -> Response {
    let request: PairRequest = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(error) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("malformed pair request ({error}): send JSON with code, public_key, name and proof"),
            );
        }
    };
    // A well-formed request costs store reads before anything is proven (anyone can make a code
    // that looks right): they come out of the copy's lookup budget.
    if !control.guards.lookups.take(from, std::time::Instant::now()) {
        control.metrics.lookups_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let busy = json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "too many pairing attempts reach this copy just now: try again in a few seconds",
        );
        return warp::reply::with_header(busy, "retry-after", "2").into_response();
    }
    match pairing::redeem(control.store.as_ref(), control.clock.as_ref(), &control.key, &request).await {
        Ok(redeemed) => {
            control.metrics.devices_paired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Before the answer: by the time the device uses its pairing, every linked copy
            // knows it.
            control.paired(&redeemed.record, &redeemed.version);
            let response = PairResponse { control_name: control.name.clone(), ..redeemed.response };
            warp::reply::json(&response).into_response()
        }
        Err(error) => {
            let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
            if status.is_server_error() {
                tracing::warn!(%error, "pairing refused");
            } else {
                tracing::info!(%error, "pairing refused");
            }
            json_error(status, error.to_string())
        }
    }
}

async fn recover(rejection: Rejection) -> Result<Response, Infallible> {
    let response = if rejection.is_not_found() {
        json_error(StatusCode::NOT_FOUND, "no such route: see docs/control-plane/protocol.md")
    } else if rejection.find::<warp::reject::PayloadTooLarge>().is_some() {
        json_error(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {MAX_BODY} bytes"))
    } else if rejection.find::<warp::reject::LengthRequired>().is_some() {
        json_error(StatusCode::LENGTH_REQUIRED, "send a Content-Length header")
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
    } else {
        json_error(StatusCode::BAD_REQUEST, format!("bad request: {rejection:?}"))
    };
    Ok(response)
}
