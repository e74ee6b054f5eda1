//! Round trips through every server the kit starts, and proof that nothing outlives its handle.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use hyperhive_testkit::{Caddy, ChaosProxy, Nats, Process, S3, S3Server, Signal, Synapse, free_port, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// The kit promises each server starts "well under 10 seconds".
const START_BUDGET: Duration = Duration::from_secs(10);

fn process_exists(pid: u32) -> bool {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits i32"));
    // Signal 0 checks existence; a reaped child is gone (ESRCH).
    nix::sys::signal::kill(pid, None).is_ok()
}

#[tokio::test]
async fn nats_round_trips_a_message_and_rejects_a_stale_kv_revision() {
    let started = Instant::now();
    let nats = Nats::start().await.expect("start nats");
    assert!(started.elapsed() < START_BUDGET, "nats took {:?}", started.elapsed());

    let client = async_nats::connect(nats.url()).await.expect("connect");
    let mut sub = client.subscribe("kit.test").await.expect("subscribe");
    client.flush().await.expect("flush");
    client.publish("kit.test", "hello".into()).await.expect("publish");
    let msg =
        tokio::time::timeout(Duration::from_secs(5), sub.next()).await.expect("message in time").expect("message");
    assert_eq!(&msg.payload[..], b"hello");

    let js = async_nats::jetstream::new(client);
    let kv = js
        .create_key_value(async_nats::jetstream::kv::Config { bucket: "kit".into(), ..Default::default() })
        .await
        .expect("create bucket");
    let rev = kv.create("key", "one".into()).await.expect("create key");
    assert!(kv.create("key", "again".into()).await.is_err(), "create of an existing key must fail");
    let err = kv.update("key", "stale".into(), rev + 10).await.expect_err("a wrong revision must be rejected");
    assert_eq!(err.kind(), async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision);
    kv.update("key", "two".into(), rev).await.expect("update with the right revision");
    assert_eq!(kv.get("key").await.expect("get").as_deref(), Some(&b"two"[..]));
}

#[tokio::test]
async fn nats_restarts_on_the_same_port_with_its_store() {
    let mut nats = Nats::start().await.expect("start nats");
    let port = nats.port();
    {
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("connect"));
        let kv = js
            .create_key_value(async_nats::jetstream::kv::Config { bucket: "kept".into(), ..Default::default() })
            .await
            .expect("create bucket");
        kv.put("key", "survives".into()).await.expect("put");
    }
    nats.stop();
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err(), "a stopped server must not listen");
    nats.start_again().await.expect("start again");
    assert_eq!(nats.port(), port);
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("reconnect"));
    let kv = js.get_key_value("kept").await.expect("bucket survives a restart");
    assert_eq!(kv.get("key").await.expect("get").as_deref(), Some(&b"survives"[..]));
}

#[tokio::test]
async fn s3_honours_conditional_create_and_replace() {
    for server in S3Server::ALL {
        s3_conditional_writes(server).await;
    }
}

async fn s3_conditional_writes(server: S3Server) {
    let started = Instant::now();
    let s3 = S3::start(server).await.expect("start s3");
    assert_eq!(s3.server(), server);
    // SeaweedFS runs four servers and elects a master before it takes a write.
    let budget = if server == S3Server::SeaweedFs { 3 * START_BUDGET } else { START_BUDGET };
    assert!(started.elapsed() < budget, "{server} took {:?}", started.elapsed());
    let client = s3.client();
    let put =
        |body: &'static str| client.put_object().bucket(s3.bucket()).key("probe").body(body.as_bytes().to_vec().into());

    let first = put("one").if_none_match("*").send().await.expect("first create");
    let etag = first.e_tag().expect("etag").to_owned();
    let second = put("two").if_none_match("*").send().await.expect_err("second create must fail");
    assert_eq!(second.raw_response().map(|r| r.status().as_u16()), Some(412), "{server}");

    let replaced = put("three").if_match(&etag).send().await.expect("replace with the current etag");
    let stale = put("four").if_match(&etag).send().await.expect_err("replace with a stale etag must fail");
    assert_eq!(stale.raw_response().map(|r| r.status().as_u16()), Some(412), "{server}");

    let got = client.get_object().bucket(s3.bucket()).key("probe").send().await.expect("get");
    assert_eq!(got.e_tag(), replaced.e_tag());
    let body = got.body.collect().await.expect("body").into_bytes();
    assert_eq!(&body[..], b"three");

    let env = s3.env();
    assert!(env.iter().any(|(k, v)| k == "AGENTS_STORE_ENDPOINT" && *v == s3.endpoint()));
    assert!(env.iter().any(|(k, v)| k == "AWS_ACCESS_KEY_ID" && v == s3.access_key()));
    assert_eq!(s3.store_url("cp"), format!("s3://{}/cp", s3.bucket()));
}

