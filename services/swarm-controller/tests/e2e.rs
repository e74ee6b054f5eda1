//! End to end: the swarm-controller and swarmctl binaries, two hive-agents
//! (whose turn command appends each todo to a file) and a JWT-mode nats-server.
//!
//! Needs `cargo build -p hive-agent -p swarmctl` first (found with `project_binary`).
//!
//! Slots are 2 s apart and agents tick every 200 ms. Where a test must let slots pass (a pause,
//! an agent stopped across several slots) it waits for the wall clock to pass a computed instant:
//! that instant is the condition, not a stand-in for one.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hyperhive_nats_objects::AGENT_SCHEDULES_BUCKET;
use hyperhive_schedule::{parse_instant, whole_seconds_utc};
use hyperhive_testkit::{NatsJwt, Process, project_binary, wait_until};
use tempfile::TempDir;
use time::OffsetDateTime;

const EVERY: i64 = 2;
const PATIENCE: Duration = Duration::from_secs(30);
/// `2026-11-30T09:00:00Z`: the slot at the end of a fired todo's id.
const SLOT_CHARS: usize = 20;

struct Swarm {
    nats: NatsJwt,
    dir: TempDir,
    socket: PathBuf,
    _controller: Process,
    /// Every process each agent ran, oldest first: their logs together are its whole history.
    agents: Vec<(String, Process)>,
}

/// One fire an agent logged: (schedule id, slot).
type Fire = (String, OffsetDateTime);

impl Swarm {
    async fn start(agents: &[&str]) -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/controller.sock");
        // With the NATS directory the agents are minted in: the controller makes each minted
        // agent's consumer (at start and every pass), which the agent then binds to.
        let nats_dir = nats.creds_dir().to_str().unwrap().to_owned();
        let env = [("SWARM_RECONCILE_SECS", "1"), ("SWARM_NATS_DIR", nats_dir.as_str()), ("NO_COLOR", "1")];
        let controller = common::daemon_process(&nats, &socket, &env).await;
        let mut swarm = Self { nats, dir, socket, _controller: controller, agents: Vec::new() };
        for agent in agents {
            swarm.start_agent(agent).await;
        }
        swarm
    }

    fn turns_file(&self, agent: &str) -> PathBuf {
        self.dir.path().join(format!("{agent}.turns"))
    }

    async fn start_agent(&mut self, agent: &str) {
        let creds = self.nats.mint_agent(agent).await.unwrap();
        let state = self.dir.path().join(format!("{agent}.state"));
        let turn = format!("printf '%s\\t%s\\n' \"$HIVE_TODO_ID\" \"$(cat)\" >> {}", self.turns_file(agent).display());
        let mut process = Process::builder(project_binary("hive-agent").unwrap())
            .env("HIVE_AGENT_NAME", agent)
            .env("HIVE_AGENT_NATS_URL", self.nats.url())
            .env("HIVE_AGENT_CREDS", creds)
            .env("HIVE_AGENT_STATE_DIR", state)
            .env("HIVE_AGENT_SCHEDULE_TICK", "200ms")
            .env("HIVE_AGENT_TURN_COMMAND", turn)
            .env("NO_COLOR", "1")
            .start(&format!("hive-agent-{agent}"))
            .unwrap();
        process.wait_for_log("consuming todos", PATIENCE).await.unwrap();
        self.agents.push((agent.to_owned(), process));
    }

    fn kill_agent(&mut self, agent: &str) {
        for (name, process) in &mut self.agents {
            if name == agent {
                process.kill();
            }
        }
    }

    /// Every fire the agent's processes logged, in log order.
    fn fires(&self, agent: &str) -> Vec<Fire> {
        let mut out = Vec::new();
        for (name, process) in &self.agents {
            if name != agent {
                continue;
            }
            for line in process.log().lines().filter(|l| l.contains("fired schedule slot")) {
                let field = |key: &str| {
                    let start = line.find(&format!("{key}="))? + key.len() + 1;
                    line[start..].split_whitespace().next().map(str::to_owned)
                };
                let (Some(id), Some(slot)) = (field("schedule"), field("slot")) else {
                    panic!("unparsable fire line: {line}");
                };
                out.push((id, parse_instant(&slot).unwrap()));
            }
        }
        out
    }

    fn fires_of(&self, agent: &str, id: &str) -> Vec<OffsetDateTime> {
        self.fires(agent).into_iter().filter(|(i, _)| i == id).map(|(_, s)| s).collect()
    }

    /// The turns the agent ran: (todo id, body).
    fn turns(&self, agent: &str) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.turns_file(agent)).unwrap_or_default();
        text.lines()
            .map(|l| {
                let (id, body) = l.split_once('\t').expect("id TAB body");
                (id.to_owned(), body.to_owned())
            })
            .collect()
    }

    /// The slots of schedule `id` whose turn the agent ran (a todo id ends with its slot).
    fn turn_slots(&self, agent: &str, id: &str) -> BTreeSet<String> {
        let prefix = format!("schedule:{id}:");
        self.turns(agent)
            .into_iter()
            .filter(|(todo, _)| todo.starts_with(&prefix))
            .map(|(todo, _)| todo[todo.len().saturating_sub(SLOT_CHARS)..].to_owned())
            .collect()
    }

    fn swarmctl(&self, args: &[&str]) -> String {
        let out =
            Command::new(common::swarmctl_binary()).arg("--socket").arg(&self.socket).args(args).output().unwrap();
        assert!(out.status.success(), "swarmctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn add(&self, args: &[&str]) -> String {
        // These tests run no hive: their agents are not on the roster.
        let out = self.swarmctl(&[&["schedule", "add", "--allow-unknown-agent"], args].concat());
        out.lines().next().unwrap().trim_start_matches("id:").trim().to_owned()
    }

    /// Every fire of every agent is unique and on the schedule's grid.
    fn assert_no_slot_fired_twice(&self, agents: &[&str]) {
        for agent in agents {
            let fires = self.fires(agent);
            let unique: BTreeSet<&Fire> = fires.iter().collect();
            assert_eq!(unique.len(), fires.len(), "{agent} fired a slot twice: {fires:?}");
            let turns = self.turns(agent);
            let unique: BTreeSet<&String> = turns.iter().map(|(id, _)| id).collect();
            assert_eq!(unique.len(), turns.len(), "{agent} ran a todo twice: {turns:?}");
        }
    }
}

