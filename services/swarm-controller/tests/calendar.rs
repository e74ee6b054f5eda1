//! Calendar schedules and schedule names end to end: the controller on its socket, a
//! JWT-mode nats-server, and a hive-agent run in-process on a fake clock, so a per-minute cron
//! slot or a slot on a day the clock changes fires without waiting for it. Names are unique,
//! agents are checked against the roster, and bad calendars are refused with nothing stored.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use common::{Controller, swarmctl_on as swarmctl};
use hive_agent::Agent;
use hive_agent::clock::FakeClock;
use hive_agent::config::Config;
use hyper::http::{Method, StatusCode};
use hyperhive_nats_objects::{AGENT_WANTED_BUCKET, AGENTS_BUCKET, SCHEDULE_DEFINITIONS_BUCKET};
use hyperhive_schedule::{AgentName, format_instant, parse_instant, whole_seconds_utc};
use hyperhive_testkit::wait_until;
use serde_json::{Value, json};
use time::OffsetDateTime;

const PATIENCE: Duration = Duration::from_secs(20);

fn now() -> OffsetDateTime {
    whole_seconds_utc(OffsetDateTime::now_utc())
}

/// The agent `name` in-process, on `clock`, each turn appending its todo id to `turns`.
async fn start_agent(c: &Controller, name: &str, dir: &Path, clock: &FakeClock) -> Agent {
    let agent = AgentName::parse(name).unwrap();
    // The agent's consumer, as the controller makes it when it mints the agent's credential.
    hyperhive_nats_objects::agent_consumer(&agent).ensure(&c.js).await.unwrap();
    let config = Config {
        name: agent,
        nats_url: c.nats.url(),
        creds: c.nats.mint_agent(name).await.unwrap(),
        state_dir: dir.join(name),
        schedule_tick: Duration::from_millis(50),
        turn_command: format!("cat >/dev/null; echo \"$HIVE_TODO_ID\" >> {}", turns_file(dir, name).display()),
        turn_timeout: Duration::from_secs(60),
        pause_file: None,
        supervisor_pid: None,
    };
    Agent::start(config, Arc::new(clock.clone())).await.unwrap()
}

fn turns_file(dir: &Path, agent: &str) -> PathBuf {
    dir.join(format!("{agent}.turns"))
}

/// The todo ids the agent ran, once one ends with `schedule:<id>:<agent>:<slot>`.
async fn wait_for_slot(dir: &Path, agent: &str, id: &str, slot: &str) -> Vec<String> {
    let todo = format!("schedule:{id}:{agent}:{slot}");
    wait_until(&format!("{agent} to run {todo}"), PATIENCE, || async {
        let text = std::fs::read_to_string(turns_file(dir, agent)).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.iter().any(|l| l == &todo).then_some(lines)
    })
    .await
    .unwrap()
}

/// The turns the agent ran, read after two more whole ticks and the turns they fired: whatever
/// the clock's last setting fires has run by then.
async fn settled_turns(agent: &Agent, dir: &Path, name: &str) -> Vec<String> {
    let ticks = agent.ticks();
    let start = *ticks.borrow();
    wait_until("two more ticks", PATIENCE, || async { (*ticks.borrow() >= start + 2).then_some(()) }).await.unwrap();
    let read = || std::fs::read_to_string(turns_file(dir, name)).unwrap_or_default();
    // A fire of those ticks is a todo in the queue, then a turn: wait until two reads a tick
    // apart agree.
    wait_until("the turns to settle", PATIENCE, || async {
        let first = read();
        let at = *ticks.borrow();
        wait_until("a tick", PATIENCE, || async { (*ticks.borrow() > at).then_some(()) }).await.unwrap();
        (read() == first).then_some(())
    })
    .await
    .unwrap();
    read().lines().map(str::to_owned).collect()
}

async fn create(c: &Controller, body: Value) -> (StatusCode, Value) {
    c.json(Method::POST, "/api/schedules", &body).await
}

