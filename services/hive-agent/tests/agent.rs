//! hive-agent against a real nats-server in JWT mode, with the agent's own least-privilege
//! credential and a fake wall clock driving the ticker.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, kv};
use hive_agent::Agent;
use hive_agent::clock::FakeClock;
use hive_agent::config::Config;
use hyperhive_hive_proto::agent_files::Turn;
use hyperhive_nats_creds::Validity;
use hyperhive_schedule::{AgentName, AgentSchedule, AgentSchedules, Todo};
use hyperhive_testkit::{ChaosProxy, NatsJwt, Process, wait_until, wait_until_none_running};
use nix::unistd::Pid;
use time::OffsetDateTime;
use time::macros::datetime;

const TIMEOUT: Duration = Duration::from_secs(20);
const TICK: Duration = Duration::from_millis(50);
const T0: OffsetDateTime = datetime!(2026-11-30 09:00:00 UTC);
const HOUR: u64 = 3600;

/// A JWT-mode server with the swarm's stream and bucket (made as swarm-controller makes them).
struct Swarm {
    server: NatsJwt,
    js: jetstream::Context,
    schedules: kv::Store,
    dir: tempfile::TempDir,
}

impl Swarm {
    async fn start() -> Self {
        // The agent's log, shown by libtest when a test fails.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info,async_nats=debug"))
            .with_test_writer()
            .try_init();
        let server = NatsJwt::start().await.unwrap();
        let js = controller_js(&server).await;
        // The swarm's objects exactly as swarm-controller makes them at start.
        let schedules = hyperhive_nats_objects::ensure_objects(&js).await.unwrap().agent_schedules;
        Self { server, js, schedules, dir: tempfile::tempdir().unwrap() }
    }

    /// Makes `agent`'s todo consumer as swarm-controller makes it (the agent may not).
    async fn make_consumer(&self, agent: &str) {
        hyperhive_nats_objects::agent_consumer(&AgentName::parse(agent).unwrap()).ensure(&self.js).await.unwrap();
    }

    async fn config(&self, agent: &str) -> Config {
        self.make_consumer(agent).await;
        Config {
            name: AgentName::parse(agent).unwrap(),
            nats_url: self.server.url(),
            creds: self.server.mint_agent(agent).await.unwrap(),
            state_dir: self.dir.path().join(agent),
            schedule_tick: TICK,
            // One write per turn, so a reader never sees half a line.
            turn_command: format!("echo \"$(cat) $HIVE_TODO_ID\" >> {}", self.turns_file(agent).display()),
            turn_timeout: Duration::from_secs(3600),
            pause_file: None,
            supervisor_pid: None,
        }
    }

    /// `agent`'s configuration with its NATS connection through a chaos proxy of its own.
    async fn config_through_proxy(&self, agent: &str) -> (Config, ChaosProxy) {
        let nats_port: u16 = self.server.url().rsplit(':').next().unwrap().parse().unwrap();
        let proxy = ChaosProxy::start(([127, 0, 0, 1], nats_port).into()).await.unwrap();
        let mut config = self.config(agent).await;
        config.nats_url = format!("nats://{}", proxy.addr());
        (config, proxy)
    }

    fn turns_file(&self, agent: &str) -> PathBuf {
        self.dir.path().join(format!("{agent}.turns"))
    }

    async fn put_schedules(&self, agent: &str, schedules: Vec<AgentSchedule>) {
        let doc = AgentSchedules::new(schedules).to_bytes();
        self.schedules.put(agent, doc.into()).await.unwrap();
    }

    /// Starts the hive-agent binary as `agent` with a credential of the given validity.
    async fn start_binary(&self, agent: &str, validity: Validity) -> Process {
        self.start_binary_running(agent, validity, "cat").await
    }

    /// [`Swarm::start_binary`] with `turn_command` as the turn.
    async fn start_binary_running(&self, agent: &str, validity: Validity, turn_command: &str) -> Process {
        self.start_binary_with(agent, validity, turn_command, "info").await
    }

    /// [`Swarm::start_binary_running`] logging with the filter `log` (`RUST_LOG`).
    async fn start_binary_with(&self, agent: &str, validity: Validity, turn_command: &str, log: &str) -> Process {
        self.make_consumer(agent).await;
        self.start_binary_before_its_consumer(agent, validity, turn_command, log).await
    }

    /// [`Swarm::start_binary_with`] without making the agent's consumer first.
    async fn start_binary_before_its_consumer(
        &self,
        agent: &str,
        validity: Validity,
        turn_command: &str,
        log: &str,
    ) -> Process {
        let creds = self.server.mint_agent_with(agent, validity).await.unwrap();
        Process::builder(env!("CARGO_BIN_EXE_hive-agent"))
            .env("HIVE_AGENT_NAME", agent)
            .env("HIVE_AGENT_NATS_URL", self.server.url())
            .env("HIVE_AGENT_CREDS", creds)
            .env("HIVE_AGENT_STATE_DIR", self.dir.path().join(agent))
            .env("HIVE_AGENT_SCHEDULE_TICK", "200ms")
            .env("HIVE_AGENT_TURN_COMMAND", turn_command)
            .env("RUST_LOG", format!("{log},async_nats=off"))
            .start("hive-agent")
            .unwrap()
    }

