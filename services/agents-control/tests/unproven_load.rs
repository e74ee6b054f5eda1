//! What parties that have proven nothing can cost a copy (`docs/control-plane/security.md`,
//! "Limits and unauthenticated load"): slow clients holding connections, and floods of hellos
//! and pair requests that would each cost store reads. Attackers connect from 127.0.0.2 and
//! 127.0.0.3, real devices from 127.0.0.1 (the whole of 127/8 is loopback).

mod http_client;
mod link_client;

use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::key::ControlKey;
use ed25519_dalek::SigningKey;
use hyperhive_control_proto::link::{LINK_PROTOCOL_VERSION, LinkFrame};
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_control_proto::{DeviceKind, encoding};
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_testkit::{Process, free_port, wait_until};
use link_client::{Device, ServedCopy, Socket};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::MaybeTlsStream;

const SEED: [u8; 32] = [0x5a; 32];
const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const OTHER_ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

async fn connect_from(local: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(local, 0))?;
    socket.connect(to).await
}

/// A WebSocket to `/v1/link` from `local`.
async fn open_link_from(local: IpAddr, to: SocketAddr) -> Socket {
    let stream = connect_from(local, to).await.unwrap();
    let config = hyperhive_control_link::websocket_config();
    let url = format!("ws://{to}/v1/link");
    let (socket, _) =
        tokio_tungstenite::client_async_with_config(url, MaybeTlsStream::Plain(stream), Some(config)).await.unwrap();
    socket
}

