//! The routes the UI needs besides the rest of the API: agent icons and quick links, through the
//! `swarm-controller` binary on a real nats-server in JWT mode.

mod common;

use common::PNG;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_testkit::{NatsJwt, Process, wait_until};
use serde_json::Value;
use swarmctl::client;

const SOON: Duration = Duration::from_secs(20);

struct Ui {
    nats: NatsJwt,
    dir: tempfile::TempDir,
    _daemon: Process,
}

impl Ui {
    async fn start(extra_env: &[(&str, &str)]) -> Ui {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let hives = dir.path().join("hives.json");
        std::fs::write(&hives, r#"{"h1": {"description": "ui test hive"}}"#).unwrap();
        let mut env = vec![("SWARM_HIVES_FILE", hives.to_str().unwrap())];
        env.extend_from_slice(extra_env);
        let daemon = common::daemon_process(&nats, &dir.path().join("run/controller.sock"), &env).await;
        let status = HiveStatus {
            hive: HiveName::parse("h1").unwrap(),
            version: "0.1.0".into(),
            started_at: "2026-11-30T10:00:00Z".into(),
            published_at: hyperhive_schedule::format_instant(time::OffsetDateTime::now_utc()),
            load: [0.0; 3],
            agents: BTreeMap::from([(
                AgentName::parse("bee").unwrap(),
                common::running_declared("2026-11-30T10:00:00Z"),
            )]),
        };
        common::publish_as_hive(&nats, &status).await;
        let ui = Ui { nats, dir, _daemon: daemon };
        wait_until("bee on the roster", SOON, || async {
            (ui.call(Method::GET, "/api/agents/bee/icon", &[], Bytes::new()).await.0 == StatusCode::OK).then_some(())
        })
        .await
        .unwrap();
        ui
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> (StatusCode, hyper::HeaderMap, Bytes) {
        let mut request = hyper::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let socket = self.dir.path().join("run/controller.sock");
        let request = request.body(Full::new(body)).unwrap();
        let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes();
        (parts.status, parts.headers, bytes)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_icon_is_generated_until_one_is_uploaded_and_answers_304_when_unchanged() {
    let ui = Ui::start(&[]).await;
    let (status, headers, svg) = ui.call(Method::GET, "/api/agents/bee/icon", &[], Bytes::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "image/svg+xml");
    assert_eq!(headers["cache-control"], "no-cache");
    // Never sniffed as another type, and an SVG opened as a page runs nothing.
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("default-src 'none'") && policy.contains("sandbox"), "{policy}");
    assert!(svg.starts_with(b"<svg"));
    let tag = headers["etag"].to_str().unwrap().to_owned();
    let (status, _, body) =
        ui.call(Method::GET, "/api/agents/bee/icon", &[("if-none-match", &tag)], Bytes::new()).await;
    assert_eq!((status, body.len()), (StatusCode::NOT_MODIFIED, 0));

    let (status, _, answer) =
        ui.call(Method::PUT, "/api/agents/bee/icon", &[("content-type", "image/png")], Bytes::from_static(PNG)).await;
    assert_eq!(status, StatusCode::OK, "{answer:?}");
    let (status, headers, png) =
        ui.call(Method::GET, "/api/agents/bee/icon", &[("if-none-match", &tag)], Bytes::new()).await;
    assert_eq!(
        (status, headers["content-type"].to_str().unwrap()),
        (StatusCode::OK, "image/png"),
        "a new icon, a new tag"
    );
    assert_eq!(png.as_ref(), PNG);
    assert_eq!(
        headers["x-content-type-options"], "nosniff",
        "an uploaded icon is served as the PNG it was checked to be"
    );

    let (status, _, answer) = ui.call(Method::DELETE, "/api/agents/bee/icon", &[], Bytes::new()).await;
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!((status, answer["removed"].as_bool()), (StatusCode::OK, Some(true)));
    let (_, headers, again) = ui.call(Method::GET, "/api/agents/bee/icon", &[], Bytes::new()).await;
    assert_eq!((headers["content-type"].to_str().unwrap(), again), ("image/svg+xml", svg), "the same generated icon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_icons_are_refused_and_change_nothing() {
    let ui = Ui::start(&[]).await;
    let truncated = Bytes::copy_from_slice(&PNG[..PNG.len() - 5]);
    let cases: Vec<(&str, &str, Bytes, StatusCode, &str)> = vec![
        (
            "/api/agents/bee/icon",
            "image/gif",
            Bytes::from_static(b"GIF89a"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "image/png",
        ),
        ("/api/agents/bee/icon", "image/png", Bytes::from_static(b"GIF89a"), StatusCode::BAD_REQUEST, "not a PNG"),
        ("/api/agents/bee/icon", "image/png", truncated, StatusCode::BAD_REQUEST, "truncated"),
        (
            "/api/agents/bee/icon",
            "image/png",
            Bytes::from(vec![0u8; 300 * 1024]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "256 KiB",
        ),
        ("/api/agents/nobody/icon", "image/png", Bytes::from_static(PNG), StatusCode::NOT_FOUND, "no agent nobody"),
        ("/api/agents/Bee/icon", "image/png", Bytes::from_static(PNG), StatusCode::BAD_REQUEST, "Bee"),
    ];
    for (path, content_type, body, status, needle) in cases {
        let (got, _, answer) = ui.call(Method::PUT, path, &[("content-type", content_type)], body).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(got, status, "{path} {content_type}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(needle), "{answer}");
    }
    let (status, _, _) = ui.call(Method::POST, "/api/agents/bee/icon", &[], Bytes::new()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (_, headers, _) = ui.call(Method::GET, "/api/agents/bee/icon", &[], Bytes::new()).await;
    assert_eq!(headers["content-type"], "image/svg+xml", "still the generated icon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_links_come_from_their_file_and_a_bad_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let links = dir.path().join("links.json");
    std::fs::write(
        &links,
        r#"[{"title": "Forge", "url": "https://forge.example/swarm", "description": "the swarm's repos"}]"#,
    )
    .unwrap();
    let ui = Ui::start(&[("SWARM_QUICK_LINKS_FILE", links.to_str().unwrap())]).await;
    let request = hyper::Request::builder().uri("/api/quick-links").body(Full::new(Bytes::new())).unwrap();
    let (status, body) = client::send(&ui.dir.path().join("run/controller.sock"), request).await.unwrap();
    let listed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed[0]["title"], "Forge");
    assert_eq!(listed[0]["url"], "https://forge.example/swarm");

    std::fs::write(&links, r#"[{"title": "x", "url": "javascript:alert(1)"}]"#).unwrap();
    let mut refused = Process::builder(env!("CARGO_BIN_EXE_swarm-controller"))
        .env("SWARM_CONTROLLER_SOCKET", dir.path().join("other/controller.sock"))
        .env("SWARM_NATS_URL", ui.nats.url())
        .env("SWARM_QUICK_LINKS_FILE", &links)
        .start("swarm-controller")
        .unwrap();
    let exit = refused.wait_exit(SOON).await.unwrap();
    assert!(!exit.success());
    let log = refused.log();
    assert!(log.contains("SWARM_QUICK_LINKS_FILE") && log.contains("only http:// and https://"), "{log}");
}