    /// Where [`Swarm::start_binary`] put `agent`'s credential (a renewal mints it there again).
    fn creds_file(&self, agent: &str) -> PathBuf {
        self.server.creds_dir().join(format!("agent-{agent}.creds"))
    }

    async fn queued_todos(&self) -> u64 {
        let mut stream = self.js.get_stream("TODO").await.unwrap();
        stream.info().await.unwrap().state.messages
    }
}

async fn controller_js(server: &NatsJwt) -> jetstream::Context {
    jetstream::new(server.controller_client().await.unwrap())
}

/// A credential validity from `from` to `until` seconds relative to now.
fn valid_from_until(from: i64, until: i64) -> Validity {
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let at = |offset: i64| u64::try_from(now + offset).unwrap();
    Validity { issued_at: at(from), expires_at: Some(at(until)) }
}

/// A credential living at least `secs` from now (JWT times are whole seconds).
fn expiring_in(secs: u64) -> Validity {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    Validity { issued_at: now, expires_at: Some(now + 1 + secs) }
}

/// Sleeps until `before` ahead of the unix time `at`.
async fn sleep_until_before(at: u64, before: Duration) {
    let wake = UNIX_EPOCH + Duration::from_secs(at) - before;
    if let Ok(wait) = wake.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
}

/// The finished lines of a turns file (a line still being written is not a turn yet).
fn turns(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let finished = text.rfind('\n').map_or("", |end| &text[..end]);
    finished.lines().map(str::to_owned).collect()
}

async fn wait_turns(path: &Path, count: usize) -> Vec<String> {
    wait_until(&format!("{count} turns in {}", path.display()), TIMEOUT, || async {
        let lines = turns(path);
        (lines.len() >= count).then_some(lines)
    })
    .await
    .unwrap()
}

/// Waits for `n` more whole ticks, then for the queue to drain: afterwards, anything those
/// ticks fired has been run.
async fn settle(swarm: &Swarm, agent: &Agent, n: u64) {
    let ticks = agent.ticks();
    let start = *ticks.borrow();
    wait_until("more ticks", TIMEOUT, || async { (*ticks.borrow() >= start + n).then_some(()) }).await.unwrap();
    wait_until("an empty queue", TIMEOUT, || async { (swarm.queued_todos().await == 0).then_some(()) }).await.unwrap();
}

/// A turn that appends its body and todo id to `file`, then, for the body `hang`, starts a
/// background sleep and waits on a foreground one, writing to `pids` the pids of `sh` and both
/// sleeps (the foreground one through a shell that records its pid and execs into the sleep).
fn hanging_turn(pids: &Path, file: &Path) -> String {
    format!(
        "read body; echo \"$body $HIVE_TODO_ID\" >> {file}; \
         if [ \"$body\" = hang ]; then echo $$ > {pids}; sleep 1000 & echo $! >> {pids}; \
         sh -c 'echo $$ >> {pids}; exec sleep 1000'; fi",
        pids = pids.display(),
        file = file.display()
    )
}

/// The three pids a hanging turn writes, once it has written them all.
async fn turn_pids(pids: &Path) -> Vec<Pid> {
    wait_until("the turn's three pids", TIMEOUT, || async {
        let text = std::fs::read_to_string(pids).ok()?;
        let pids: Vec<Pid> = text.lines().filter_map(|line| line.trim().parse().ok()).map(Pid::from_raw).collect();
        (pids.len() == 3).then_some(pids)
    })
    .await
    .unwrap()
}

async fn publish_todo(swarm: &Swarm, id: &str, body: &str) {
    let todo = Todo { id: id.into(), source: "test".into(), body: format!("{body}\n") };
    swarm.js.publish("todo.a", serde_json::to_vec(&todo).unwrap().into()).await.unwrap().await.unwrap();
}

fn hourly(id: &str, body: &str) -> AgentSchedule {
    AgentSchedule {
        id: id.into(),
        body: body.into(),
        anchor: T0,
        interval: Some(HOUR),
        calendar: None,
        tz: None,
        paused: false,
        not_before: T0 - time::Duration::minutes(1),
    }
}

#[tokio::test]
async fn slots_fire_once_through_restart_body_edit_and_downtime() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let clock = FakeClock::new(T0 - time::Duration::seconds(30));
    swarm.put_schedules("a", vec![hourly("s1", "hello")]).await;

    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    settle(&swarm, &agent, 3).await;
    assert!(turns(&file).is_empty(), "nothing is due before the anchor");

    clock.set(T0 + time::Duration::seconds(5));
    assert_eq!(wait_turns(&file, 1).await, ["hello schedule:s1:a:2026-11-30T09:00:00Z"]);
    // The turn's todo acked (a stop mid-turn would leave it to come back after the ack wait).
    settle(&swarm, &agent, 1).await;

    // Restart: the state db remembers the slot.
    agent.stop().await;
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 1, "a restart refires nothing");

    // Body edit: neither moves nor refires the slot.
    swarm.put_schedules("a", vec![hourly("s1", "edited")]).await;
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 1, "a body edit refires nothing");

    // Down across five slots: only the latest fires, once, with the new body.
    agent.stop().await;
    clock.set(T0 + time::Duration::minutes(5 * 60 + 30));
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    let lines = wait_turns(&file, 2).await;
    assert_eq!(lines[1], "edited schedule:s1:a:2026-11-30T14:00:00Z");
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 2, "one catch-up only");
    agent.stop().await;
}