/// One slow client: opens a connection from `local` and sends either a request head or a pair
/// body one byte every 200 ms, reconnecting whenever the copy drops it, until `stop`.
async fn slow_client(local: IpAddr, to: SocketAddr, body_too: bool, stop: Arc<AtomicBool>, opened: Arc<AtomicUsize>) {
    let head = b"POST /v1/pair HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n";
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = connect_from(local, to).await else {
            tokio::time::sleep(Duration::from_millis(50)).await; // the attacker's own pace
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        if body_too && stream.write_all(head).await.is_err() {
            continue;
        }
        let trickle: &[u8] = if body_too { b"{" } else { head };
        let mut bytes = trickle.iter().cycle();
        while !stop.load(Ordering::Relaxed) {
            if stream.write_all(&[*bytes.next().unwrap()]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await; // the attack is to be slow
        }
    }
}

/// A device pairs through `/v1/pair` and links, as a real one does; panics past `within`.
async fn pair_and_link(addr: SocketAddr, store: &dyn Store, key: &ControlKey, n: usize, within: Duration) {
    let issuer = Issuer { key: key.clone(), control_url: format!("http://{addr}"), pin: None };
    let request =
        CodeRequest { kind: DeviceKind::Host, name: None, role: None, ttl: codes::DEFAULT_TTL, made_by: "test".into() };
    let code = codes::make_code(store, &SystemClock, &issuer, &request).await.unwrap();
    let device_key = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let body = serde_json::to_vec(&PairRequest::sign(&code.to_token(), &device_key, &format!("real {n}"))).unwrap();
    let (status, reply) = tokio::time::timeout(within, http_client::post_json(addr, "/v1/pair", body))
        .await
        .unwrap_or_else(|_| panic!("device {n} could not pair within {within:?} during the attack"));
    assert_eq!(status, 200, "{reply}");
    let device =
        Device { id: reply["device_id"].as_str().unwrap().to_owned(), kind: DeviceKind::Host, key: device_key };
    let (_socket, verdict) = tokio::time::timeout(within, link_client::try_connect(addr, &device, SEED))
        .await
        .unwrap_or_else(|_| panic!("device {n} could not link within {within:?} during the attack"));
    verdict.unwrap();
}

/// Slow clients on one address (half trickling request heads, half pair bodies) try to take
/// every socket a copy can hold (its open-file limit is 256 here, as systemd's 1,024 is in
/// production); real devices on another address still pair and link within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cannot_starve_real_devices() {
    let dir = tempfile::tempdir().unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut copy = Process::builder("prlimit")
        .args(["--nofile=256:256", "--", env!("CARGO_BIN_EXE_agents-control"), "serve"])
        .args(["--listen", &addr.to_string()])
        .env("AGENTS_STORE", format!("file://{}", dir.path().display()))
        .env("AGENTS_CONTROL_KEY", encoding::encode(&SEED))
        .env("AGENTS_CONTROL_URL", "https://agents.example.com")
        .env("AGENTS_CONTROL_MAX_CONNECTIONS_PER_ADDRESS", "40")
        .start("copy")
        .unwrap();
    copy.wait_for_http_ok(addr, "/readyz", Duration::from_secs(30)).await.unwrap();

    let (stop, opened) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    // More slow clients than the copy has sockets.
    const SLOW_CLIENTS: usize = 400;
    let attack: Vec<_> = (0..SLOW_CLIENTS)
        .map(|n| tokio::spawn(slow_client(ATTACKER, addr, n % 2 == 0, stop.clone(), opened.clone())))
        .collect();
    wait_until("every slow client to have connected", Duration::from_secs(30), || {
        let opened = opened.load(Ordering::Relaxed);
        async move { (opened >= SLOW_CLIENTS).then_some(()) }
    })
    .await
    .unwrap();

    let store = FileStore::open(dir.path()).unwrap();
    let key = ControlKey::from_seed(SEED);
    let started = Instant::now();
    for n in 0..5 {
        pair_and_link(addr, &store, &key, n, Duration::from_secs(5)).await;
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for task in attack {
        task.abort();
    }
    let status = hyperhive_testkit::process::http_status(addr, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    eprintln!("5 devices paired and linked in {took:?} during the attack");
    assert!(copy.log().len() < 2_000_000, "the attack flooded the log");
}

/// A copy's store reads for unproven requests: hellos naming unknown devices and pair requests
/// with self-made codes, from two addresses. Without a budget every one costs GETs (and a flood
/// makes S3 throttle every copy); with it they are bounded by the budget, an unknown id asked
/// again costs nothing, and a real device on another address still gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_of_unknown_hellos_and_bogus_codes_cost_a_bounded_number_of_store_reads() {
    let copy = ServedCopy::on_file_store(SEED, false).await;
    let gets = || copy.control.metrics.store_operations("get");
    let before = gets();
    let started = Instant::now();

    let hello = |device_id: String| LinkFrame::Hello {
        version: LINK_PROTOCOL_VERSION,
        device_id,
        device_nonce: encoding::encode(&[1; 32]),
        signature: encoding::encode(&[2; 64]),
    };
    let repeated = format!("d{}", "7".repeat(32));
    let mut refused = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..300 {
        let mut socket = open_link_from(ATTACKER, copy.addr).await;
        link_client::next_frame(&mut socket).await; // the challenge
        let id = if n % 2 == 0 { format!("d{:032x}", rand::random::<u128>()) } else { repeated.clone() };
        link_client::send(&mut socket, &hello(id)).await;
        let (code, _) = link_client::next_close(&mut socket).await;
        *refused.entry(code).or_default() += 1;
    }
    let key = ControlKey::from_seed(SEED);
    let mut busy = 0;
    for _ in 0..100 {
        let bogus = hyperhive_control_proto::code::Code {
            control_url: format!("http://{}", copy.addr),
            control_public_key: key.public_key(),
            pin: None,
            kind: DeviceKind::Client,
            secret: rand::random(),
        };
        let request = PairRequest::sign(&bogus.to_token(), &SigningKey::from_bytes(&[3; 32]), "x");
        let stream = connect_from(OTHER_ATTACKER, copy.addr).await.unwrap();
        let (status, _) = post_on(stream, serde_json::to_vec(&request).unwrap()).await;
        assert!(status == 404 || status == 429, "{status}");
        busy += usize::from(status == 429);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let spent = gets() - before;
    // Per address: a 2 s burst at 5/s, then 5/s. A hello costs at most one GET, a pair request 3.
    let per_address = (10.0 + 5.0 * elapsed).ceil() as u64;
    eprintln!("{spent} store GETs for 300 hellos and 100 pair requests in {elapsed:.1}s; hellos closed {refused:?}");
    assert!(spent <= per_address * 4, "{spent} GETs for the flood in {elapsed:.1}s: more than {}", per_address * 4);
    assert!(busy > 0 && refused.len() == 2, "hellos refused {refused:?}, pairs refused as busy {busy}");
    assert!(copy.control.metrics.render().contains("agents_control_lookups_refused_total"));

    // A device that paired through another copy (this one has not seen it) still gets in.
    let device = copy.pair_in_store_only(DeviceKind::Host, "real").await;
    let (_socket, verdict) = link_client::try_connect(copy.addr, &device, SEED).await;
    verdict.unwrap();
}

/// POSTs `/v1/pair` on an open connection; the status and the body.
async fn post_on(stream: TcpStream, body: Vec<u8>) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    let driver = tokio::spawn(connection);
    let request = hyper::Request::post("/v1/pair")
        .header("host", "x")
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    driver.abort();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A pair body that trickles in is cut off at the request timeout with a 408 saying why, and the
/// copy counts it.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
    let limits = agents_control::limits::Limits {
        request_timeout: Duration::from_millis(300),
        ..agents_control::limits::Limits::default()
    };
    let control = Arc::new(
        agents_control::control::Control::new(store, ControlKey::from_seed(SEED), Arc::new(SystemClock))
            .with_limits(limits),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(agents_control::server::serve(control.clone(), listener, std::future::pending()));

    let mut stream = connect_from(ATTACKER, addr).await.unwrap();
    stream.write_all(b"POST /v1/pair HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{").await.unwrap();
    let started = Instant::now();
    let mut answer = vec![0; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("an answer, not a connection held open")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 0.3s"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(control.metrics.render().contains("agents_control_requests_timed_out_total 1\n"));
    server.abort();
}
