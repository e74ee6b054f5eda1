//! Benchmark of agent provisioning: the controller's provisioning engine (`provision::Provisioner`,
//! the job graph and the adapters) against a JWT-mode nats-server, swarm-authelia-bridge, a real
//! Synapse and the forge stand-in, all on loopback.
//!
//! 1. **One agent**: the wall time from create to its nine jobs succeeded (the baseline).
//! 2. **Many at once**: `--agents` (default 100) created back to back; the wall time until all
//!    their jobs succeeded, against N times the baseline, and the most jobs the graph had running
//!    at once (its bound is 8).
//! 3. **Credential check pass**: one pass over `--check` (default 1,000) provisioned agents
//!    (forge token and matrix token checked against their servers, certificate and NATS
//!    credential ages) as the controller runs it (eight agents at once), against a pass over one
//!    agent, per agent, and against the same pass checking one agent at a time.
//! 4. **At scale** (`--scale S`, off by default): agents made up to S, then two passes over all
//!    S (right after the creations, and again) against the pass over M in the same run, and against the pass's 5-minute interval. The
//!    agents past M are made without the SSO step: the bridge hashes each password with argon2id
//!    at Authelia's cost (about a second for eight on two cores, so hours for 10,000), and the pass
//!    checks no SSO credential, so what it checks of each agent is the same.
//!
//! `cargo build --release -p swarm-authelia-bridge && cargo bench -p swarm-controller --bench provisioning
//! [-- --agents N --check M --scale S]`. Needs `scripts/setup` (nats-server, Synapse).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use hyperhive_hive_proto::directory::{HiveDirectory, HiveEntry};
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_jobq::{JobId, JobState, Jobq, JobqConfig};
use hyperhive_provision::Secret;
use hyperhive_provision::store_ca::{StoreCa, write_ca_files};
use hyperhive_testkit::{AutheliaBridge, ForgeStandIn, NatsJwt, Synapse};
use swarm_controller::clock::SystemClock;
use swarm_controller::lifecycle::roster::Roster;
use swarm_controller::lifecycle::wanted::WantedStore;
use swarm_controller::nats::tenants::Accounts;
use swarm_controller::provision::health::HealthBoard;
use swarm_controller::provision::settings::{ForgeSettings, MatrixSettings, SsoSettings};
use swarm_controller::provision::vault::Vault;
use swarm_controller::provision::{Adapters, ProvisionSettings, Provisioner, ValidRequest};
use swarm_controller::secrets::{SecretStore, SecretsKey};

/// Agents a hive takes: its deploy queue holds at most 100 messages until the hive takes them,
/// and no hive runs here.
const AGENTS_A_HIVE: usize = 50;
const PATIENCE: Duration = Duration::from_secs(1800);

fn option(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().expect("a number"))
}

struct Bench {
    provisioner: Arc<Provisioner>,
    hives: usize,
    jobq: Jobq,
    _servers: (NatsJwt, AutheliaBridge, ForgeStandIn, Synapse, tempfile::TempDir),
}

/// The servers and a provisioner, with enough hives for `agents`.
async fn setup(agents: usize) -> anyhow::Result<Bench> {
    let hive_count = agents.div_ceil(AGENTS_A_HIVE).max(1);
    let nats = NatsJwt::start().await?;
    let js = jetstream::new(nats.controller_client().await?);
    let buckets = hyperhive_nats_objects::ensure_objects(&js).await?;
    // The bridge hashes every password with argon2id at Authelia's cost (64 MiB, 3 passes): its
    // release build, or the figures measure an unoptimized hash.
    let release = hyperhive_testkit::workspace_root().join("target/release/swarm-authelia-bridge");
    anyhow::ensure!(release.is_file(), "build it first: cargo build --release -p swarm-authelia-bridge");
    let bridge = AutheliaBridge::builder(release).start().await?;
    let forge = ForgeStandIn::start().await?;
    // The template lives in the swarm's organisation, where config repositories are generated.
    forge.add_org("swarm");
    forge.add_template("swarm", "agent-template");
    let synapse = Synapse::start().await?;
    let dir = tempfile::tempdir()?;
    let ca = write_ca_files(dir.path(), "bench store CA", std::time::SystemTime::now())?;
    let hives: HiveDirectory = (0..hive_count)
        .map(|i| {
            let xkey = nkeys::XKey::new().public_key();
            let entry = HiveEntry { description: String::new(), labels: Default::default(), xkey: Some(xkey) };
            (HiveName::parse(&format!("hive{i}")).unwrap(), entry)
        })
        .collect();
    let settings = ProvisionSettings {
        sso: Some(SsoSettings { url: bridge.url(), token: Secret::new(bridge.token()) }),
        forge: Some(ForgeSettings {
            url: forge.url(),
            admin_token: Secret::new(forge.admin_token()),
            template_owner: "swarm".into(),
            template_name: "agent-template".into(),
            org: "swarm".into(),
            webhook_url: None,
            reconcile_every: std::time::Duration::from_secs(300),
        }),
        matrix: Some(MatrixSettings { url: synapse.base_url(), shared_secret: Secret::new(synapse.shared_secret()) }),
        store_ca: Some(Arc::new(StoreCa::load(&ca.key_file, &ca.cert_file)?)),
        ..ProvisionSettings::default()
    };
    let jobq = Jobq::new(JobqConfig::default())?;
    let provisioner = Arc::new(Provisioner {
        adapters: Adapters::from_settings(&settings).map_err(anyhow::Error::msg)?,
        settings,
        vault: Vault::new(SecretStore::new(buckets.secrets, SecretsKey::generate())),
        accounts: Arc::new(Accounts::new(nats.creds_dir().to_path_buf(), nats.url())),
        roster: Roster::new(js.clone(), buckets.agents),
        wanted: WantedStore::new(js.clone(), buckets.agent_wanted),
        js,
        hives: Arc::new(hives),
        deploy_key: Arc::new(DeploySigner::generate()),
        jobq: jobq.clone(),
        clock: Arc::new(SystemClock),
        health: HealthBoard::default(),
    });
    Ok(Bench { provisioner, hives: hive_count, jobq, _servers: (nats, bridge, forge, synapse, dir) })
}