#[tokio::test]
async fn one_shot_fires_once_and_paused_fires_nothing() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let clock = FakeClock::new(T0 + time::Duration::hours(2));
    let once = AgentSchedule { interval: None, ..hourly("once", "one shot") };
    let paused = AgentSchedule { paused: true, ..hourly("paused", "never") };
    swarm.put_schedules("a", vec![once, paused]).await;
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    assert_eq!(wait_turns(&file, 1).await, ["one shot schedule:once:a:2026-11-30T09:00:00Z"]);
    clock.set(T0 + time::Duration::hours(50));
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 1);
    agent.stop().await;
}

#[tokio::test]
async fn a_calendar_the_agent_cannot_evaluate_is_refused_alone_and_said_once() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let once = AgentSchedule { interval: None, ..hourly("once", "one shot") };
    let mars = AgentSchedule {
        interval: None,
        calendar: Some("* * * * *".into()),
        tz: Some("Mars/Olympus".into()),
        ..hourly("mars", "never")
    };
    swarm.put_schedules("a", vec![once.clone(), mars.clone()]).await;
    let turn = format!("echo \"$(cat) $HIVE_TODO_ID\" >> {}", file.display());
    let mut agent = swarm.start_binary_running("a", expiring_in(3600), &turn).await;
    // The other schedule fires; the refusal is logged, naming the zone.
    assert_eq!(wait_turns(&file, 1).await, ["one shot schedule:once:a:2026-11-30T09:00:00Z"]);
    agent.wait_for_log("refusing a calendar", TIMEOUT).await.unwrap();
    // A later document is read and fired by later ticks: the refusal is still said only once.
    let later = AgentSchedule { interval: None, ..hourly("later", "second") };
    swarm.put_schedules("a", vec![once, mars, later]).await;
    let fired = wait_turns(&file, 2).await;
    assert_eq!(fired[1], "second schedule:later:a:2026-11-30T09:00:00Z");
    let log = agent.log();
    let refusals: Vec<&str> = log.lines().filter(|l| l.contains("refusing a calendar")).collect();
    assert_eq!(refusals.len(), 1, "{log}");
    assert!(refusals[0].contains("Mars/Olympus") && refusals[0].contains("schedule=mars"), "{}", refusals[0]);
    assert!(!turns(&file).iter().any(|t| t.contains("schedule:mars:")));
}

#[tokio::test]
async fn a_finished_todo_never_runs_twice_and_a_failing_turn_is_acked() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let mut config = swarm.config("a").await;
    config.turn_command = format!(
        "read body; echo \"$body $HIVE_TODO_ID $HIVE_TODO_SOURCE\" >> {}; [ \"$body\" != fail ] || exit 3",
        file.display()
    );
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    let todo = |id: &str, body: &str| Todo { id: id.into(), source: "test".into(), body: format!("{body}\n") };
    // The same todo twice (as a redelivery after a crash before the ack would), a failing
    // one, and one after it that must still run.
    for t in [todo("t1", "first"), todo("t1", "first"), todo("t2", "fail"), todo("t3", "after")] {
        let payload = serde_json::to_vec(&t).unwrap();
        swarm.js.publish("todo.a", payload.into()).await.unwrap().await.unwrap();
    }
    assert_eq!(wait_turns(&file, 3).await, ["first t1 test", "fail t2 test", "after t3 test"]);
    settle(&swarm, &agent, 2).await;
    assert_eq!(turns(&file).len(), 3, "the second t1 is acked without a turn");
    agent.stop().await;
}

#[tokio::test]
async fn keeps_working_across_a_nats_restart() {
    let mut swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let clock = FakeClock::new(T0 + time::Duration::seconds(1));
    swarm.put_schedules("a", vec![hourly("s1", "before")]).await;
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    wait_turns(&file, 1).await;

    swarm.server.nats().stop();
    swarm.server.nats().start_again().await.unwrap();
    swarm.js = controller_js(&swarm.server).await;

    // The ticker still fires from its state db, and the consumer still runs turns.
    clock.set(T0 + time::Duration::hours(1) + time::Duration::seconds(1));
    let lines = wait_turns(&file, 2).await;
    assert_eq!(lines[1], "before schedule:s1:a:2026-11-30T10:00:00Z");
    agent.stop().await;
}

