//! The terminal feed routes against a real nats-server in JWT mode: a real hive-agent's turn output and
//! turn headers reach server-sent event watchers; an agent publishing with its own credential
//! feeds the stream; watchers resume by `Last-Event-ID` exactly, also across a controller
//! restart; a stalled watcher is dropped while a healthy one keeps up; a hundred watchers of one
//! agent share one NATS consumer, and are let go when they close; a watcher's connection is
//! answered apart from hyper, framed by its HTTP version.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::{Controller, Options, directory, publish_as_hive};
use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_testkit::{Process, SseClient, SseEvent as Sse, project_binary, wait_until};
use serde_json::Value;

const SOON: Duration = Duration::from_secs(20);
/// How soon a watcher that closed is let go: well before the next keep-alive (15 s) would find
/// its connection closed.
const LET_GO: Duration = Duration::from_secs(5);

/// A watcher of one SSE route.
struct Watcher(SseClient);

impl Watcher {
    async fn open(socket: &Path, path: &str, last_event_id: Option<u64>) -> Watcher {
        let (status, client) = SseClient::open(socket, path, last_event_id).await.unwrap();
        assert_eq!(status, StatusCode::OK, "{path}");
        Watcher(client)
    }

    async fn next(&mut self) -> Option<Sse> {
        self.0.next().await
    }

    async fn take(&mut self, n: usize) -> Vec<Sse> {
        self.0.take(n, SOON).await.unwrap()
    }
}

fn text_of(event: &Sse) -> String {
    let value: Value = serde_json::from_str(&event.data).unwrap();
    value["text"].as_str().unwrap().to_owned()
}

fn status_of(hive: &str, agents: &[&str]) -> HiveStatus {
    let status = common::running_declared("2026-11-30T11:00:00Z");
    HiveStatus {
        hive: HiveName::parse(hive).unwrap(),
        version: "0.1.0".into(),
        started_at: "2026-11-30T10:00:00Z".into(),
        published_at: hyperhive_schedule::format_instant(time::OffsetDateTime::now_utc()),
        load: [0.0; 3],
        agents: agents.iter().map(|a| (AgentName::parse(a).unwrap(), status.clone())).collect::<BTreeMap<_, _>>(),
    }
}

/// A controller whose roster holds `agents` (on hive h1).
async fn controller_with(agents: &[&str]) -> Controller {
    let c = Controller::start_with(Options { hives: directory(&["h1"]), ..Options::new(1) }).await;
    publish_as_hive(&c.nats, &status_of("h1", agents)).await;
    wait_until("the roster", SOON, || async {
        let (status, _) = c.call(Method::GET, &format!("/api/agents/{}/turn", "nobody-yet"), &[], "").await.ok()?;
        let roster = c.json(Method::GET, "/api/agents", &Value::Null).await.1;
        (status == StatusCode::NOT_FOUND && roster.as_array()?.len() == agents.len()).then_some(())
    })
    .await
    .unwrap();
    c
}

/// A NATS client signed in as `agent`, publishing where its credential allows.
async fn as_agent(c: &Controller, agent: &str) -> async_nats::Client {
    c.nats.agent_client(agent).await.unwrap()
}

