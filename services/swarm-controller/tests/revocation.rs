//! Revoking an agent's credentials against a real nats-server running the full account resolver:
//! the agent is cut off at once whether or not its account was loaded, stays cut off after a
//! server restart (even one with the fragment from before the revocation: the resolver's own
//! directory holds it), others are unaffected, and no credential can be minted for it again.

use std::path::Path;
use std::time::Duration;

use async_nats::{ConnectOptions, Event};
use hyperhive_nats_creds::{AgentName, DEFAULT_AGENT_TTL, mint_agent_creds};
use hyperhive_testkit::{NatsJwt, wait_until};
use swarm_controller::lifecycle::revoke::Revoker;
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(10);

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

/// Connects with `creds` (no retry: a refusal is an error) and reports connection events. Once
/// connected, a lost connection gets one reconnect attempt: a client cut off by a revocation gives
/// up after its attempt is refused (`ClientError::MaxReconnects`) instead of retrying forever.
async fn connect(
    nats: &NatsJwt,
    creds: &Path,
) -> Result<(async_nats::Client, mpsc::UnboundedReceiver<Event>), async_nats::ConnectError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let client = ConnectOptions::with_credentials_file(creds)
        .await
        .unwrap()
        .connection_timeout(Duration::from_secs(2))
        .max_reconnects(1)
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event);
            }
        })
        .connect(nats.url())
        .await?;
    Ok((client, rx))
}

async fn refused(nats: &NatsJwt, creds: &Path) -> bool {
    match connect(nats, creds).await {
        Ok(_) => false,
        Err(err) => {
            let text = err.to_string().to_lowercase();
            assert!(text.contains("authorization") || text.contains("auth"), "refused for another reason: {err}");
            true
        }
    }
}

#[tokio::test]
async fn a_revoked_agent_is_cut_off_and_stays_out_while_others_work() {
    let mut nats = NatsJwt::start().await.unwrap();
    let a_creds = nats.mint_agent("a").await.unwrap();
    let b_creds = nats.mint_agent("b").await.unwrap();
    let never_creds = nats.mint_agent("never").await.unwrap();
    let revoker = Revoker::new(nats.creds_dir().to_path_buf(), nats.url());
    // The fragment as deployed on the NATS host before the revocation.
    let fragment = nats.creds_dir().join(hyperhive_nats_creds::files::SERVER_CONF);
    let deployed = std::fs::read_to_string(&fragment).unwrap();

    // a is connected (its account loaded); "never" has never connected (its account unloaded).
    let (a, mut a_events) = connect(&nats, &a_creds).await.expect("a connects before");
    let (b, _) = connect(&nats, &b_creds).await.expect("b connects");
    revoker.revoke(&agent("a")).await.unwrap();
    revoker.revoke(&agent("never")).await.unwrap();
    assert!(revoker.is_done(&agent("a")).await);

    // a is disconnected by the server and cannot come back.
    wait_until("a to be disconnected", TIMEOUT, || {
        let seen = a_events.try_recv().ok();
        async move { seen.filter(|e| matches!(e, Event::Disconnected)).map(|_| ()) }
    })
    .await
    .unwrap();
    assert_ne!(a.connection_state(), async_nats::connection::State::Connected);
    assert!(refused(&nats, &a_creds).await, "a's credential is refused after the revocation");
    assert!(refused(&nats, &never_creds).await, "an account never loaded is revoked too");

    // b is unaffected.
    b.flush().await.unwrap();
    assert_eq!(b.connection_state(), async_nats::connection::State::Connected);
    assert!(!refused(&nats, &b_creds).await);

    // a's client has stopped trying to reconnect (its one attempt was refused), so after the
    // restart the check below is the only connection that makes the server load a's account.
    // nats-server lets a second connection arriving while it builds an account on first use
    // authenticate against it before its claims, revocations included, are applied (the account
    // is shared from `tmpAccounts` before `UpdateAccountClaims`); that connection is accepted and
    // closed a few milliseconds later ("Credentials Revoked"). A client still reconnecting here
    // would race the check into that window.
    wait_until("a's client to stop reconnecting", TIMEOUT, || {
        let seen = a_events.try_recv().ok();
        async move {
            seen.filter(|e| matches!(e, Event::ClientError(async_nats::ClientError::MaxReconnects))).map(|_| ())
        }
    })
    .await
    .unwrap();

    // A restart with the fragment from before the revocation: the resolver's directory keeps the
    // revoked JWTs (the preload's older ones do not replace them), so still refused; b accepted.
    assert!(std::fs::read_to_string(&fragment).unwrap() != deployed, "the directory's fragment has the revocation");
    std::fs::write(&fragment, &deployed).unwrap();
    nats.nats().stop();
    nats.nats().start_again().await.unwrap();
    assert!(refused(&nats, &a_creds).await, "a is refused after a server restart");
    assert!(refused(&nats, &never_creds).await);
    assert!(!refused(&nats, &b_creds).await);

    // Revoking again is harmless; minting again is refused and writes nothing.
    revoker.revoke(&agent("a")).await.unwrap();
    let fresh = nats.creds_dir().join("again.creds");
    let err = mint_agent_creds(nats.creds_dir(), &agent("a"), DEFAULT_AGENT_TTL, &fresh).unwrap_err().to_string();
    assert!(err.contains("revoked") && err.contains("agent-a"), "{err}");
    assert!(!fresh.exists(), "no credential written for a revoked agent");
    assert!(nats.mint_agent("a").await.is_err());
}