#[tokio::test]
async fn a_connection_left_mute_by_a_partition_is_redialled_and_the_latest_missed_slot_fires_once() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let (config, proxy) = swarm.config_through_proxy("a").await;
    let clock = FakeClock::new(T0 + time::Duration::seconds(1));
    swarm.put_schedules("a", vec![hourly("s1", "hourly")]).await;
    let agent = Agent::start(config, Arc::new(clock.clone())).await.unwrap();
    wait_turns(&file, 1).await;

    // The partition: nothing crosses. The 10:00 slot falls due, and a tick cannot fire it.
    proxy.stall();
    clock.set(T0 + time::Duration::hours(1) + time::Duration::seconds(1));
    let ticks = agent.ticks();
    let start = *ticks.borrow();
    wait_until("a tick during the partition", TIMEOUT, || async { (*ticks.borrow() > start).then_some(()) })
        .await
        .unwrap();
    // 11:00 falls due too; then the network is back, but the connection from before it stays
    // mute, as a TCP connection does while its retransmissions back off (up to two minutes).
    clock.set(T0 + time::Duration::hours(2) + time::Duration::seconds(1));
    proxy.strand();
    // Three unanswered pings drop it (hive_agent::connect::PING_INTERVAL, 10 s), and the agent
    // fires from a new connection; with the client's default ping (60 s) this took three minutes.
    let back_within = hive_agent::connect::PING_INTERVAL * 4;
    let lines = wait_until("a turn from a new connection", back_within, || async {
        let lines = turns(&file);
        (lines.len() >= 2).then_some(lines)
    })
    .await
    .unwrap();
    assert_eq!(lines[1], "hourly schedule:s1:a:2026-11-30T11:00:00Z", "the latest missed slot fires");
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 2, "the 10:00 slot, missed in the partition, never fires: {:?}", turns(&file));
    agent.stop().await;
}

#[tokio::test]
async fn an_expired_credential_stops_the_binary_with_one_clear_line() {
    let swarm = Swarm::start().await;
    let mut agent = swarm.start_binary("a", valid_from_until(-7200, -3600)).await;
    let status = agent.wait_exit(TIMEOUT).await.unwrap();
    assert!(!status.success());
    let log = agent.log();
    assert!(log.contains("expired 1h") && log.contains("nats agent-creds a"), "{log}");
}

#[tokio::test]
async fn bad_settings_stop_the_binary_with_what_to_fix() {
    let mut agent = Process::builder(env!("CARGO_BIN_EXE_hive-agent"))
        .env("HIVE_AGENT_NAME", "Not.A.Name")
        .env("HIVE_AGENT_NATS_URL", "nats://127.0.0.1:4222")
        .env("HIVE_AGENT_CREDS", "/nonexistent")
        .env("HIVE_AGENT_STATE_DIR", "/nonexistent")
        .env("HIVE_AGENT_TURN_COMMAND", "cat")
        .start("hive-agent")
        .unwrap();
    let status = agent.wait_exit(TIMEOUT).await.unwrap();
    assert!(!status.success());
    let log = agent.log();
    assert!(log.contains("invalid agent name") && log.contains("HIVE_AGENT_NAME"), "{log}");
}

#[tokio::test]
async fn a_crash_between_publish_and_record_does_not_double_the_slot() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    // What a crashed tick left behind: the slot's todo is queued, the slot is not recorded.
    let agent = hyperhive_schedule::AgentName::parse("a").unwrap();
    let todo = Todo::for_slot(&agent, "s1", "hello", T0);
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", hyperhive_schedule::slot_message_id(&agent, "s1", T0).as_str());
    let payload = serde_json::to_vec(&todo).unwrap();
    swarm.js.publish_with_headers("todo.a", headers, payload.into()).await.unwrap().await.unwrap();
    swarm.put_schedules("a", vec![hourly("s1", "hello")]).await;

    let clock = FakeClock::new(T0 + time::Duration::seconds(5));
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock)).await.unwrap();
    wait_turns(&file, 1).await;
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file), ["hello schedule:s1:a:2026-11-30T09:00:00Z"]);
    agent.stop().await;
}

#[tokio::test]
async fn a_credential_expiring_while_running_is_logged_clearly() {
    let swarm = Swarm::start().await;
    let mut agent = swarm.start_binary("a", valid_from_until(0, 3)).await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    agent.wait_for_log("NATS refused the credential", TIMEOUT).await.unwrap();
    assert!(agent.log().contains("nats agent-creds a"), "{}", agent.log());
}