async fn publish_lines(client: &async_nats::Client, agent: &str, from: usize, to: usize) {
    for i in from..to {
        client.publish(format!("term.{agent}"), format!("line {i}\n").into()).await.unwrap();
    }
    client.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_turn_is_watched_live_and_a_watcher_resumes_exactly_even_after_a_restart() {
    let mut c = controller_with(&["bee"]).await;
    let creds = c.nats.mint_agent("bee").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut agent = Process::builder(project_binary("hive-agent").unwrap())
        .env("HIVE_AGENT_NAME", "bee")
        .env("HIVE_AGENT_NATS_URL", c.nats.url())
        .env("HIVE_AGENT_CREDS", creds)
        .env("HIVE_AGENT_STATE_DIR", state.path())
        .env("HIVE_AGENT_TURN_COMMAND", "for i in 1 2 3; do echo \"step $i of $(cat | head -c 20)\"; sleep 0.3; done")
        .env("NO_COLOR", "1")
        .start("hive-agent-bee")
        .unwrap();
    agent.wait_for_log("consuming todos", SOON).await.unwrap();

    let mut turns = Watcher::open(&c.socket, "/api/agents/bee/turn", None).await;
    let idle = turns.take(1).await;
    assert!(idle[0].data.contains("\"state\":\"idle\""), "{idle:?}");
    let mut terminal = Watcher::open(&c.socket, "/api/agents/bee/terminal", None).await;
    let js = async_nats::jetstream::new(as_agent(&c, "bee").await);
    let todo = serde_json::json!({"id": "t-1", "source": "test", "body": "hello"}).to_string();
    js.publish("todo.bee", todo.into()).await.unwrap().await.unwrap();

    let working = turns.take(1).await;
    assert!(working[0].data.contains("\"state\":\"working\"") && working[0].data.contains("\"todo_id\":\"t-1\""));
    // The first line arrives while the turn still runs: live, not at its end.
    let first = terminal.take(1).await;
    assert!(text_of(&first[0]).contains("step 1"), "{first:?}");
    let header_now = Watcher::open(&c.socket, "/api/agents/bee/turn", None).await.take(1).await;
    assert!(header_now[0].data.contains("working"), "the turn still runs: {header_now:?}");
    let rest: String = {
        let mut text = String::new();
        while !text.contains("step 3") {
            text.push_str(&text_of(&terminal.take(1).await[0]));
        }
        text
    };
    assert!(rest.contains("step 2"), "{rest}");
    let done = turns.take(1).await;
    assert!(done[0].data.contains("\"state\":\"idle\""), "{done:?}");

    // Resume: a watcher that saw up to event k gets exactly the events after it.
    drop(terminal);
    let bee = as_agent(&c, "bee").await;
    publish_lines(&bee, "bee", 0, 50).await;
    let mut all = Watcher::open(&c.socket, "/api/agents/bee/terminal", None).await;
    let history = all.take(53).await.into_iter().filter(|e| text_of(e).starts_with("line ")).collect::<Vec<_>>();
    assert_eq!(history.len(), 50);
    let cut = history[19].id.unwrap();
    let mut resumed = Watcher::open(&c.socket, "/api/agents/bee/terminal", Some(cut)).await;
    let after = resumed.take(30).await;
    assert_eq!(
        after.iter().map(text_of).collect::<Vec<_>>(),
        (20..50).map(|i| format!("line {i}\n")).collect::<Vec<_>>()
    );
    publish_lines(&bee, "bee", 50, 55).await;
    let live = resumed.take(5).await;
    assert_eq!(text_of(&live[0]), "line 50\n");
    assert!(live.windows(2).all(|w| w[0].id < w[1].id), "in order: {live:?}");

    // The controller restarts: the watcher's answer ends, and resuming from its last id
    // continues with nothing missed or repeated.
    let last_seen = live[4].id.unwrap();
    c.stop().await.unwrap();
    assert_eq!(resumed.next().await, None, "the answer ended with the controller");
    publish_lines(&bee, "bee", 55, 60).await;
    c.restart().await;
    let mut again = Watcher::open(&c.socket, "/api/agents/bee/terminal", Some(last_seen)).await;
    let after_restart = again.take(5).await;
    assert_eq!(
        after_restart.iter().map(text_of).collect::<Vec<_>>(),
        (55..60).map(|i| format!("line {i}\n")).collect::<Vec<_>>()
    );
    agent.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watcher_is_dropped_while_a_healthy_one_keeps_up() {
    let c = controller_with(&["bee"]).await;
    let bee = as_agent(&c, "bee").await;
    // A watcher that sends its request and never reads.
    let stalled = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    stalled.writable().await.unwrap();
    stalled.try_write(b"GET /api/agents/bee/terminal HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let mut healthy = Watcher::open(&c.socket, "/api/agents/bee/terminal", None).await;
    wait_until("two watchers", SOON, || async { metrics(&c).await.contains("swarm_feed_watchers 2").then_some(()) })
        .await
        .unwrap();
    let chunk = "x".repeat(8 * 1024);
    let total = 2_000;
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while seen.len() < total {
            let event = tokio::time::timeout(SOON, healthy.next()).await.expect("the healthy watcher stalled").unwrap();
            seen.push(event.id.unwrap());
        }
        (seen, healthy)
    });
    // 16 MiB at about 8 MiB/s: a pace a reading watcher keeps up with, which fills a stalled
    // one's buffers within a second.
    for batch in 0..total / 50 {
        for _ in 0..50 {
            bee.publish("term.bee", chunk.clone().into()).await.unwrap();
        }
        bee.flush().await.unwrap();
        if batch % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    bee.flush().await.unwrap();
    // Kept open: it is still watching when the stalled one is dropped.
    let (seen, _healthy) = reader.await.unwrap();
    assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "the healthy watcher missed or repeated nothing");
    wait_until("the stalled watcher dropped", SOON, || async {
        let text = metrics(&c).await;
        (text.contains("swarm_feed_dropped_total 1") && text.contains("swarm_feed_watchers 1")).then_some(())
    })
    .await
    .unwrap();
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_watchers_of_one_agent_share_one_consumer() {
    let c = controller_with(&["bee"]).await;
    let bee = as_agent(&c, "bee").await;
    let mut watchers = Vec::new();
    for _ in 0..100 {
        watchers.push(Watcher::open(&c.socket, "/api/agents/bee/terminal", None).await);
    }
    wait_until("100 watchers", SOON, || async { metrics(&c).await.contains("swarm_feed_watchers 100").then_some(()) })
        .await
        .unwrap();
    publish_lines(&bee, "bee", 0, 20).await;
    for watcher in &mut watchers {
        let got = watcher.take(20).await;
        assert_eq!(text_of(&got[19]), "line 19\n");
    }
    let info = c.js.get_stream("RELAY").await.unwrap().info().await.unwrap().clone();
    assert_eq!(info.state.consumer_count, 1, "one consumer for the subject, however many watch");
    assert!(metrics(&c).await.contains("swarm_feeds_live 1"));
    // Watchers that go are let go, though nothing is written to them.
    drop(watchers);
    wait_until("every watcher let go", LET_GO, || async {
        metrics(&c).await.contains("swarm_feed_watchers 0").then_some(())
    })
    .await
    .unwrap();
}

/// Reads from `stream` until what was read contains `needle`; everything read.
async fn read_until(stream: &mut tokio::net::UnixStream, needle: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut read = Vec::new();
    tokio::time::timeout(SOON, async {
        while !String::from_utf8_lossy(&read).contains(needle) {
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before {needle:?}: {}", String::from_utf8_lossy(&read));
            read.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in {}", String::from_utf8_lossy(&read)));
    String::from_utf8(read).unwrap()
}

/// A watcher's connection is answered apart from the rest of the API (without hyper's
/// per-connection buffers): chunks for HTTP/1.1, the bare stream for HTTP/1.0, closed at the
/// end; a request with a body, or anything but a stream, is still answered by the same API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchers_connection_is_framed_by_its_http_version_and_other_requests_are_unchanged() {
    use tokio::io::AsyncWriteExt;
    let c = controller_with(&["bee"]).await;
    let bee = as_agent(&c, "bee").await;
    let mut eleven = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    eleven.write_all(b"GET /api/agents/bee/terminal HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut ten = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    ten.write_all(b"GET /api/agents/bee/terminal HTTP/1.0\r\n\r\n").await.unwrap();
    wait_until("two watchers", SOON, || async { metrics(&c).await.contains("swarm_feed_watchers 2").then_some(()) })
        .await
        .unwrap();
    publish_lines(&bee, "bee", 0, 1).await;

    let chunked = read_until(&mut eleven, "line 0").await;
    let (head, body) = chunked.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains("transfer-encoding: chunked") && head.contains("connection: close"), "{head}");
    let (size, event) = body.split_once("\r\n").unwrap();
    assert_eq!(usize::from_str_radix(size, 16).unwrap(), event.trim_end_matches("\r\n").len(), "{body:?}");

    let bare = read_until(&mut ten, "line 0").await;
    let (head, body) = bare.split_once("\r\n\r\n").unwrap();
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding"), "{head}");
    assert!(body.starts_with("event:term\n") && body.ends_with("\n\n"), "no chunk framing: {body:?}");

    // An error is answered the same way, then the connection closed.
    let mut unknown = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    unknown.write_all(b"GET /api/agents/nobody/terminal HTTP/1.1\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut unknown, &mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 404") && answer.ends_with("0\r\n\r\n"), "{answer}");
    assert!(answer.contains("no agent nobody"), "{answer}");

    // With a body, the stream's route is served as any other request: by hyper, the same API.
    let mut with_body = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    with_body.write_all(b"GET /api/agents/nobody/terminal HTTP/1.1\r\ncontent-length: 2\r\n\r\nhi").await.unwrap();
    let answered = read_until(&mut with_body, "no agent nobody").await;
    assert!(
        answered.starts_with("HTTP/1.1 404") && answered.to_ascii_lowercase().contains("content-length"),
        "{answered}"
    );
    drop((eleven, ten));
    wait_until("both watchers let go", LET_GO, || async {
        metrics(&c).await.contains("swarm_feed_watchers 0").then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_relay_requests_are_clear_errors() {
    let c = controller_with(&["bee"]).await;
    let cases = [
        (Method::GET, "/api/agents/Bee/terminal", None, StatusCode::BAD_REQUEST, "Bee"),
        (Method::GET, "/api/agents/nobody/terminal", None, StatusCode::NOT_FOUND, "no agent nobody"),
        (Method::GET, "/api/agents/bee/turn", Some("abc"), StatusCode::BAD_REQUEST, "Last-Event-ID"),
        // The largest id has no event after it: resuming after it would overflow the next one.
        (Method::GET, "/api/agents/bee/terminal", Some("18446744073709551615"), StatusCode::BAD_REQUEST, "no event"),
        (Method::POST, "/api/agents/bee/terminal", None, StatusCode::METHOD_NOT_ALLOWED, "use GET"),
    ];
    for (method, path, last_event_id, status, needle) in cases {
        let headers: Vec<(&str, &str)> = last_event_id.map(|id| ("last-event-id", id)).into_iter().collect();
        let (got, body) = c.call(method.clone(), path, &headers, "").await.unwrap();
        assert_eq!(got, status, "{method} {path}: {body}");
        assert!(body["error"].as_str().unwrap().contains(needle), "{method} {path}: {body}");
    }
    // A publish on the turn subject that is not a header is not relayed; the next header is.
    let bee = as_agent(&c, "bee").await;
    bee.publish("turn.bee", "data: injected\n\nid: 9".into()).await.unwrap();
    let header = r#"{"state":"paused","at":"2026-11-30T12:00:00Z"}"#;
    bee.publish("turn.bee", header.into()).await.unwrap();
    bee.flush().await.unwrap();
    let mut turns = Watcher::open(&c.socket, "/api/agents/bee/turn", Some(0)).await;
    let got = turns.take(1).await;
    assert!(got[0].data.contains("paused") && !got[0].data.contains("injected"), "{got:?}");
}

async fn metrics(c: &Controller) -> String {
    let request = hyper::Request::builder().uri("/metrics").body(http_body_util::Full::new(Bytes::new())).unwrap();
    let (_, bytes) = swarmctl::client::send(&c.socket, request).await.unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_writes_only_its_own_terminal_and_header() {
    let c = controller_with(&["bee", "wasp"]).await;
    let bee = as_agent(&c, "bee").await;
    for subject in ["term.wasp", "turn.wasp", "term.*", "turn.>", "RELAY"] {
        let _ = bee.publish(subject, r#"{"state":"idle","at":"2026-11-30T12:00:00Z"}"#.into()).await;
    }
    // Sent after the others on the same connection: once it is stored, they were handled.
    bee.publish("term.bee", "marker".into()).await.unwrap();
    bee.flush().await.unwrap();
    let stream = c.js.get_stream("RELAY").await.unwrap();
    wait_until("the marker stored", SOON, || async { stream.direct_get_last_for_subject("term.bee").await.ok() })
        .await
        .unwrap();
    for subject in ["term.wasp", "turn.wasp"] {
        assert!(stream.direct_get_last_for_subject(subject).await.is_err(), "bee wrote {subject}");
    }
    let info = c.js.get_stream("RELAY").await.unwrap().info().await.unwrap().clone();
    assert_eq!(info.state.messages, 1, "only the marker");
}

/// What `swarmctl terminal bee` prints (with `extra` flags) until `END` appears.
async fn terminal_until_end(c: &Controller, extra: &[&str]) -> String {
    use tokio::io::AsyncReadExt;
    let mut child = tokio::process::Command::new(common::swarmctl_binary())
        .arg("--socket")
        .arg(&c.socket)
        .args(["terminal", "bee"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&printed).contains("END") {
            let n = stdout.read(&mut chunk).await.unwrap();
            assert!(n > 0, "swarmctl ended before END: {:?}", String::from_utf8_lossy(&printed));
            printed.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(SOON, read).await.expect("END within the deadline");
    child.kill().await.unwrap();
    String::from_utf8(printed).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_escape_sequences_do_not_reach_the_operators_terminal() {
    let c = controller_with(&["bee"]).await;
    let bee = as_agent(&c, "bee").await;
    // A hostile agent prints a clipboard write (OSC 52), a title change, a line erase and a cursor
    // move, cut across two events, between coloured text.
    for piece in
        ["\u{1b}[31mred\u{1b}[0m \u{1b}]52;c;ZXZpbA==", "\u{7}\u{1b}]0;owned\u{1b}\\\u{1b}[2K\u{1b}[1Akept END\n"]
    {
        bee.publish("term.bee", piece.to_owned().into()).await.unwrap();
    }
    bee.flush().await.unwrap();
    let shown = terminal_until_end(&c, &[]).await;
    assert_eq!(shown, "\u{1b}[31mred\u{1b}[0m kept END\n", "only the text and its colour");
    // The same events with --raw: the sequences were there, the filter is what dropped them.
    let raw = terminal_until_end(&c, &["--raw"]).await;
    assert!(raw.contains("\u{1b}]52;c;ZXZpbA==\u{7}") && raw.contains("\u{1b}[2K"), "{raw:?}");
}

/// The controller stops promptly though a connection sent nothing yet, another only part of a
/// head, and a watcher follows a terminal (its stream ends at the stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_whole_request_do_not_hold_up_a_stop() {
    use tokio::io::AsyncWriteExt;
    let mut c = controller_with(&["bee"]).await;
    let silent = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    let mut partial = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    partial.write_all(b"GET /api/agents/bee/terminal HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let mut watcher = Watcher::open(&c.socket, "/api/agents/bee/terminal", None).await;
    let stopped = tokio::time::timeout(LET_GO, c.stop()).await;
    assert!(matches!(stopped, Ok(Ok(()))), "the stop waited on a connection: {stopped:?}");
    assert_eq!(watcher.next().await, None, "the watcher's answer ended");
    drop((silent, partial));
}