#[tokio::test]
async fn a_cron_schedule_reaches_the_agents_key_and_the_agent_fires_it_on_its_calendar() {
    let c = Controller::start(60).await;
    let dir = tempfile::tempdir().unwrap();
    let anchor = format_instant(now());
    let (status, minutely) = create(
        &c,
        json!({"name": "every minute", "agents": ["a"], "body": "tick", "anchor": anchor,
               "calendar": "* * * * *", "allow_unknown_agents": true}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{minutely}");
    let (status, night) = create(
        &c,
        json!({"name": "half past two in Berlin", "agents": ["a"], "body": "night", "anchor": anchor,
               "calendar": "30 2 * * *", "tz": "Europe/Berlin", "interval": null, "allow_unknown_agents": true}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{night}");
    assert_eq!((minutely["tz"].as_str(), minutely["interval"].is_null()), (Some("UTC"), true), "{minutely}");
    assert_eq!(minutely["agent_status"], json!({"a": "unknown"}));
    // Each answer says when it fires next, by its calendar in its zone: 02:30 in Berlin is
    // 01:30 UTC in December.
    let next = |v: &Value| parse_instant(v["next_fire"].as_str().unwrap()).unwrap();
    let ahead = next(&night) - now();
    assert!(night["next_fire"].as_str().unwrap().ends_with("T01:30:00Z"), "{night}");
    assert!(ahead > time::Duration::ZERO && ahead <= time::Duration::days(1), "{night}");
    assert!(next(&minutely) - now() <= time::Duration::minutes(1), "{minutely}");
    let (_, listed) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
    let listed: Vec<&Value> = listed.as_array().unwrap().iter().collect();
    assert!(listed.iter().all(|s| s["next_fire"].is_string()), "{listed:?}");
    let (minutely, night) = (minutely["id"].as_str().unwrap().to_owned(), night["id"].as_str().unwrap().to_owned());

    // The agent's key carries the calendar and its zone.
    let doc = c.agent_key("a").await.expect("a's key");
    let seen = doc.schedules.iter().find(|s| s.id == night).unwrap();
    assert_eq!(
        (seen.calendar.as_deref(), seen.tz.as_deref(), seen.interval),
        (Some("30 2 * * *"), Some("Europe/Berlin"), None)
    );
    let seen = doc.schedules.iter().find(|s| s.id == minutely).unwrap();
    assert_eq!((seen.calendar.as_deref(), seen.tz.as_deref()), (Some("* * * * *"), Some("UTC")));

    // Five seconds past the next whole minute, on the agent's clock: that minute's slot fires.
    let next_minute = {
        let t = now() + time::Duration::minutes(1);
        t.replace_second(0).unwrap()
    };
    let clock = FakeClock::new(next_minute + time::Duration::seconds(5));
    let agent = start_agent(&c, "a", dir.path(), &clock).await;
    wait_for_slot(dir.path(), "a", &minutely, &format_instant(next_minute)).await;

    // The day Berlin springs forward: 02:30 does not exist, the slot fires once at 03:00 +02:00
    // (01:00 UTC); the per-minute schedule catches up once, with the latest minute only.
    clock.set(parse_instant("2027-03-28T01:00:30Z").unwrap());
    wait_for_slot(dir.path(), "a", &night, "2027-03-28T01:00:00Z").await;
    wait_for_slot(dir.path(), "a", &minutely, "2027-03-28T01:00:00Z").await;
    let turns = settled_turns(&agent, dir.path(), "a").await;
    let of = |id: &str| turns.iter().filter(|t| t.starts_with(&format!("schedule:{id}:"))).count();
    assert_eq!((of(&minutely), of(&night)), (2, 1), "{turns:?}");

    // The day it falls back: the first 02:30 (+02:00, 00:30 UTC) fires; the second does not.
    clock.set(parse_instant("2027-10-31T00:30:10Z").unwrap());
    wait_for_slot(dir.path(), "a", &night, "2027-10-31T00:30:00Z").await;
    clock.set(parse_instant("2027-10-31T01:30:10Z").unwrap());
    wait_for_slot(dir.path(), "a", &minutely, "2027-10-31T01:30:00Z").await;
    let turns = settled_turns(&agent, dir.path(), "a").await;
    let nights: Vec<&String> = turns.iter().filter(|t| t.starts_with(&format!("schedule:{night}:"))).collect();
    assert_eq!(nights.len(), 2, "one fire on each day the clock changes: {nights:?}");

    // What each schedule last fired, as the agent's turn history records it. (The records are
    // written beside the turns, so wait for them.)
    for (id, slot) in [(&night, "2027-10-31T00:30:00Z"), (&minutely, "2027-10-31T01:30:00Z")] {
        let fired = wait_until(&format!("the history to record {slot} of {id}"), PATIENCE, || async {
            let (status, fired) = c.json(Method::GET, &format!("/api/schedules/{id}/fired"), &Value::Null).await;
            assert_eq!(status, StatusCode::OK, "{fired}");
            (fired["agents"]["a"]["slot"] == slot).then_some(fired)
        })
        .await
        .unwrap();
        let turn = &fired["agents"]["a"]["turn"];
        assert_eq!(
            (turn["outcome"].as_str(), turn["todo_id"].as_str()),
            (Some("succeeded"), Some(&*format!("schedule:{id}:a:{slot}")))
        );
    }
    let (status, missing) = c.json(Method::GET, "/api/schedules/nope/fired", &Value::Null).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    agent.stop().await;
}

/// Puts `agent` on the roster under hive `h1`, destroyed if asked.
async fn on_roster(c: &Controller, agent: &str, destroyed: bool) {
    let roster = c.js.get_key_value(AGENTS_BUCKET).await.unwrap();
    let entry = json!({"hive": "h1", "origin": "declared", "created_at": "2026-12-01T00:00:00Z"});
    roster.put(agent, entry.to_string().into()).await.unwrap();
    if destroyed {
        let wanted = c.js.get_key_value(AGENT_WANTED_BUCKET).await.unwrap();
        let state = json!({"state": "destroyed", "set_at": "2026-12-01T00:00:00Z", "set_by": "test"});
        wanted.put(format!("h1.{agent}"), state.to_string().into()).await.unwrap();
    }
}

fn calendar_body(name: &str, agents: &[&str]) -> Value {
    json!({"name": name, "agents": agents, "body": "b", "anchor": "2026-12-01T00:00:00Z", "calendar": "0 9 * * 1-5",
           "tz": "Europe/Berlin"})
}

#[tokio::test]
async fn names_are_unique_agents_must_be_on_the_roster_and_bad_calendars_store_nothing() {
    let c = Controller::start(60).await;
    on_roster(&c, "alpha", false).await;
    on_roster(&c, "gone", true).await;

    let (status, standup) = create(&c, calendar_body("standup", &["alpha"])).await;
    assert_eq!(status, StatusCode::CREATED, "{standup}");
    assert_eq!(standup["agent_status"], json!({"alpha": "known"}));
    let id = standup["id"].as_str().unwrap().to_owned();

    // A second schedule of that name: 409 naming the one that has it.
    let (status, taken) = create(&c, calendar_body("standup", &["alpha"])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{taken}");
    assert!(taken["error"].as_str().unwrap().contains(&id), "{taken}");
    assert_eq!(taken["current"]["id"], json!(id));
    // A rename onto it too; renaming to a free name works.
    let (_, other) = create(&c, calendar_body("retro", &["alpha"])).await;
    let other_path = format!("/api/schedules/{}", other["id"].as_str().unwrap());
    let (status, renamed) = c.json(Method::PATCH, &other_path, &json!({"name": "standup"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{renamed}");
    assert!(renamed["error"].as_str().unwrap().contains(&id), "{renamed}");
    let (status, _) = c.json(Method::PATCH, &other_path, &json!({"name": "retro 2"})).await;
    assert_eq!(status, StatusCode::OK);

    // An agent not on the roster is refused, or taken on purpose and shown as unknown.
    let before = c.last_sequence(SCHEDULE_DEFINITIONS_BUCKET).await;
    let (status, refused) = create(&c, calendar_body("for zed", &["alpha", "zed"])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(message.contains("zed is not on the roster") && message.contains("allow_unknown_agents"), "{message}");
    let (status, added) = c.json(Method::PATCH, &other_path, &json!({"agents": ["alpha", "zed"]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{added}");
    assert_eq!(c.last_sequence(SCHEDULE_DEFINITIONS_BUCKET).await, before, "nothing stored");
    assert!(c.agent_key("zed").await.is_none());
    let mut allowed = calendar_body("for zed", &["alpha", "zed", "gone"]);
    allowed["allow_unknown_agents"] = json!(true);
    let (status, allowed) = create(&c, allowed).await;
    assert_eq!(status, StatusCode::CREATED, "{allowed}");
    assert_eq!(allowed["allow_unknown_agents"], json!(true));
    let path = format!("/api/schedules/{}", allowed["id"].as_str().unwrap());
    let (_, shown) = c.json(Method::GET, &path, &Value::Null).await;
    assert_eq!(shown["agent_status"], json!({"alpha": "known", "gone": "destroyed", "zed": "unknown"}));

    // Bad calendars: a clear 400 each, and nothing stored.
    let before = c.last_sequence(SCHEDULE_DEFINITIONS_BUCKET).await;
    let with = |key: &str, value: Value| {
        let mut body = calendar_body("bad", &["alpha"]);
        body[key] = value;
        body
    };
    let mut tz_alone = calendar_body("bad", &["alpha"]);
    tz_alone.as_object_mut().unwrap().remove("calendar");
    tz_alone["interval"] = json!(3600);
    for (body, needle) in [
        (with("calendar", json!("0 0 9 * * 1-5")), "has 6 fields"),
        (with("tz", json!("Europe/Atlantis")), "not in the time zone database"),
        (with("calendar", json!("0 0 30 2 *")), "never fires"),
        (with("interval", json!(3600)), "either interval or calendar, not both"),
        (tz_alone, "tz is the time zone of a calendar"),
    ] {
        let (status, answer) = create(&c, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(needle), "{body}: {answer}");
    }
    let (status, answer) = c.json(Method::PATCH, &path, &json!({"calendar": "0 0 31 4 *"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(c.last_sequence(SCHEDULE_DEFINITIONS_BUCKET).await, before, "nothing stored");
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn failed(out: Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

// swarmctl runs as a blocking child process while the controller serves in-process: a second
// worker thread keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swarmctl_adds_cron_schedules_and_every_verb_takes_a_name_or_an_id() {
    let c = Controller::start(60).await;
    on_roster(&c, "alpha", false).await;
    let socket = c.socket.clone();
    let add = ["schedule", "add", "--name", "weekday mornings", "--agent", "alpha", "--body", "standup"];
    let added = ok(swarmctl(
        &socket,
        &[&add[..], &["--anchor", "2026-12-01T00:00:00Z", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin"]].concat(),
    ));
    let id = added.lines().next().unwrap().trim_start_matches("id:").trim().to_owned();
    assert!(added.contains("calendar:  0 9 * * 1-5") && added.contains("tz:        Europe/Berlin"), "{added}");

    // Shown by name: the next fires at 09:00 in Berlin, and what is known of the last fire.
    let shown = ok(swarmctl(&socket, &["schedule", "show", "weekday mornings"]));
    assert!(shown.contains(&format!("id:        {id}")), "{shown}");
    let fires: Vec<&str> = shown.lines().filter(|l| l.starts_with("  20")).collect();
    assert_eq!(fires.len(), 5, "{shown}");
    assert!(fires.iter().all(|f| f.contains(" 09:00 +0")), "{shown}");
    assert!(
        shown.contains("last fired (the latest slot each agent's turn history records):\n  alpha  none recorded\n"),
        "{shown}"
    );
    let json: Value = serde_json::from_str(&ok(swarmctl(&socket, &["schedule", "show", &id, "--json"]))).unwrap();
    assert_eq!(
        (json["name"].as_str(), &json["fired"]),
        (Some("weekday mornings"), &json!({"agents": {"alpha": null}}))
    );
    let list = ok(swarmctl(&socket, &["schedule", "list"]));
    assert!(list.contains("0 9 * * 1-5 (Europe/Berlin)") && list.contains("09:00 +0"), "{list}");

    // The same name again: refused, naming the schedule that has it.
    let again = failed(swarmctl(&socket, &[&add[..], &["--cron", "@daily"]].concat()));
    assert!(again.contains(&id), "{again}");
    // An agent not on the roster: refused, pointing at the flag; with it, marked unknown.
    let stranger = ["schedule", "add", "--name", "stranger", "--agent", "zed", "--body", "b", "--cron", "@hourly"];
    assert!(failed(swarmctl(&socket, &stranger)).contains("allow_unknown_agents"));
    let shown = ok(swarmctl(&socket, &[&stranger[..], &["--allow-unknown-agent"]].concat()));
    assert!(shown.contains("zed (unknown)") && shown.contains("unknown agents allowed: yes"), "{shown}");
    // A rename onto a taken name: refused, naming the schedule that has it.
    let rename = failed(swarmctl(&socket, &["schedule", "edit", "stranger", "--name", "weekday mornings"]));
    assert!(rename.contains(&id) && !rename.contains("the current version is"), "{rename}");
    // A cron line given to --every points at --cron.
    let every = failed(swarmctl(
        &socket,
        &["schedule", "add", "--name", "x", "--agent", "alpha", "--body", "b", "--every", "0 9 * * 1-5"],
    ));
    assert!(every.contains("use --cron"), "{every}");

    // edit, pause, resume and rm by name; edit by id too.
    let edited = ok(swarmctl(
        &socket,
        &["schedule", "edit", "weekday mornings", "--cron", "30 8 * * 1-5", "--tz", "America/New_York"],
    ));
    assert!(edited.contains("calendar:  30 8 * * 1-5") && edited.contains("tz:        America/New_York"), "{edited}");
    let edited = ok(swarmctl(&socket, &["schedule", "edit", &id, "--every", "1h"]));
    assert!(edited.contains("every:     1h") && !edited.contains("calendar:"), "{edited}");
    assert!(ok(swarmctl(&socket, &["schedule", "pause", "weekday mornings"])).contains(&id));
    assert!(ok(swarmctl(&socket, &["schedule", "resume", "weekday mornings"])).contains(&id));
    assert!(ok(swarmctl(&socket, &["schedule", "rm", "weekday mornings"])).contains(&id));
    let gone = failed(swarmctl(&socket, &["schedule", "show", "weekday mornings"]));
    assert!(gone.contains("no schedule with id or name"), "{gone}");
}