#[tokio::test]
async fn agents_sharing_a_schedule_each_run_its_slot() {
    let swarm = Swarm::start().await;
    let clock = FakeClock::new(T0 + time::Duration::seconds(5));
    for agent in ["a", "b"] {
        swarm.put_schedules(agent, vec![hourly("shared", "both")]).await;
    }
    let a = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    let b = Agent::start(swarm.config("b").await, Arc::new(clock)).await.unwrap();
    assert_eq!(wait_turns(&swarm.turns_file("a"), 1).await, ["both schedule:shared:a:2026-11-30T09:00:00Z"]);
    assert_eq!(wait_turns(&swarm.turns_file("b"), 1).await, ["both schedule:shared:b:2026-11-30T09:00:00Z"]);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_recreated_bucket_is_followed_after_a_run_of_older_revisions() {
    let mut swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let clock = FakeClock::new(T0 - time::Duration::hours(1));
    for _ in 0..5 {
        swarm.put_schedules("a", vec![hourly("old", "old")]).await;
    }
    let agent = Agent::start(swarm.config("a").await, Arc::new(clock.clone())).await.unwrap();
    settle(&swarm, &agent, 2).await;

    // Recreated: revisions restart at 1, below the 5 the agent applied.
    swarm.js.delete_key_value("agent-schedules").await.unwrap();
    swarm.schedules = swarm
        .js
        .create_key_value(kv::Config { bucket: "agent-schedules".into(), max_bytes: 1 << 20, ..Default::default() })
        .await
        .unwrap();
    swarm.put_schedules("a", vec![hourly("new", "new")]).await;
    clock.set(T0 + time::Duration::seconds(1));
    settle(&swarm, &agent, u64::from(hive_agent::ticker::OLDER_TICKS_BEFORE_RESET) + 2).await;
    assert_eq!(turns(&file), ["new schedule:new:a:2026-11-30T09:00:00Z"]);
    agent.stop().await;
}

#[tokio::test]
async fn a_turn_spanning_a_nats_restart_is_acked_and_the_queue_moves_on() {
    let mut swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let go = swarm.dir.path().join("go");
    let mut config = swarm.config("a").await;
    // The first turn holds until the test lets it finish, so NATS restarts under it.
    config.turn_command = format!(
        "read body; echo \"$body started\" >> {file}; while [ \"$body\" = hold ] && [ ! -e {go} ]; do sleep 0.05; done; echo \"$body done\" >> {file}",
        file = file.display(),
        go = go.display()
    );
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    for (id, body) in [("t1", "hold"), ("t2", "next")] {
        let todo = Todo { id: id.into(), source: "test".into(), body: format!("{body}\n") };
        swarm.js.publish("todo.a", serde_json::to_vec(&todo).unwrap().into()).await.unwrap().await.unwrap();
    }
    wait_turns(&file, 1).await;
    swarm.server.nats().stop();
    swarm.server.nats().start_again().await.unwrap();
    swarm.js = controller_js(&swarm.server).await;
    std::fs::write(&go, "").unwrap();
    // Well within the 60 s ack wait: t1's ack reached the server after the restart.
    assert_eq!(wait_turns(&file, 4).await, ["hold started", "hold done", "next started", "next done"]);
    agent.stop().await;
}

#[tokio::test]
async fn a_stop_mid_turn_hands_the_todo_back_at_once() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let go = swarm.dir.path().join("go");
    let mut config = swarm.config("a").await;
    // Each turn holds until the test lets it finish.
    config.turn_command = format!(
        "read body; echo \"$body started\" >> {file}; while [ ! -e {go} ]; do sleep 0.05; done; echo \"$body done\" >> {file}",
        file = file.display(),
        go = go.display()
    );
    let agent = Agent::start(config.clone(), Arc::new(FakeClock::new(T0))).await.unwrap();
    let todo = Todo { id: "t1".into(), source: "test".into(), body: "work\n".into() };
    swarm.js.publish("todo.a", serde_json::to_vec(&todo).unwrap().into()).await.unwrap().await.unwrap();
    wait_turns(&file, 1).await;
    agent.stop().await;

    // Handed back, not left for the 60 s ack wait: the next agent reruns it within the timeout.
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    wait_turns(&file, 2).await;
    std::fs::write(&go, "").unwrap();
    assert_eq!(wait_turns(&file, 3).await, ["work started", "work started", "work done"]);
    agent.stop().await;
}

/// The agent may not make its own consumer. Started before swarm-controller has made it, the
/// binary says what it waits for (once), keeps running, and consumes as soon as it is made; its
/// credential's attempt to make it itself is refused.
#[tokio::test]
async fn an_agent_started_before_its_consumer_waits_for_it_then_consumes() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let mut agent = swarm
        .start_binary_before_its_consumer("a", valid_from_until(0, 3600), &format!("cat >> {}", file.display()), "info")
        .await;
    agent.wait_for_log("consumer agent-a on stream TODO does not exist yet", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t1", "queued before the consumer").await;

    // The agent's own credential cannot make it either.
    let a_js = jetstream::new(swarm.server.agent_client("a").await.unwrap());
    let own = hyperhive_nats_objects::agent_consumer(&AgentName::parse("a").unwrap());
    let refused = a_js.get_stream_no_info("TODO").await.unwrap().create_consumer(own.config.clone()).await;
    assert!(refused.is_err(), "the agent made its own consumer: {refused:?}");

    swarm.make_consumer("a").await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    wait_turns(&file, 1).await;
    assert_eq!(turns(&file), ["queued before the consumer"]);
    assert_eq!(agent.log().matches("does not exist yet").count(), 1, "one line while waiting: {}", agent.log());
    assert!(!agent.has_exited(), "it waited rather than exiting: {}", agent.log());
}

#[tokio::test]
async fn the_binary_stops_cleanly_on_sigterm() {
    let swarm = Swarm::start().await;
    let mut agent = swarm.start_binary("a", valid_from_until(0, 3600)).await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    agent.signal(hyperhive_testkit::Signal::SIGTERM).unwrap();
    let status = agent.wait_exit(TIMEOUT).await.unwrap();
    assert!(status.success(), "{status}: {}", agent.log());
    assert!(agent.log().contains("SIGTERM: stopping"));
}