fn now() -> OffsetDateTime {
    whole_seconds_utc(OffsetDateTime::now_utc())
}

/// Waits until the wall clock reaches `t` (slots must actually pass).
async fn until(t: OffsetDateTime) {
    let wait = (t - OffsetDateTime::now_utc()).max(time::Duration::ZERO);
    tokio::time::sleep(Duration::try_from(wait).unwrap()).await;
}

fn socket_missing(path: &Path) -> bool {
    !path.exists()
}

#[tokio::test]
async fn a_schedule_fires_in_both_agents_and_edits_pause_resume_and_rm_behave() {
    let mut swarm = Swarm::start(&["a", "b"]).await;
    let id = swarm.add(&["--name", "tick", "--agent", "a", "--agent", "b", "--body", "v1", "--every", "2s"]);

    wait_until("both agents run the turns of two slots", PATIENCE, || async {
        let both: BTreeSet<String> =
            swarm.turn_slots("a", &id).intersection(&swarm.turn_slots("b", &id)).cloned().collect();
        (both.len() >= 2).then_some(())
    })
    .await
    .unwrap();

    // Body edit: later turns carry the new body, nothing refires.
    swarm.swarmctl(&["schedule", "edit", &id, "--body", "v2"]);
    for agent in ["a", "b"] {
        wait_until(&format!("{agent} runs the edited body"), PATIENCE, || async {
            swarm.turns(agent).iter().any(|(_, body)| body == "v2").then_some(())
        })
        .await
        .unwrap();
    }
    swarm.assert_no_slot_fired_twice(&["a", "b"]);

    // Pause across two slots, then resume: none of the paused slots ever fires.
    swarm.swarmctl(&["schedule", "pause", &id]);
    let paused_at = now() + time::Duration::seconds(1);
    until(paused_at + time::Duration::seconds(2 * EVERY + 1)).await;
    let resumed_at = now();
    swarm.swarmctl(&["schedule", "resume", &id]);
    for agent in ["a", "b"] {
        wait_until(&format!("{agent} fires after the resume"), PATIENCE, || async {
            swarm.fires_of(agent, &id).iter().any(|s| *s >= resumed_at).then_some(())
        })
        .await
        .unwrap();
        let in_pause: Vec<_> =
            swarm.fires_of(agent, &id).into_iter().filter(|s| *s > paused_at && *s < resumed_at).collect();
        assert!(in_pause.is_empty(), "{agent} fired paused slots {in_pause:?}");
    }

    // The reconcile pass repairs a key deleted behind the controller's back.
    let js = async_nats::jetstream::new(
        swarm_controller::nats::connect(&swarm.nats.url(), Some(&swarm.nats.controller_creds())).await.unwrap(),
    );
    let kv = js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap();
    kv.delete("a").await.unwrap();
    wait_until("the reconcile pass rewrites a's key", PATIENCE, || async { kv.get("a").await.ok().flatten() })
        .await
        .unwrap();

    // rm: nothing fires afterwards.
    swarm.swarmctl(&["schedule", "rm", &id]);
    let removed_at = now() + time::Duration::seconds(1);
    until(removed_at + time::Duration::seconds(2 * EVERY)).await;
    for agent in ["a", "b"] {
        let late: Vec<_> = swarm.fires_of(agent, &id).into_iter().filter(|s| *s > removed_at).collect();
        assert!(late.is_empty(), "{agent} fired {late:?} after rm");
    }
    swarm.assert_no_slot_fired_twice(&["a", "b"]);
    swarm.kill_agent("a");
    swarm.kill_agent("b");
    assert!(!socket_missing(&swarm.socket));
}

