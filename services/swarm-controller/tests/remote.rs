//! The swarm through the control plane: three agents-control copies behind Caddy (pinned
//! certificate) sharing a moto bucket, the controller paired as a host (`swarm-controller pair`),
//! NATS, hive-c0re and real agents. `swarmctl --via` runs from a client linked to another copy
//! than the controller's: its output and exit codes match the socket's, a schedule it adds fires,
//! it pauses an agent and follows a terminal. Then the copy holding the controller is killed in
//! the middle of a `schedule add` (the controller's NATS held so the request is inside the
//! controller when the copy dies): the command completes once, and the followed terminal goes on
//! with nothing missed or doubled. A forgotten controller stops answering. Bad requests, a host
//! sending requests, repeated ids and bodies larger than one message are tried with the raw
//! device client.
//!
//! Needs `cargo build -p hive-agent -p hive-c0re -p agents-control -p swarmctl` and moto and Caddy
//! (scripts/setup).

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::one_hive::{OneHive, printing_turn};
use common::pair;
use hyper::http::Method;
use hyperhive_swarm_api::roles::Role;
use hyperhive_testkit::control_plane::Cluster;
use hyperhive_testkit::control_plane::device::{Device, Input, Linked};
use hyperhive_testkit::wait_until;
use serde_json::{Value, json};
use swarm_controller::api::routes::{ROUTES, needed};
use swarmctl::remote::RemoteApi;
use swarmctl::{Api, CtlError, client};
use tokio::io::{AsyncBufReadExt, BufReader};

const SOON: Duration = Duration::from_secs(30);

struct Remote {
    // Drop order: the swarm (whose controller holds a link) before the control plane.
    swarm: OneHive,
    cluster: Cluster,
    /// The controller's device id.
    controller: String,
    /// Clients linked straight to a copy other than the controller's: the terminal follows on
    /// the phone (whose other commands share its link) while the laptop runs commands.
    laptop: Device,
    phone: Device,
}