/// Another agent may publish only to its own queue, but JetStream drops a repeated message id
/// across the whole `TODO` stream: an id it can predict for b's next slot, published first into
/// its own queue, would make b's real todo be dropped as a duplicate.
#[tokio::test]
async fn a_slot_id_planted_by_another_agent_does_not_drop_the_slot() {
    let swarm = Swarm::start().await;
    let clock = FakeClock::new(T0 - time::Duration::seconds(30));
    swarm.put_schedules("b", vec![hourly("s1", "b's prompt")]).await;

    // Agent a plants, in its own queue, every id of b's 09:00 slot it can make.
    let a = async_nats::ConnectOptions::with_credentials_file(swarm.server.mint_agent("a").await.unwrap())
        .await
        .unwrap()
        .custom_inbox_prefix("_INBOX_a")
        .connect(swarm.server.url())
        .await
        .unwrap();
    let a_js = jetstream::new(a);
    let b = AgentName::parse("b").unwrap();
    let predictable = [Todo::for_slot(&b, "s1", "b's prompt", T0).id, "schedule:s1:2026-11-30T09:00:00Z".to_owned()];
    for id in &predictable {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let ack = a_js.publish_with_headers("todo.a", headers, "planted".into()).await.unwrap().await.unwrap();
        assert!(!ack.duplicate, "a's plant of {id} is stored");
    }

    let agent = Agent::start(swarm.config("b").await, Arc::new(clock.clone())).await.unwrap();
    clock.set(T0 + time::Duration::seconds(5));
    assert_eq!(wait_turns(&swarm.turns_file("b"), 1).await, ["b's prompt schedule:s1:b:2026-11-30T09:00:00Z"]);
    agent.stop().await;
}

#[tokio::test]
async fn a_turn_past_its_timeout_is_killed_whole_recorded_as_finished_and_not_rerun() {
    let swarm = Swarm::start().await;
    let (file, pids) = (swarm.turns_file("a"), swarm.dir.path().join("pids"));
    let mut config = swarm.config("a").await;
    config.turn_timeout = Duration::from_secs(2);
    config.turn_command = hanging_turn(&pids, &file);
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    // t1 hangs; t2 must still run; t1 delivered again must not run again.
    for (id, body) in [("t1", "hang"), ("t2", "next"), ("t1", "hang")] {
        publish_todo(&swarm, id, body).await;
    }
    wait_until_none_running(&turn_pids(&pids).await, TIMEOUT).await.unwrap();
    assert_eq!(wait_turns(&file, 2).await, ["hang t1", "next t2"]);
    settle(&swarm, &agent, 2).await;
    assert_eq!(turns(&file), ["hang t1", "next t2"], "the timed-out todo was acked and never rerun");
    agent.stop().await;
}

#[tokio::test]
async fn sigterm_mid_turn_leaves_no_process_of_the_turn_behind() {
    let swarm = Swarm::start().await;
    let (file, pids) = (swarm.turns_file("a"), swarm.dir.path().join("pids"));
    let mut agent = swarm.start_binary_running("a", valid_from_until(0, 3600), &hanging_turn(&pids, &file)).await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t1", "hang").await;
    let pids = turn_pids(&pids).await;
    agent.signal(hyperhive_testkit::Signal::SIGTERM).unwrap();
    let status = agent.wait_exit(TIMEOUT).await.unwrap();
    assert!(status.success(), "{status}: {}", agent.log());
    wait_until_none_running(&pids, TIMEOUT).await.unwrap();
}