#[tokio::test]
async fn a_directory_from_an_older_init_gets_its_system_credential_on_first_need() {
    let nats = NatsJwt::start().await.unwrap();
    let creds = nats.mint_agent("a").await.unwrap();
    let system = nats.creds_dir().join(hyperhive_nats_creds::files::SYSTEM_CREDS);
    std::fs::remove_file(&system).unwrap();
    Revoker::new(nats.creds_dir().to_path_buf(), nats.url()).revoke(&agent("a")).await.unwrap();
    assert!(system.is_file(), "made from system.seed");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&system).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(refused(&nats, &creds).await);
}

/// The hive pass revokes a destroyed agent only when the controller's own roster has it on the
/// hive the destroyed wanted state names: a key under another hive does not cut off an agent
/// that lives elsewhere.
#[tokio::test]
async fn the_pass_revokes_only_an_agent_the_roster_has_on_the_hive_its_destroyed_key_names() {
    use hyperhive_hive_proto::HiveName;
    use hyperhive_hive_proto::directory::HiveEntry;
    use hyperhive_hive_proto::roster::{Identities, Origin, RosterEntry};
    use hyperhive_hive_proto::wanted::{Wanted, WantedState};
    use std::sync::Arc;
    use swarm_controller::lifecycle::hive_pass::HivePass;
    use swarm_controller::lifecycle::roster::Roster;
    use swarm_controller::lifecycle::wanted::WantedStore;

    let nats = NatsJwt::start().await.unwrap();
    let alpha_creds = nats.mint_agent("alpha").await.unwrap();
    let beta_creds = nats.mint_agent("beta").await.unwrap();
    let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
    let buckets = hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    let roster = Roster::new(js.clone(), buckets.agents.clone());
    let wanted = WantedStore::new(js.clone(), buckets.agent_wanted.clone());
    let hive = |name: &str| HiveName::parse(name).unwrap();
    for name in ["alpha", "beta"] {
        let entry = RosterEntry {
            hive: hive("h1"),
            origin: Origin::Declared,
            created_at: "2026-12-01T00:00:00Z".into(),
            provisioning: Default::default(),
            identities: Identities::default(),
            spec: None,
            revision: 0,
            labels: Default::default(),
        };
        assert!(roster.create(&agent(name), &entry).await.unwrap());
    }
    let destroyed =
        Wanted { state: WantedState::Destroyed, set_at: "2026-12-01T00:00:00Z".into(), set_by: "test".into() };
    // alpha lives on h1, but the key says h2; beta's key names its own hive.
    wanted.put(&hive("h2"), &agent("alpha"), &destroyed, None).await.unwrap();
    wanted.put(&hive("h1"), &agent("beta"), &destroyed, None).await.unwrap();

    let revoker = Arc::new(Revoker::new(nats.creds_dir().to_path_buf(), nats.url()));
    let entry = |h: &str| (hive(h), HiveEntry { description: String::new(), labels: Default::default(), xkey: None });
    let pass = HivePass {
        js,
        hives: Arc::new([entry("h1"), entry("h2")].into_iter().collect()),
        roster,
        wanted,
        revoker: Some(revoker.clone()),
        clock: Arc::new(swarm_controller::clock::SystemClock),
        consumers: None,
    };
    pass.run().await;
    assert!(revoker.is_done(&agent("beta")).await, "beta is destroyed on its own hive: revoked");
    assert!(refused(&nats, &beta_creds).await, "and refused");
    assert!(!revoker.is_done(&agent("alpha")).await, "alpha's key names a hive it is not on");
    connect(&nats, &alpha_creds).await.expect("alpha still connects");
}