#[tokio::test]
async fn seaweedfs_refuses_a_key_it_does_not_know() {
    let s3 = S3::start(S3Server::SeaweedFs).await.expect("start seaweedfs");
    let config = s3.client().config().to_builder().credentials_provider(aws_sdk_s3::config::Credentials::new(
        "someone-else",
        "not-the-secret",
        None,
        None,
        "test",
    ));
    let stranger = aws_sdk_s3::Client::from_conf(config.build());
    let err = stranger.list_objects_v2().bucket(s3.bucket()).send().await.expect_err("an unknown key is refused");
    assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(403), "{err:?}");
}

#[tokio::test]
async fn a_paused_s3_answers_nothing_until_resumed() {
    for server in S3Server::ALL {
        let mut s3 = S3::start(server).await.expect("start s3");
        s3.pause().expect("pause");
        let frozen = tokio::time::timeout(Duration::from_millis(500), s3.client().list_buckets().send()).await;
        assert!(frozen.is_err(), "a paused {server} must not answer: {frozen:?}");
        s3.resume().expect("resume");
        let listed = s3.client().list_buckets().send().await.expect("answers after resume");
        assert!(listed.buckets().iter().any(|b| b.name() == Some(s3.bucket())), "{server}");
    }
}

/// A small upstream: `GET /hello` and a WebSocket echo on `/ws`.
async fn upstream() -> SocketAddr {
    use warp::Filter;
    let hello = warp::path("hello").map(|| "hello from upstream");
    let ws = warp::path("ws").and(warp::ws()).map(|ws: warp::ws::Ws| {
        ws.on_upgrade(|socket| async move {
            let (tx, rx) = socket.split();
            let _ = rx.forward(tx).await;
        })
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(warp::serve(hello.or(ws)).incoming(listener).run());
    addr
}

async fn http_get_body(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test]
async fn caddy_proxies_http_and_websockets() {
    let upstream = upstream().await;
    let port = free_port();
    let started = Instant::now();
    let _caddy = Caddy::start(&format!("http://127.0.0.1:{port} {{\n\treverse_proxy {upstream}\n}}"), &[port])
        .await
        .expect("start caddy");
    assert!(started.elapsed() < START_BUDGET, "caddy took {:?}", started.elapsed());

    let response = http_get_body(SocketAddr::from(([127, 0, 0, 1], port)), "/hello").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("hello from upstream"), "{response}");

    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/ws")).await.expect("websocket through caddy");
    ws.send(Message::text("ping through caddy")).await.expect("send");
    let echoed = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("echo in time")
        .expect("frame")
        .expect("ok");
    assert_eq!(echoed, Message::text("ping through caddy"));
}

async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = socket.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

async fn round_trip(stream: &mut TcpStream, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(payload).await?;
    let mut back = vec![0u8; payload.len()];
    stream.read_exact(&mut back).await?;
    Ok(back)
}

#[tokio::test]
async fn chaos_proxy_passes_stalls_and_cuts_mid_stream() {
    let proxy = ChaosProxy::start(echo_server().await).await.expect("start proxy");
    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(round_trip(&mut stream, b"first").await.expect("pass"), b"first");
    assert_eq!(proxy.live_connections(), 1);

    proxy.stall();
    stream.write_all(b"held").await.expect("write while stalled");
    let mut held = [0u8; 4];
    let silent = tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut held)).await;
    assert!(silent.is_err(), "a stalled proxy must not deliver");
    proxy.pass();
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut held))
        .await
        .expect("delivered after pass")
        .expect("read");
    assert_eq!(&held, b"held");

    proxy.cut();
    let mut rest = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await.expect("closed in time");
    assert!(closed.is_err() || rest.is_empty(), "a cut connection must end: {closed:?} {rest:?}");
    wait_until("no live connections", Duration::from_secs(5), || async {
        (proxy.live_connections() == 0).then_some(())
    })
    .await
    .expect("cut connections are gone");
    let mut refused = TcpStream::connect(proxy.addr()).await.expect("the listener stays up");
    assert!(round_trip(&mut refused, b"x").await.is_err(), "new connections are closed while cut");

    proxy.pass();
    let mut again = TcpStream::connect(proxy.addr()).await.expect("connect after pass");
    assert_eq!(round_trip(&mut again, b"again").await.expect("pass again"), b"again");
}