impl Remote {
    async fn start(agents: &[&str], controller_env: &[(&str, &str)]) -> Remote {
        let cluster = Cluster::start().await;
        let identity = cluster.dir().join("control-identity.json");
        let client_code = cluster.code("--client", &[]).await;
        let refused = pair(&client_code, &["--identity", identity.to_str().unwrap()]);
        assert!(String::from_utf8_lossy(&refused.stderr).contains("that is a client code"), "{refused:?}");
        let nowhere = pair(&client_code, &[]);
        assert!(String::from_utf8_lossy(&nowhere.stderr).contains("set SWARM_STATE_DIR"), "{nowhere:?}");
        assert!(!identity.exists(), "a refused pairing writes nothing");
        // Without --name the controller takes the name its code suggests.
        let code = cluster.code("--host", &["--name", "swarm"]).await;
        let shown = identity.to_str().unwrap();
        let paired = pair(&code, &["--identity", shown]);
        let said = String::from_utf8_lossy(&paired.stdout).into_owned();
        assert!(paired.status.success(), "pair: {}", String::from_utf8_lossy(&paired.stderr));
        assert!(said.contains("paired as host d") && said.contains("(swarm)") && said.contains("mode 0600"), "{said}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&identity).unwrap().permissions().mode() & 0o777, 0o600);
        let again = pair(&cluster.code("--host", &[]).await, &["--identity", shown]);
        assert!(!again.status.success());
        assert!(String::from_utf8_lossy(&again.stderr).contains("paired already"), "a second pair keeps the first");

        let mut env = vec![("SWARM_CONTROL_IDENTITY", identity.to_str().unwrap())];
        env.extend_from_slice(controller_env);
        let turns = |file: &Path| printing_turn(file, 30, "0.1");
        let mut swarm = OneHive::start(agents, turns, &env).await;
        swarm.controller.wait_for_log("control link up", SOON).await.unwrap();
        let link = health(&swarm.socket).await["control_link"].clone();
        assert_eq!(link["state"], "up", "{link}");
        let controller = link["device_id"].as_str().unwrap().to_owned();
        let copy = link["copy"].as_str().unwrap();
        let other = cluster.copies.iter().position(|c| c.name != copy).unwrap();
        let addr = cluster.copies[other].addr;
        let direct = |identity: &mut hyperhive_control_link::Identity| {
            identity.control_url = format!("http://{addr}");
            identity.pin = None;
        };
        let laptop = cluster.pair("--client", "laptop").await.altered("direct", direct);
        let phone = cluster.pair("--client", "phone").await.altered("direct", direct);
        Remote { swarm, cluster, controller, laptop, phone }
    }

    /// The index of the copy the controller's link is on now.
    async fn controller_copy(&self) -> usize {
        let link = health(&self.swarm.socket).await["control_link"].clone();
        self.cluster.copies.iter().position(|c| link["copy"] == c.name.as_str()).expect("the link is up")
    }

    fn swarmctl(&self, via: Option<&Path>, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(common::swarmctl_binary());
        match via {
            Some(identity) => command.arg("--via").arg(identity).arg("--socket").arg("/nonexistent/c.sock"),
            None => command.arg("--socket").arg(&self.swarm.socket),
        };
        command.args(args).kill_on_drop(true);
        command
    }

    /// (success, stdout, stderr) of swarmctl on the socket or through the control plane.
    async fn run(&self, via: Option<&Path>, args: &[&str]) -> (bool, String, String) {
        let out = self.swarmctl(via, args).output().await.unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }

    async fn via(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(Some(&self.laptop.identity), args).await;
        assert!(ok, "swarmctl --via {args:?}: {err}");
        out
    }

    async fn schedules(&self) -> Vec<Value> {
        let api = Api::Socket(self.swarm.socket.clone());
        let bytes = client::request(&api, Method::GET, "/api/schedules", None, None).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }
}

async fn health(socket: &Path) -> Value {
    let api = Api::Socket(socket.to_owned());
    serde_json::from_slice(&client::request(&api, Method::GET, "/healthz", None, None).await.unwrap()).unwrap()
}

/// A running `swarmctl terminal --json`, its lines collected as they come.
struct Follow {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Follow {
    fn start(mut command: tokio::process::Command) -> Follow {
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                kept.lock().unwrap().push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
            }
        });
        Follow { child, lines }
    }

    /// Whether `swarmctl terminal` still runs.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The terminal's text so far.
    fn text(&self) -> String {
        self.lines.lock().unwrap().iter().filter_map(|l| l["text"].as_str()).collect()
    }

    /// The numbered lines of todo `todo` printed so far, in order.
    fn numbers_of(&self, todo: &str) -> Vec<u32> {
        let suffix = format!(" of {todo}");
        self.text()
            .lines()
            .filter_map(|l| l.strip_prefix("line ")?.strip_suffix(suffix.as_str())?.parse().ok())
            .collect()
    }
}