/// The turn file's state, once it is readable.
fn turn_state(swarm: &Swarm, agent: &str) -> Option<hyperhive_hive_proto::agent_files::TurnState> {
    let path = swarm.dir.path().join(agent).join(hyperhive_hive_proto::agent_files::TURN_FILE);
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

async fn wait_turn_state(swarm: &Swarm, agent: &str, turn: Turn, todo: Option<&str>) {
    wait_until(&format!("turn.json showing {turn:?} {todo:?}"), TIMEOUT, || async {
        let state = turn_state(swarm, agent)?;
        (state.turn == turn && state.todo_id.as_deref() == todo).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_paused_agent_takes_no_todo_and_runs_them_in_order_on_resume() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let (pause, go) = (swarm.dir.path().join("pause"), swarm.dir.path().join("go"));
    let mut config = swarm.config("a").await;
    config.pause_file = Some(pause.clone());
    // A turn with the body `hold` waits for the test, so a pause can land mid-turn.
    config.turn_command = format!(
        "read body; echo \"$body\" >> {file}; while [ \"$body\" = hold ] && [ ! -e {go} ]; do sleep 0.05; done",
        file = file.display(),
        go = go.display()
    );
    std::fs::write(&pause, "").unwrap();
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    wait_turn_state(&swarm, "a", Turn::Paused, None).await;
    for (id, body) in [("t1", "hold"), ("t2", "two"), ("t3", "three")] {
        publish_todo(&swarm, id, body).await;
    }
    // Ten ticks of 50 ms span two pause polls: had the consumer fetched, a turn would have run.
    let ticks = agent.ticks();
    let start = *ticks.borrow();
    wait_until("ticks while paused", TIMEOUT, || async { (*ticks.borrow() >= start + 10).then_some(()) })
        .await
        .unwrap();
    assert!(turns(&file).is_empty(), "a paused agent ran {:?}", turns(&file));
    assert_eq!(swarm.queued_todos().await, 3);

    // Resumed: t1 runs; a pause mid-turn lets it finish but takes nothing more.
    std::fs::remove_file(&pause).unwrap();
    assert_eq!(wait_turns(&file, 1).await, ["hold"]);
    wait_turn_state(&swarm, "a", Turn::Working, Some("t1")).await;
    std::fs::write(&pause, "").unwrap();
    std::fs::write(&go, "").unwrap();
    wait_turn_state(&swarm, "a", Turn::Paused, None).await;
    wait_until("t1 acked", TIMEOUT, || async { (swarm.queued_todos().await == 2).then_some(()) }).await.unwrap();
    assert_eq!(turns(&file), ["hold"]);

    std::fs::remove_file(&pause).unwrap();
    assert_eq!(wait_turns(&file, 3).await, ["hold", "two", "three"]);
    wait_turn_state(&swarm, "a", Turn::Idle, None).await;
    settle(&swarm, &agent, 2).await;
    assert_eq!(turns(&file).len(), 3, "each todo ran once");
    agent.stop().await;
}

#[tokio::test]
async fn a_slot_missed_while_paused_fires_once_on_resume() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let pause = swarm.dir.path().join("pause");
    let mut config = swarm.config("a").await;
    config.pause_file = Some(pause.clone());
    let clock = FakeClock::new(T0 - time::Duration::seconds(30));
    swarm.put_schedules("a", vec![hourly("s1", "hello")]).await;
    std::fs::write(&pause, "").unwrap();
    let agent = Agent::start(config, Arc::new(clock.clone())).await.unwrap();
    // Three slots pass while paused.
    clock.set(T0 + time::Duration::minutes(2 * 60 + 5));
    settle(&swarm, &agent, 5).await;
    assert!(turns(&file).is_empty(), "a paused agent fired {:?}", turns(&file));

    std::fs::remove_file(&pause).unwrap();
    assert_eq!(wait_turns(&file, 1).await, ["hello schedule:s1:a:2026-11-30T11:00:00Z"]);
    settle(&swarm, &agent, 3).await;
    assert_eq!(turns(&file).len(), 1, "the latest missed slot fires once");
    agent.stop().await;
}

/// The lifetime of the short credentials below, and how long before its expiry each is renewed:
/// a third of it, as the controller does.
const SHORT_LIFE: u64 = 3;
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_millis(1200);
/// A todo delivered at the very moment the connection is replaced is lost in flight and comes
/// back after the consumer's 60 s ack wait: not lost, not repeated, only late.
const LATE_REDELIVERY: Duration = Duration::from_secs(60 + 20);

#[tokio::test]
async fn renewed_credentials_are_taken_up_without_a_restart_and_every_todo_runs_once() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    // A turn long enough to be caught mid-way by a reconnect (or, were the agent restarted, to
    // leave a "started" without its "done" and run again).
    let turn =
        format!("read body; echo \"$body started\" >> {f}; sleep 0.2; echo \"$body done\" >> {f}", f = file.display());
    let first = expiring_in(SHORT_LIFE);
    let mut agent = swarm.start_binary_running("a", first, &turn).await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    let pid = agent.pid();

    const RENEWALS: usize = 5;
    let (done, renewing) = tokio::sync::watch::channel(false);
    let renew = async {
        let mut expires_at = first.expires_at.unwrap();
        for _ in 0..RENEWALS {
            sleep_until_before(expires_at, RENEW_BEFORE_EXPIRY).await;
            let next = expiring_in(SHORT_LIFE);
            swarm.server.mint_agent_with("a", next).await.unwrap();
            expires_at = next.expires_at.unwrap();
        }
        // The last one lives on, so the queue can drain after the renewals.
        sleep_until_before(expires_at, RENEW_BEFORE_EXPIRY).await;
        swarm.server.mint_agent_with("a", valid_from_until(0, 3600)).await.unwrap();
        done.send_replace(true);
    };
    let publish = async {
        let mut sent = 0;
        while !*renewing.borrow() {
            publish_todo(&swarm, &format!("t{sent}"), &format!("n{sent}")).await;
            sent += 1;
            // Paced a little slower than the turns, so todos arrive all along.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        sent
    };
    let ((), sent) = tokio::join!(renew, publish);
    assert!(sent >= 20, "only {sent} todos");

    let lines = wait_until(&format!("{sent} todos run"), LATE_REDELIVERY, || async {
        let lines = turns(&file);
        (lines.len() >= 2 * sent).then_some(lines)
    })
    .await
    .unwrap();
    wait_until("an empty queue", TIMEOUT, || async { (swarm.queued_todos().await == 0).then_some(()) }).await.unwrap();
    let mut lines = if turns(&file).len() > lines.len() { turns(&file) } else { lines };
    lines.sort();
    let mut expected: Vec<String> = (0..sent).flat_map(|n| [format!("n{n} started"), format!("n{n} done")]).collect();
    expected.sort();
    assert_eq!(lines, expected, "every todo ran exactly once");

    assert!(!agent.has_exited(), "{}", agent.log());
    assert_eq!(agent.pid(), pid);
    // The last, long-lived renewal may have been written just now: the watch sees it within a poll.
    let log = wait_until("the last renewal to be taken up", TIMEOUT, || async {
        let log = agent.log();
        (log.matches("credential renewed, expires at").count() > RENEWALS).then_some(log)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", agent.log()));
    assert_eq!(log.matches("hive-agent started").count(), 1, "{log}");
    assert!(!log.contains("NATS refused the credential"), "a credential expired before its renewal: {log}");
}

#[tokio::test]
async fn an_expired_credential_stops_the_todos_until_a_fresh_one_is_written() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let turn = format!("echo \"$(cat) $HIVE_TODO_ID\" >> {}", file.display());
    // Each sign-in attempt is logged at debug level, so the test can count them.
    let mut agent =
        swarm.start_binary_with("a", expiring_in(SHORT_LIFE), &turn, "info,hive_agent::connect=debug").await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t1", "before").await;
    assert_eq!(wait_turns(&file, 1).await, ["before t1"]);

    agent.wait_for_log("NATS refused the credential", TIMEOUT).await.unwrap();
    let attempts = || agent.log().matches("signing in to NATS").count();
    let before = attempts();
    publish_todo(&swarm, "t2", "waiting").await;
    wait_until("two more sign-in attempts", TIMEOUT, || async { (attempts() >= before + 2).then_some(()) })
        .await
        .unwrap();
    assert_eq!(turns(&file), ["before t1"], "a todo ran on an expired credential");
    assert_eq!(swarm.queued_todos().await, 1);

    // A fresh credential in the file: the next attempt signs in with it.
    swarm.server.mint_agent_with("a", valid_from_until(0, 3600)).await.unwrap();
    assert_eq!(wait_turns(&file, 2).await, ["before t1", "waiting t2"]);
    assert!(!agent.has_exited(), "{}", agent.log());
    assert_eq!(agent.log().matches("hive-agent started").count(), 1);
}

#[tokio::test]
async fn a_malformed_credential_file_is_reported_and_the_current_credential_kept() {
    let mut swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let turn = format!("echo \"$(cat) $HIVE_TODO_ID\" >> {}", file.display());
    let mut agent = swarm.start_binary_running("a", valid_from_until(0, 3600), &turn).await;
    agent.wait_for_log("consuming todos", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t1", "one").await;
    wait_turns(&file, 1).await;

    // Half a credential (as a writer that does not rename would leave it): the JWT, no seed.
    let creds = swarm.creds_file("a");
    let good = std::fs::read_to_string(&creds).unwrap();
    let seed = good.lines().find(|l| l.starts_with("SU")).unwrap().to_owned();
    let jwt = hyperhive_nats_creds::read_creds_jwt(&creds).unwrap();
    std::fs::write(&creds, &good[..good.find("-----BEGIN USER NKEY SEED").unwrap()]).unwrap();
    agent.wait_for_log("ignoring the rewritten credential file", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t2", "two").await;
    assert_eq!(wait_turns(&file, 2).await[1], "two t2");

    // NATS restarts while the file is still bad: the agent signs in again with the credential
    // it has.
    swarm.server.nats().stop();
    swarm.server.nats().start_again().await.unwrap();
    swarm.js = controller_js(&swarm.server).await;
    publish_todo(&swarm, "t3", "three").await;
    assert_eq!(wait_turns(&file, 3).await[2], "three t3");

    // A valid one afterwards is taken up.
    swarm.server.mint_agent_with("a", valid_from_until(0, 7200)).await.unwrap();
    agent.wait_for_log("credential renewed, expires at", TIMEOUT).await.unwrap();
    publish_todo(&swarm, "t4", "four").await;
    assert_eq!(wait_turns(&file, 4).await, ["one t1", "two t2", "three t3", "four t4"]);

    let log = agent.log();
    assert_eq!(log.matches("ignoring the rewritten credential file").count(), 1, "{log}");
    assert!(!log.contains(&seed) && !log.contains(&jwt), "a secret in the log: {log}");
    assert!(!agent.has_exited() && log.matches("hive-agent started").count() == 1, "{log}");
}

#[tokio::test]
async fn a_todo_handed_to_a_pull_from_before_a_partition_comes_back_at_once() {
    let swarm = Swarm::start().await;
    let file = swarm.turns_file("a");
    let (config, proxy) = swarm.config_through_proxy("a").await;
    let agent = Agent::start(config, Arc::new(FakeClock::new(T0))).await.unwrap();
    publish_todo(&swarm, "t0", "before").await;
    wait_turns(&file, 1).await;
    // A partition long enough for the agent to give its connection up (unanswered pings) while
    // the pull requests it made meanwhile wait in that connection. When it ends, they reach the
    // server (the proxy passes what it held, as TCP does with what it retransmits), and the
    // server hands the next todo to one of them: to nobody.
    proxy.stall();
    wait_until(
        "the agent giving its mute connection up and dialling again",
        hive_agent::connect::PING_INTERVAL * 6,
        || async { (proxy.live_connections() > 1).then_some(()) },
    )
    .await
    .unwrap();
    proxy.pass();
    let healed = std::time::Instant::now();
    publish_todo(&swarm, "t1", "after").await;
    let handed_back_within = hive_agent::lost_delivery::WATCH_AFTER_RECONNECT.min(Duration::from_secs(20));
    let waited = wait_until("the todo after the partition", Duration::from_secs(120), || async {
        (turns(&file).len() >= 2).then(|| healed.elapsed())
    })
    .await
    .unwrap();
    assert!(
        waited < handed_back_within,
        "the todo ran {waited:?} after the partition ended: it waited out the ack wait ({:?})",
        hyperhive_nats_objects::consumers::AGENT_ACK_WAIT
    );
    assert_eq!(turns(&file)[1], "after t1", "{:?}", turns(&file));
    agent.stop().await;
}