#[tokio::test]
async fn synapse_serves_the_client_api_and_leaves_nothing_behind() {
    let started = Instant::now();
    let mut synapse = Synapse::start().await.expect("start synapse");
    eprintln!("synapse ready (admin registered) in {:?}", started.elapsed());
    let versions: serde_json::Value = reqwest::get(format!("{}/_matrix/client/versions", synapse.base_url()))
        .await
        .expect("versions")
        .json()
        .await
        .expect("json");
    assert!(versions["versions"].as_array().is_some_and(|v| !v.is_empty()), "{versions}");
    assert_eq!(synapse.user_id("a"), format!("@a:{}", synapse.server_name()));
    let err = synapse.deactivate(&synapse.user_id("nobody")).await.expect_err("no such user");
    assert!(err.to_string().contains("admin API answered 404"), "{err:#}");

    let pid = synapse.process().pid();
    let dir = synapse.dir().to_path_buf();
    assert!(dir.join("homeserver.db").exists());
    drop(synapse);
    assert!(!process_exists(pid), "synapse {pid} outlived its handle");
    assert!(!dir.exists(), "{} outlived its handle", dir.display());
}

#[tokio::test]
async fn dropping_a_handle_leaves_no_process_and_no_temp_dir() {
    let mut nats = Nats::start().await.expect("start nats");
    let pid = nats.process().expect("running").pid();
    let dir = nats.dir().to_path_buf();
    assert!(process_exists(pid) && dir.exists());
    drop(nats);
    assert!(!process_exists(pid), "nats-server {pid} outlived its handle");
    assert!(!dir.exists(), "{} outlived its handle", dir.display());

    for server in S3Server::ALL {
        let mut s3 = S3::start(server).await.expect("start s3");
        let pid = s3.process().pid();
        s3.pause().expect("pause");
        drop(s3);
        assert!(!process_exists(pid), "a paused {server} {pid} outlived its handle");
    }
}

#[test]
fn a_panicking_test_still_kills_its_processes() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let process = Process::builder("sleep").arg("1000").start("sleeper").expect("start sleep");
        tx.send(process.pid()).expect("send pid");
        panic!("the test fails while the process runs");
    })
    .join();
    assert!(outcome.is_err());
    let pid = rx.recv().expect("pid");
    assert!(!process_exists(pid), "sleep {pid} outlived a panicking test");
}

#[tokio::test]
async fn process_waits_see_logs_signals_and_exits() {
    let mut process = Process::builder("sh")
        .args(["-c", "echo ready; trap 'echo got-term; exit 7' TERM; while :; do sleep 0.05; done"])
        .start("shell")
        .expect("start sh");
    process.wait_for_log("ready", Duration::from_secs(5)).await.expect("log line");
    process.signal(Signal::SIGTERM).expect("term");
    let status = process.wait_exit(Duration::from_secs(5)).await.expect("exits");
    assert_eq!(status.code(), Some(7));
    assert!(process.log().contains("got-term"));

    let mut quick = Process::builder("true").start("true").expect("start true");
    let err = quick.wait_for_log("never printed", Duration::from_secs(5)).await.expect_err("exited first");
    assert!(format!("{err:#}").contains("exited"), "{err:#}");
}