async fn queue(swarm: &OneHive, agent: &str, id: &str) {
    let todo = json!({"id": id, "source": "remote test", "body": id}).to_string();
    swarm.js.publish(format!("todo.{agent}"), todo.into()).await.unwrap().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swarmctl_via_the_control_plane_drives_the_swarm_and_survives_its_copy_dying() {
    let mut remote = Remote::start(&["bee", "wasp"], &[]).await;
    let laptop = remote.laptop.identity.clone();

    // The same output and exit codes as on the socket, for answers and for refusals.
    for args in [
        &["schedule", "list", "--json"][..],
        &["hives", "--json"],
        &["schedule", "show", "nope"],
        &["agent", "state", "h1", "nobody", "up"],
    ] {
        let on_socket = remote.run(None, args).await;
        let through = remote.run(Some(&laptop), args).await;
        assert_eq!(on_socket, through, "swarmctl {args:?}");
    }

    // A schedule added from afar fires; an agent paused from afar is paused on its hive.
    let added: Value = serde_json::from_str(
        &remote
            .via(&[
                "schedule",
                "add",
                "--allow-unknown-agent",
                "--name",
                "from-afar",
                "--agent",
                "bee",
                "--body",
                "hello from afar",
                "--once",
                "--json",
            ])
            .await,
    )
    .unwrap();
    assert_eq!(added["name"], "from-afar");
    wait_until("the schedule added from afar to fire", SOON, || async {
        remote.swarm.turns("bee").contains("hello from afar").then_some(())
    })
    .await
    .unwrap();
    let paused: Value =
        serde_json::from_str(&remote.via(&["agent", "state", "h1", "bee", "paused", "--json"]).await).unwrap();
    // Recorded as the device the request came through, which the client cannot choose.
    assert_eq!(paused["set_by"], format!("swarmctl@{}", remote.laptop.id));
    let audited = wait_until("the change in the audit log", SOON, || async {
        let api = Api::Socket(remote.swarm.socket.clone());
        let bytes = client::request(&api, Method::GET, "/api/audit", None, None).await.ok()?;
        let page: Value = serde_json::from_slice(&bytes).unwrap();
        page["entries"].as_array().unwrap().iter().find(|e| e["path"] == "/api/hives/h1/agents/bee/state").cloned()
    })
    .await
    .unwrap();
    assert_eq!(
        (&audited["who"], &audited["via"], &audited["role"], &audited["method"], &audited["status"]),
        (&json!(remote.laptop.id), &json!("control_plane"), &json!("operator"), &json!("PUT"), &json!(200)),
        "a client code's default role is operator: {audited}"
    );
    // A client whose code gave it the viewer role reads, and is refused a change naming the role.
    let code = remote.cluster.code("--client", &["--role", "viewer"]).await;
    let watcher = Device::pair(&code, "watcher", remote.cluster.dir()).await.unwrap();
    let (ok, listed, err) = remote.run(Some(&watcher.identity), &["schedule", "list"]).await;
    assert!(ok && listed.contains("from-afar"), "{err}");
    let (ok, _, refused) = remote.run(Some(&watcher.identity), &["agent", "state", "h1", "bee", "up"]).await;
    assert!(!ok && refused.contains(&format!("needs the operator role; {} has viewer", watcher.id)), "{refused}");
    let (ok, _, refused) = remote.cluster.cli(&["code", "--host", "--role", "admin"]).await;
    assert!(!ok && refused.contains("--role"), "a host code carries no role: {refused}");
    wait_until("bee paused on its hive", SOON, || async {
        (remote.swarm.actual_in_hive_status("bee").await.as_deref() == Some("paused")).then_some(())
    })
    .await
    .unwrap();

    // Follow wasp's terminal from afar while a turn prints 30 lines, 0.1 s apart.
    let mut follow = Follow::start(remote.swarmctl(Some(&remote.phone.identity), &["terminal", "wasp", "--json"]));
    queue(&remote.swarm, "wasp", "t1").await;
    wait_until("the followed terminal to show the turn", SOON, || async {
        (!follow.numbers_of("t1").is_empty()).then_some(())
    })
    .await
    .unwrap();
    // Other commands on the same identity share its link with the open terminal: each answers
    // at once, and the terminal keeps following (every line of the turn arrives: below).
    for _ in 0..3 {
        let asked = std::time::Instant::now();
        let (ok, listed, err) = remote.run(Some(&remote.phone.identity), &["schedule", "list"]).await;
        let took = asked.elapsed();
        eprintln!("a command beside the followed terminal answered in {took:?}");
        assert!(ok && listed.contains("from-afar"), "a command beside the followed terminal: {err}");
        assert!(took < Duration::from_secs(5), "a command beside the followed terminal took {took:?}");
    }
    assert!(follow.running(), "the followed terminal goes on when the commands beside it end");

    // Kill -9 the controller's copy while a `schedule add` is inside the controller: its NATS
    // is held, so the request has arrived and its answer has not left.
    let killed = remote.controller_copy().await;
    let posts = |log: &str| log.lines().filter(|l| l.contains("remote request") && l.contains("POST")).count();
    let before = posts(&remote.swarm.controller.log());
    remote.swarm.controller_nats.as_ref().unwrap().stall();
    let add = remote
        .swarmctl(
            Some(&laptop),
            &[
                "schedule",
                "add",
                "--allow-unknown-agent",
                "--name",
                "during-kill",
                "--agent",
                "wasp",
                "--body",
                "after the kill",
                "--once",
                "--json",
            ],
        )
        .output();
    let add = tokio::spawn(add);
    wait_until("the schedule add to reach the controller", SOON, || async {
        (posts(&remote.swarm.controller.log()) > before).then_some(())
    })
    .await
    .unwrap();
    remote.cluster.kill(killed);
    remote.swarm.controller_nats.as_ref().unwrap().pass();
    let added = tokio::time::timeout(Duration::from_secs(90), add).await.expect("the add completes").unwrap().unwrap();
    assert!(added.status.success(), "schedule add across the kill: {}", String::from_utf8_lossy(&added.stderr));
    let view: Value = serde_json::from_slice(&added.stdout).unwrap();
    assert_eq!(view["name"], "during-kill");
    let named: Vec<Value> = remote.schedules().await.into_iter().filter(|s| s["name"] == "during-kill").collect();
    assert_eq!(named.len(), 1, "exactly one schedule: {named:?}");
    wait_until("the controller's link on another copy", SOON, || async {
        let link = health(&remote.swarm.socket).await["control_link"].clone();
        (link["state"] == "up" && link["copy"] != remote.cluster.copies[killed].name.as_str()).then_some(())
    })
    .await
    .unwrap();

    // The terminal went on: every line once, in order.
    wait_until("the turn's last line in the followed terminal", SOON, || async {
        follow.numbers_of("t1").contains(&30).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", follow.numbers_of("t1")));
    assert_eq!(follow.numbers_of("t1"), (1..=30).collect::<Vec<u32>>(), "nothing missed, nothing doubled");
    wait_until("the schedule added across the kill to fire, once", SOON, || async {
        remote.swarm.turns("wasp").contains("after the kill").then_some(())
    })
    .await
    .unwrap();
    assert_eq!(remote.swarm.turns("wasp").matches("after the kill").count(), 1);

    // Forgotten, the controller stops answering within seconds.
    let (ok, _, err) = remote.cluster.cli(&["forget", &remote.controller]).await;
    assert!(ok, "forget: {err}");
    wait_until("the controller's link stopped", Duration::from_secs(10), || async {
        (health(&remote.swarm.socket).await["control_link"]["state"] == "stopped").then_some(())
    })
    .await
    .unwrap();
    let (ok, _, err) = remote.run(Some(&laptop), &["schedule", "list"]).await;
    assert!(!ok);
    assert!(err.contains("no hosts") || err.contains("no host"), "{err}");

    // The agent sharing the laptop's link leaves once no command has used it for a while.
    let socket = swarmctl::shared_link::socket_path(&laptop);
    assert!(socket.exists(), "the laptop's commands shared a link");
    let left_within = swarmctl::shared_link::IDLE_EXIT + Duration::from_secs(5);
    wait_until("the laptop's link agent to leave once unused", left_within, || async {
        (!socket.exists()).then_some(())
    })
    .await
    .unwrap();
}

/// The raw device client (JSON lines) linked to the control plane.
struct Raw {
    linked: Linked,
    to: String,
}

impl Raw {
    async fn start(identity: &Path, to: &str) -> Raw {
        let mut linked = Linked::start(identity, Input::Commands);
        linked.connected().await;
        Raw { linked, to: to.to_owned() }
    }

    async fn send(&mut self, body: Value) {
        self.linked.command(json!({"command": "send", "to": self.to, "body": body})).await;
    }

    /// The next message from the controller.
    async fn answer(&mut self) -> Value {
        loop {
            let (_, event) = self.linked.event("message").await;
            if event["from"] == self.to.as_str() {
                return event["body"].clone();
            }
        }
    }

    /// Sends a whole request (one message) and returns (status, headers, body as JSON).
    async fn request(&mut self, id: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value, Value) {
        let mut frame = json!({"type": "request", "id": id, "method": method, "path": path});
        if let Some(body) = body {
            frame["headers"] = json!([["content-type", "application/json"]]);
            frame["body"] = json!(STANDARD.encode(body.to_string()));
        }
        self.send(frame).await;
        self.response(id).await
    }

    /// The whole response to `id`: its status, headers and body (JSON).
    async fn response(&mut self, id: &str) -> (u16, Value, Value) {
        let head = self.answer().await;
        assert_eq!((head["type"].as_str(), head["id"].as_str()), (Some("response"), Some(id)), "{head}");
        let mut bytes = STANDARD.decode(head["body"].as_str().unwrap()).unwrap();
        let mut more = head["more"] == true;
        while more {
            let piece = self.answer().await;
            assert_eq!((piece["type"].as_str(), piece["id"].as_str()), (Some("body"), Some(id)), "{piece}");
            bytes.extend(STANDARD.decode(piece["body"].as_str().unwrap()).unwrap());
            more = piece["more"] == true;
        }
        (head["status"].as_u64().unwrap() as u16, head["headers"].clone(), serde_json::from_slice(&bytes).unwrap())
    }
}

fn schedule(name: &str, body: &str) -> Value {
    json!({
        "name": name, "agents": ["bee"], "body": body, "anchor": "2030-01-01T00:00:00Z", "interval": 3600,
        "paused": true, "allow_unknown_agents": true,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_through_the_control_plane_are_refused_and_change_nothing() {
    let remote = Remote::start(&["bee"], &[("SWARM_REMOTE_RATE", "3")]).await;
    let mut raw = Raw::start(&remote.laptop.identity, &remote.controller).await;

    // swarmctl refuses an identity that is not a client's, or that others can read.
    let host_identity = remote.cluster.dir().join("control-identity.json");
    let (ok, _, err) = remote.run(Some(&host_identity), &["agents"]).await;
    assert!(!ok && err.contains("is a host's identity"), "{err}");
    let open = remote.laptop.altered("open", |_| {});
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open.identity, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, _, err) = remote.run(Some(&open.identity), &["agents"]).await;
    assert!(!ok && err.contains("chmod 600"), "{err}");

    // Not a request at all, and a body piece of no request: refused, saying why.
    raw.send(json!({"hello": "controller"})).await;
    let refused = raw.answer().await;
    assert_eq!(refused["type"], "refused");
    assert!(refused["error"].as_str().unwrap().contains("not an API request"), "{refused}");
    raw.send(json!({"type": "body", "id": "ghost", "body": "", "more": false})).await;
    let refused = raw.answer().await;
    assert!(refused["error"].as_str().unwrap().contains("not being sent"), "{refused}");

    // Malformed requests get the API's 400, an oversized one 413 before its body arrives (the
    // rest of its pieces are dropped, never run).
    let (status, _, error) = raw.request("m1", "G E T", "/api/schedules", None).await;
    assert_eq!(status, 400);
    assert!(error["error"].as_str().unwrap().contains("not an HTTP method"), "{error}");
    let (status, _, error) = raw.request("m2", "GET", "api/schedules", None).await;
    assert_eq!(status, 400, "{error}");
    raw.send(json!({"type": "request", "id": "big", "method": "POST", "path": "/api/schedules",
        "headers": [["content-type", "application/json"]], "size": 9_000_000, "body": "", "more": true}))
        .await;
    let (status, _, error) = raw.response("big").await;
    assert_eq!(status, 413);
    assert!(error["error"].as_str().unwrap().contains("at most"), "{error}");
    let sneaked = STANDARD.encode(schedule("sneaked", "in pieces after a refusal").to_string());
    raw.send(json!({"type": "body", "id": "big", "body": sneaked, "more": false})).await;

    // A request sent twice under one id runs once; the repeat gets the same answer.
    let first = raw.request("same", "POST", "/api/schedules", Some(&schedule("twice", "one run"))).await;
    let second = raw.request("same", "POST", "/api/schedules", Some(&schedule("twice", "one run"))).await;
    assert_eq!(first.0, 201, "{:?}", first.2);
    assert_eq!(first, second, "the stored answer, not a second run");

    // A body larger than one message arrives in pieces, whole.
    let prompt: String = (0..60 * 1024).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let text = schedule("in-pieces", &prompt).to_string();
    let pieces: Vec<&[u8]> = text.as_bytes().chunks(20 * 1024).collect();
    for (index, piece) in pieces.iter().enumerate() {
        let more = index + 1 < pieces.len();
        let encoded = STANDARD.encode(piece);
        let frame = if index == 0 {
            json!({"type": "request", "id": "pieces", "method": "POST", "path": "/api/schedules",
                "headers": [["content-type", "application/json"]], "size": text.len(), "body": encoded, "more": more})
        } else {
            json!({"type": "body", "id": "pieces", "body": encoded, "more": more})
        };
        raw.send(frame).await;
    }
    let (status, _, created) = raw.response("pieces").await;
    assert_eq!(status, 201, "{created}");
    assert!(created["body"] == prompt.as_str(), "the prompt arrived whole ({} bytes sent)", prompt.len());

    // A host may not send requests: the control plane refuses to relay host to host.
    let intruder = remote.cluster.pair("--host", "intruder").await;
    let mut host = Raw::start(&intruder.identity, &remote.controller).await;
    host.send(json!({"type": "request", "id": "h1", "method": "POST", "path": "/api/schedules",
        "headers": [["content-type", "application/json"]], "body": STANDARD.encode(schedule("from-a-host", "no").to_string())}))
        .await;
    let (_, undeliverable) = host.linked.event("undeliverable").await;
    assert_eq!(undeliverable["reason"], "not_allowed", "{undeliverable}");

    // A host listed offline (its link closed) is said to be so within seconds, not after the
    // minute a request waits for an answer.
    drop(host);
    loop {
        let (_, presence) = raw.linked.event("presence").await;
        let hosts = presence["hosts"].as_array().cloned().unwrap_or_default();
        if hosts.iter().any(|h| h["device_id"] == intruder.id.as_str() && h["online"] == false) {
            break;
        }
    }
    let asked = std::time::Instant::now();
    let (ok, _, err) = remote.run(Some(&remote.phone.identity), &["--host", "intruder", "agents"]).await;
    assert!(!ok && err.contains(&format!("host intruder ({}) is offline", intruder.id)), "{err}");
    assert!(asked.elapsed() < Duration::from_secs(15), "said after {:?}", asked.elapsed());

    // Over the rate (3 a second, bursts of 15): 429 with Retry-After, and nothing runs.
    let mut limited = None;
    for n in 0..20 {
        let id = format!("burst{n}");
        let (status, headers, error) = raw.request(&id, "GET", "/api/schedules", None).await;
        if status == 429 {
            limited = Some((headers, error));
            break;
        }
        assert_eq!(status, 200);
    }
    let (headers, error) = limited.expect("a burst over the rate is refused");
    assert!(error["error"].as_str().unwrap().contains("over 3 requests a second"), "{error}");
    assert!(headers.as_array().unwrap().iter().any(|h| h[0] == "retry-after"), "{headers}");

    // Nothing else changed: the two schedules created above, once each.
    let mut names: Vec<String> =
        remote.schedules().await.iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    assert_eq!(names, ["in-pieces", "twice"]);
}

/// Each paired client's role, from its code, against every route of the table through the
/// control plane: a 403 naming the role needed and the client's exactly when its role is below
/// the route's, anything else otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_reaches_exactly_the_routes_it_allows_through_the_control_plane() {
    let remote = Remote::start(&["bee"], &[]).await;
    for role in Role::ALL {
        let code = remote.cluster.code("--client", &["--role", &role.to_string()]).await;
        let device = Device::pair(&code, &format!("{role}-client"), remote.cluster.dir()).await.unwrap();
        let api = Api::Remote(RemoteApi::connect(&device.identity, None).await.unwrap());
        let mut refused = 0;
        for route in ROUTES {
            let path = common::route_example(route.path);
            let what = format!("{} {path} as {role}", route.method);
            let needs = needed(route.id);
            let answer = tokio::time::timeout(SOON, client::request(&api, route.method.clone(), &path, None, None))
                .await
                .unwrap_or_else(|_| panic!("{what}: no answer within {SOON:?}"));
            match answer {
                Err(CtlError::Api { status, message, .. }) if status == 403 => {
                    assert!(role < needs, "{what}: refused at or above the route's role: {message}");
                    let said = format!("needs the {needs} role; {} has {role}", device.id);
                    assert!(message.contains(&said), "{what}: {message}");
                    refused += 1;
                }
                other => assert!(role >= needs, "{what}: not refused: {other:?}"),
            }
        }
        let below = ROUTES.iter().filter(|route| role < needed(route.id)).count();
        assert_eq!(refused, below, "{role}: every route above its role refused");
        assert!(role == Role::Admin || refused > 0, "{role}: some route is above it");
    }
}