#[tokio::test]
async fn restarts_refire_nothing_downtime_fires_one_catch_up_and_a_one_shot_fires_once() {
    let mut swarm = Swarm::start(&["a", "b"]).await;
    let id = swarm.add(&["--name", "tick", "--agent", "a", "--agent", "b", "--body", "x", "--every", "2s"]);
    for agent in ["a", "b"] {
        wait_until(&format!("{agent} fires"), PATIENCE, || async {
            (!swarm.fires_of(agent, &id).is_empty()).then_some(())
        })
        .await
        .unwrap();
    }

    // kill -9 and restart a at once: its restarted process fires only later slots.
    let before_kill = *swarm.fires_of("a", &id).last().unwrap();
    swarm.kill_agent("a");
    swarm.start_agent("a").await;
    wait_until("a fires a later slot after its restart", PATIENCE, || async {
        swarm.fires_of("a", &id).iter().any(|s| *s > before_kill).then_some(())
    })
    .await
    .unwrap();

    // b down across three slots: one catch-up, the latest missed slot.
    let last_before_stop = *swarm.fires_of("b", &id).last().unwrap();
    swarm.kill_agent("b");
    until(last_before_stop + time::Duration::seconds(3 * EVERY + 1)).await;
    let restarted_at = now();
    swarm.start_agent("b").await;
    wait_until("b catches up", PATIENCE, || async {
        swarm.fires_of("b", &id).iter().any(|s| *s > last_before_stop).then_some(())
    })
    .await
    .unwrap();
    let gap: Vec<_> =
        swarm.fires_of("b", &id).into_iter().filter(|s| *s > last_before_stop && *s <= restarted_at).collect();
    assert_eq!(gap.len(), 1, "one catch-up for the gap, got {gap:?}");
    assert!(gap[0] > restarted_at - time::Duration::seconds(EVERY), "the latest missed slot: {gap:?}");

    // A one-shot fires once in each agent.
    let once = swarm.add(&["--name", "once", "--agent", "a", "--agent", "b", "--body", "one", "--once"]);
    for agent in ["a", "b"] {
        wait_until(&format!("{agent} runs the one-shot"), PATIENCE, || async {
            swarm.turns(agent).iter().any(|(_, body)| body == "one").then_some(())
        })
        .await
        .unwrap();
    }
    until(now() + time::Duration::seconds(2 * EVERY)).await;
    for agent in ["a", "b"] {
        assert_eq!(swarm.fires_of(agent, &once).len(), 1, "{agent}");
        assert_eq!(swarm.turns(agent).iter().filter(|(_, body)| body == "one").count(), 1, "{agent}");
    }
    swarm.assert_no_slot_fired_twice(&["a", "b"]);
}