impl Bench {
    /// Creates `names` back to back and waits until all their jobs settled; the wall time and the
    /// most jobs seen running at once.
    async fn create(&self, names: &[String]) -> (Duration, usize) {
        self.create_by(&self.provisioner, names).await
    }

    /// The same provisioner without the SSO step (the accounts' servers, stores and graph shared).
    fn without_sso(&self) -> Arc<Provisioner> {
        let p = &self.provisioner;
        let settings = ProvisionSettings { sso: None, ..p.settings.clone() };
        Arc::new(Provisioner {
            adapters: Adapters::from_settings(&settings).expect("the same adapters, less one"),
            settings,
            vault: p.vault.clone(),
            accounts: p.accounts.clone(),
            roster: p.roster.clone(),
            wanted: p.wanted.clone(),
            js: p.js.clone(),
            hives: p.hives.clone(),
            deploy_key: p.deploy_key.clone(),
            jobq: p.jobq.clone(),
            clock: p.clock.clone(),
            health: HealthBoard::default(),
        })
    }

    /// [`Bench::create`] by `provisioner`.
    async fn create_by(&self, provisioner: &Arc<Provisioner>, names: &[String]) -> (Duration, usize) {
        let started = Instant::now();
        // A set: every change of the graph is checked against it, and a run at scale has tens of
        // thousands of jobs.
        let mut ids: std::collections::HashSet<JobId> = std::collections::HashSet::new();
        for name in names {
            // Spread by the name's number, so each hive's queue takes its share whoever makes it.
            let number: usize = name.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let request = ValidRequest {
                name: AgentName::parse(name).unwrap(),
                hive: HiveName::parse(&format!("hive{}", number % self.hives)).unwrap(),
                spec: AgentSpec {
                    turn_command: "cat".into(),
                    schedule_tick: None,
                    turn_timeout: None,
                    env: Default::default(),
                },
                labels: Default::default(),
            };
            ids.extend(provisioner.create(request).await.expect("created"));
        }
        let mut changes = self.jobq.subscribe();
        let mut most = 0;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let check_started = Instant::now();
            let snapshot = self.jobq.snapshot();
            most = most.max(snapshot.nodes.iter().filter(|n| n.state == JobState::Running).count());
            let mine = snapshot.nodes.iter().filter(|n| ids.contains(&n.id));
            let (settled, failed) = mine.fold((0, 0), |(s, f), n| {
                (s + usize::from(n.state.is_settled()), f + usize::from(n.state == JobState::Failed))
            });
            assert_eq!(
                failed,
                0,
                "a provisioning job failed: {:?}",
                snapshot.nodes.iter().find(|n| n.state == JobState::Failed)
            );
            if settled == ids.len() {
                break;
            }
            // A check copies the whole graph (tens of thousands of jobs at scale): spaced at ten
            // times its own cost, the benchmark takes at most a tenth of a core from the work it
            // times, and a small graph is still checked at once.
            tokio::time::sleep(check_started.elapsed() * 10).await;
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(deadline) => panic!("provisioning did not finish in {PATIENCE:?}"),
            }
        }
        (started.elapsed(), most)
    }

    /// Mean and longest attempt time per job kind (from the graph's timings, milliseconds).
    fn per_kind(&self) -> String {
        let mut kinds: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
        for node in self.jobq.snapshot().nodes {
            if let (Some(start), Some(end)) = (node.started_at, node.finished_at) {
                kinds.entry(node.kind.clone()).or_default().push((end - start).as_seconds_f64() * 1000.0);
            }
        }
        kinds
            .iter()
            .map(|(kind, ms)| {
                let mean = ms.iter().sum::<f64>() / ms.len() as f64;
                let max = ms.iter().copied().fold(0.0, f64::max);
                format!("  {kind:<17} mean {mean:7.1} ms, max {max:7.1} ms ({} jobs)", ms.len())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One credential pass, `in_flight` agents at once (`None`: as the controller runs it).
    async fn check_pass(&self, in_flight: Option<usize>) -> (Duration, usize) {
        let started = Instant::now();
        let report = match in_flight {
            Some(n) => self.provisioner.check_all_at(n).await,
            None => self.provisioner.check_all().await,
        };
        let report = report.expect("a pass");
        assert_eq!(report.queued, 0, "every credential is healthy: {report:?}");
        (started.elapsed(), report.checked)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let (many, check, scale) = (option("--agents", 100), option("--check", 1000), option("--scale", 0));
    let bench = setup(many.max(check).max(scale)).await?;
    let (one, _) = bench.create(&["solo".to_owned()]).await;
    let (one_check, checked) = bench.check_pass(None).await;
    assert_eq!(checked, 1);
    println!("one agent: provisioned in {:.0} ms; a credential pass over it: {:.1} ms", ms(one), ms(one_check));

    let names: Vec<String> = (0..many).map(|i| format!("many-{i:04}")).collect();
    let (all, most) = bench.create(&names).await;
    println!(
        "{many} agents at once: {:.0} ms ({:.1} ms per agent; {:.2}x one agent's time for {many}x the agents, \
         {:.1}x faster than one after another); at most {most} jobs running at once",
        ms(all),
        ms(all) / many as f64,
        all.as_secs_f64() / one.as_secs_f64(),
        (one.as_secs_f64() * many as f64) / all.as_secs_f64(),
    );
    println!("time per job, by kind:\n{}", bench.per_kind());

    let more: Vec<String> = (many..check.saturating_sub(1)).map(|i| format!("many-{i:04}")).collect();
    if !more.is_empty() {
        let (rest, _) = bench.create(&more).await;
        println!("{} more agents provisioned in {:.1} s", more.len(), rest.as_secs_f64());
    }
    let (serial, _) = bench.check_pass(Some(1)).await;
    let (pass, checked) = bench.check_pass(None).await;
    println!(
        "credential pass over {checked} agents, one at a time (baseline): {:.0} ms ({:.2} ms per agent)",
        ms(serial),
        ms(serial) / checked as f64,
    );
    println!(
        "credential pass over {checked} agents, as the controller runs it: {:.0} ms ({:.2} ms per agent; {:.2}x the \
         one-agent pass per agent; {:.2}x faster than one at a time)",
        ms(pass),
        ms(pass) / checked as f64,
        (pass.as_secs_f64() / checked as f64) / one_check.as_secs_f64(),
        serial.as_secs_f64() / pass.as_secs_f64(),
    );
    if scale > checked {
        let names: Vec<String> = (check.saturating_sub(1)..scale - 1).map(|i| format!("many-{i:04}")).collect();
        let (made, _) = bench.create_by(&bench.without_sso(), &names).await;
        println!("{} more agents provisioned without the SSO step in {:.1} s", names.len(), made.as_secs_f64());
        // Twice: right after the creations the servers may still be busy with them, so once more.
        for when in ["right after the creations", "again"] {
            let (at_scale, checked_at_scale) = bench.check_pass(None).await;
            let interval = Duration::from_secs(300);
            println!(
                "credential pass over {checked_at_scale} agents, as the controller runs it, {when}: {:.0} ms ({:.2} ms \
                 per agent; {:.2}x the pass over {checked} agents for {:.1}x the agents; {:.1} % of its 5-minute \
                 interval)",
                ms(at_scale),
                ms(at_scale) / checked_at_scale as f64,
                at_scale.as_secs_f64() / pass.as_secs_f64(),
                checked_at_scale as f64 / checked as f64,
                100.0 * at_scale.as_secs_f64() / interval.as_secs_f64(),
            );
        }
    }
    Ok(())
}
