//! Accounts changed while the swarm runs, against a real nats-server running the full account
//! resolver: an agent created by the controller works at once without any reload, its hive
//! reaches its queue (and no other), the server keeps it across a restart even when the fragment
//! it starts with predates it, a failed push is completed by calling again, a tenant cannot push
//! claims, a JWT the operator did not sign is never sent, and one the server refuses is reported
//! in the server's own words.

use std::path::Path;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::{Client, ConnectOptions, Event};
use futures::StreamExt;
use hyperhive_nats_creds::jwt::{AccountSpec, ServiceImport, Validity, account_jwt};
use hyperhive_nats_creds::{AccountJwt, AgentName, HiveName, files};
use hyperhive_nats_objects::{
    AGENT_SCHEDULES_BUCKET, TODO_STREAM, agent_consumer, agent_durable_name, agent_inbox_prefix,
    agent_schedule_direct_get_subject, hive_inbox_prefix,
};
use hyperhive_testkit::{NatsJwt, wait_until};
use nkeys::KeyPair;
use swarm_controller::lifecycle::revoke::Revoker;
use swarm_controller::nats::claims::{self, PushError};
use swarm_controller::nats::tenants::{Accounts, AccountsError};
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(10);
/// A refused request only times out, so short; every answered one comes back in milliseconds.
const ANSWER: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(3600);

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

fn hive(name: &str) -> HiveName {
    HiveName::parse(name).unwrap()
}

/// NATS with the swarm's streams and buckets made by the controller's own start-up code.
async fn swarm() -> (NatsJwt, jetstream::Context) {
    let nats = NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = jetstream::new(client);
    hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    (nats, js)
}

/// Connects with the `.creds` text `creds` (no retry: a refusal is an error), reporting the
/// server's error messages (permission violations).
async fn connect(
    nats: &NatsJwt,
    creds: &str,
    inbox: String,
) -> Result<(Client, mpsc::UnboundedReceiver<String>), async_nats::ConnectError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let client = ConnectOptions::with_credentials(creds)
        .unwrap()
        .custom_inbox_prefix(inbox)
        .request_timeout(Some(ANSWER))
        .connection_timeout(ANSWER)
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                if let Event::ServerError(e) = event {
                    let _ = tx.send(e.to_string());
                }
            }
        })
        .connect(nats.url())
        .await?;
    Ok((client, rx))
}

async fn connect_file(nats: &NatsJwt, creds: &Path, inbox: String) -> (Client, mpsc::UnboundedReceiver<String>) {
    connect(nats, &std::fs::read_to_string(creds).unwrap(), inbox).await.unwrap()
}

fn refused(outcome: Result<(Client, mpsc::UnboundedReceiver<String>), async_nats::ConnectError>) -> bool {
    match outcome {
        Ok(_) => false,
        Err(err) => {
            let text = err.to_string().to_lowercase();
            assert!(text.contains("auth"), "refused for another reason: {err}");
            true
        }
    }
}

async fn expect_violation(events: &mut mpsc::UnboundedReceiver<String>, what: &str) {
    let event = tokio::time::timeout(TIMEOUT, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no permissions violation for {what}"))
        .unwrap();
    assert!(event.to_lowercase().contains("permissions violation"), "{what}: {event}");
}

/// How many messages `TODO` holds on `subject`, as the controller sees it.
async fn held(js: &jetstream::Context, subject: &str) -> u64 {
    let stream = js.get_stream(TODO_STREAM).await.unwrap();
    let mut subjects = stream.info_with_subjects(subject).await.unwrap();
    let mut total = 0;
    while let Some(entry) = subjects.next().await {
        total += entry.unwrap().1;
    }
    total as u64
}

fn reloads(nats: &mut NatsJwt) -> usize {
    nats.nats().process().unwrap().log().matches("Reloaded server configuration").count()
}

/// The agent's own work: queue a todo, pull it through its own consumer (made by the
/// controller's code, as the controller does when it mints the agent) and ack it, and read its
/// own schedules by direct get.
async fn works_as_agent(controller: &jetstream::Context, client: &Client, name: &str) {
    let me = agent(name);
    let js = jetstream::new(client.clone());
    js.publish(format!("todo.{name}"), "work".into()).await.unwrap().await.unwrap();
    swarm_controller::nats::consumers::ensure_agent(controller, &me).await.unwrap();
    let consumer = agent_consumer(&me).bind(&js).await.unwrap();
    let mut messages = consumer.fetch().max_messages(1).messages().await.unwrap();
    let todo = messages.next().await.expect("its todo").unwrap();
    assert_eq!(&todo.payload[..], b"work");
    todo.double_ack().await.unwrap();
    let schedules = client.request(agent_schedule_direct_get_subject(&me), "".into()).await.unwrap();
    assert_eq!(&schedules.payload[..], format!("{name}'s schedules").as_bytes());
}

#[tokio::test]
async fn an_agent_created_while_the_server_runs_works_at_once_without_a_reload() {
    let (mut nats, js) = swarm().await;
    let schedules = js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap();
    schedules.put("b", "b's schedules".into()).await.unwrap();
    // Hive h1 runs a and is connected before b exists; h2 runs z.
    let h1_creds = nats.mint_hive("h1", &["a"]).await.unwrap();
    let h2_creds = nats.mint_hive("h2", &["z"]).await.unwrap();
    let (h1, mut h1_events) = connect_file(&nats, &h1_creds, hive_inbox_prefix(&hive("h1"))).await;
    let (h2, _) = connect_file(&nats, &h2_creds, hive_inbox_prefix(&hive("h2"))).await;
    let reloads_before = reloads(&mut nats);

    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
    let started = Instant::now();
    let made = accounts.create_agent(&hive("h1"), &agent("b"), TTL).await.unwrap();
    let (b, _) = connect(&nats, made.creds.expose(), agent_inbox_prefix(&agent("b"))).await.expect("b connects");
    eprintln!("from the mint to b's connection: {:?}", started.elapsed());
    works_as_agent(&js, &b, "b").await;
    assert_eq!(reloads(&mut nats), reloads_before, "no reload");
    let names: Vec<&str> = made.accounts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["agent-b", "hive-h1"]);

    // h1, connected since before, now reaches b's queue, and still a's; not a queue of an agent
    // it does not run, nor b's consumer.
    let h1_js = jetstream::new(h1.clone());
    h1_js.publish("todo.b", "from h1".into()).await.unwrap().await.unwrap();
    h1_js.publish("todo.a", "from h1".into()).await.unwrap().await.unwrap();
    assert_eq!(held(&js, "todo.b").await, 1);
    assert_eq!(held(&js, "todo.a").await, 1);
    h1.publish("todo.z", "not h1's".into()).await.unwrap();
    h1.request("todo.a", "control".into()).await.unwrap();
    assert_eq!(held(&js, "todo.z").await, 0, "a todo for an agent h1 does not run goes nowhere");
    h1.publish(format!("$JS.API.CONSUMER.INFO.TODO.{}", agent_durable_name(&agent("b"))), "".into()).await.unwrap();
    expect_violation(&mut h1_events, "h1 asking for b's consumer").await;
    // h2 does not reach b.
    h2.publish("todo.b", "not h2's".into()).await.unwrap();
    h2.request("todo.z", "control".into()).await.unwrap();
    assert_eq!(held(&js, "todo.b").await, 1, "h2 queued nothing for b");

    // Creating b again renews its credential, changes no account, and both credentials work.
    let again = accounts.create_agent(&hive("h1"), &agent("b"), TTL).await.unwrap();
    assert_ne!(again.creds, made.creds);
    let (b2, _) = connect(&nats, again.creds.expose(), agent_inbox_prefix(&agent("b"))).await.unwrap();
    b2.request(agent_schedule_direct_get_subject(&agent("b")), "".into()).await.unwrap();
}

#[tokio::test]
async fn a_pushed_account_survives_a_restart_with_a_fragment_that_predates_it() {
    let (mut nats, js) = swarm().await;
    js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap().put("b", "b's schedules".into()).await.unwrap();
    let h1_creds = nats.mint_hive("h1", &["a"]).await.unwrap();
    // The fragment as deployed on the NATS host before b existed.
    let fragment = nats.creds_dir().join(files::SERVER_CONF);
    let deployed = std::fs::read_to_string(&fragment).unwrap();
    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
    let made = accounts.create_agent(&hive("h1"), &agent("b"), TTL).await.unwrap();
    wait_until("the directory's fragment to have b", TIMEOUT, || async {
        (std::fs::read_to_string(&fragment).unwrap() != deployed).then_some(())
    })
    .await
    .unwrap();
    std::fs::write(&fragment, &deployed).unwrap();
    assert!(!deployed.contains(&made.accounts[0].account), "the stale fragment does not know b");

    nats.nats().stop();
    nats.nats().start_again().await.unwrap();
    let (b, _) = connect(&nats, made.creds.expose(), agent_inbox_prefix(&agent("b"))).await.expect("b after restart");
    works_as_agent(&js, &b, "b").await;
    // The stale preload of h1 (without b) did not replace the newer JWT the server was given.
    let (h1, _) = connect_file(&nats, &h1_creds, hive_inbox_prefix(&hive("h1"))).await;
    jetstream::new(h1).publish("todo.b", "from h1".into()).await.unwrap().await.unwrap();
    assert_eq!(held(&js, "todo.b").await, 1);
    let stored = std::fs::read_dir(nats.resolver_dir()).unwrap().count();
    assert!(stored >= 5, "SYS, swarm, no-jetstream, hive-h1 and agent-b are in the resolver's directory: {stored}");
}

#[tokio::test]
async fn a_burst_of_creations_rewrites_the_fragment_a_few_times_and_it_then_knows_every_agent() {
    let (nats, _js) = swarm().await;
    let fragment = nats.creds_dir().join(files::SERVER_CONF);
    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
    let started = Instant::now();
    let mut made = Vec::new();
    for i in 0..20 {
        made.push(accounts.create_agent(&hive("h1"), &agent(&format!("burst-{i}")), TTL).await.unwrap());
        if i == 0 {
            // Not by the creation itself: the rewrite waits a second for more.
            let conf = std::fs::read_to_string(&fragment).unwrap();
            assert!(!conf.contains(&made[0].accounts[0].jwt), "the creation rewrote the fragment");
        }
    }
    let took = started.elapsed();
    // The count goes up once a rewrite's file is in place, so both are waited for.
    wait_until("the fragment to preload every new account, and its rewrite counted", TIMEOUT, || async {
        let conf = std::fs::read_to_string(&fragment).unwrap();
        // Each agent's account, and the hive's as the last creation left it.
        let hive_now = &made.last().unwrap().accounts[1].jwt;
        let complete = made.iter().all(|m| conf.contains(&m.accounts[0].jwt)) && conf.contains(hive_now);
        (complete && accounts.fragment().written() > 0).then_some(())
    })
    .await
    .unwrap();
    // One rewrite covers every creation within its delay: at most one a second, and the last.
    let written = accounts.fragment().written();
    let most = took.as_secs() + 2;
    assert!((1..=most).contains(&written), "{written} rewrites for 20 creations in {took:?}");
}

#[tokio::test]
async fn a_rewrite_lost_in_a_stop_is_caught_up_at_the_next_start() {
    let (nats, _js) = swarm().await;
    let fragment = nats.creds_dir().join(files::SERVER_CONF);
    // Minted as a creation does, by a controller that stopped before its rewrite ran.
    let made = hyperhive_nats_creds::mint_agent_of_hive(nats.creds_dir(), &hive("h1"), &agent("b"), TTL).unwrap();
    assert!(!std::fs::read_to_string(&fragment).unwrap().contains(&made.accounts[0].jwt));
    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
    accounts.fragment().catch_up().await;
    // The count goes up once the file is in place: waited for, then the file must hold b.
    wait_until("one rewrite of the fragment", TIMEOUT, || async { (accounts.fragment().written() > 0).then_some(()) })
        .await
        .unwrap();
    assert!(std::fs::read_to_string(&fragment).unwrap().contains(&made.accounts[0].jwt), "the rewrite left b out");
    assert_eq!(accounts.fragment().written(), 1);
}

#[tokio::test]
async fn a_failed_push_is_completed_by_calling_again() {
    let (mut nats, js) = swarm().await;
    js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap().put("b", "b's schedules".into()).await.unwrap();
    nats.mint_hive("h1", &["a"]).await.unwrap();
    let fragment = nats.creds_dir().join(files::SERVER_CONF);
    let deployed = std::fs::read_to_string(&fragment).unwrap();
    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());

    nats.nats().stop();
    let err = accounts.create_agent(&hive("h1"), &agent("b"), TTL).await.unwrap_err();
    assert!(matches!(err, AccountsError::Push(PushError::Connect { .. })), "{err}");
    assert!(err.to_string().contains("connecting to") && err.to_string().contains("system user"), "{err}");
    // The server comes back with the fragment it had: b's accounts were written to the
    // directory, never given to the server.
    std::fs::write(&fragment, &deployed).unwrap();
    nats.nats().start_again().await.unwrap();
    let made = accounts.create_agent(&hive("h1"), &agent("b"), TTL).await.unwrap();
    let (b, _) = connect(&nats, made.creds.expose(), agent_inbox_prefix(&agent("b"))).await.expect("b connects");
    works_as_agent(&js, &b, "b").await;
}

#[tokio::test]
async fn a_tenant_cannot_push_claims_not_even_to_lift_a_revocation() {
    let (nats, _js) = swarm().await;
    let a_creds = nats.mint_agent("a").await.unwrap();
    let h_creds = nats.mint_hive("h1", &["a"]).await.unwrap();
    let (b, mut b_events) =
        connect_file(&nats, &nats.mint_agent("b").await.unwrap(), agent_inbox_prefix(&agent("b"))).await;
    let (h, mut h_events) = connect_file(&nats, &h_creds, hive_inbox_prefix(&hive("h1"))).await;
    // a's account before its revocation: public (it is in the fragment), and pushing it would
    // lift the revocation.
    let before = std::fs::read_to_string(nats.creds_dir().join("accounts/agent-a.jwt")).unwrap();
    let before = AccountJwt::from_token(&before).unwrap();
    let revoker = Revoker::new(nats.creds_dir().to_path_buf(), nats.url());
    revoker.revoke(&agent("a")).await.unwrap();
    let a_text = std::fs::read_to_string(&a_creds).unwrap();
    let a_inbox = || agent_inbox_prefix(&agent("a"));
    assert!(refused(connect(&nats, &a_text, a_inbox()).await));

    for (client, events, who) in [(&b, &mut b_events, "agent b"), (&h, &mut h_events, "hive h1")] {
        for subject in [claims::CLAIMS_UPDATE.to_owned(), format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE", before.account)]
        {
            let inbox = client.new_inbox();
            client.publish_with_reply(subject.clone(), inbox, before.jwt.clone().into()).await.unwrap();
            expect_violation(events, &format!("{who} publishing on {subject}")).await;
        }
        client.subscribe("$SYS.>").await.unwrap();
        expect_violation(events, &format!("{who} subscribing to $SYS.>")).await;
    }
    assert!(refused(connect(&nats, &a_text, a_inbox()).await), "a is still refused");

    // The same JWT from the system user does lift it: only the system account stands between a
    // tenant and this. The controller then revokes again.
    let system = hyperhive_nats_creds::system_creds(nats.creds_dir()).unwrap();
    let operator = hyperhive_nats_creds::operator_public_key(nats.creds_dir()).unwrap();
    claims::push(&nats.url(), &system, &operator, std::slice::from_ref(&before)).await.unwrap();
    assert!(!refused(connect(&nats, &a_text, a_inbox()).await), "the old JWT is potent");
    Accounts::new(nats.creds_dir().to_path_buf(), nats.url()).revoke_agent(&agent("a")).await.unwrap();
    assert!(refused(connect(&nats, &a_text, a_inbox()).await));
}

#[tokio::test]
async fn a_jwt_the_operator_did_not_sign_is_not_sent_and_one_the_server_refuses_is_reported() {
    let (nats, _js) = swarm().await;
    let dir = nats.creds_dir();
    let system = hyperhive_nats_creds::system_creds(dir).unwrap();
    let operator = hyperhive_nats_creds::operator_public_key(dir).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let at = Validity { issued_at: now, expires_at: None };
    let account = KeyPair::new_account();
    let stored = |key: &str| nats.resolver_dir().join(format!("{key}.jwt")).exists();

    // Signed by another operator, or by the account itself: refused before anything is sent.
    let foreign = account_jwt(&KeyPair::new_operator(), &account.public_key(), "foreign", &AccountSpec::default(), at);
    let own = account_jwt(&account, &account.public_key(), "self-signed", &AccountSpec::default(), at);
    for (name, jwt) in [("foreign", foreign.unwrap()), ("self-signed", own.unwrap())] {
        let forged = AccountJwt { account: account.public_key(), name: name.into(), jwt };
        let err = claims::push(&nats.url(), &system, &operator, std::slice::from_ref(&forged)).await.unwrap_err();
        assert!(matches!(err, PushError::Untrusted { .. }), "{err}");
        assert!(err.to_string().contains("not by the swarm's operator") && err.to_string().contains(name), "{err}");
        assert!(!stored(&account.public_key()), "nothing was sent");

        // Why the check is the controller's: the server itself stores it and says so, and only
        // refuses the account when a client uses it.
        let raw = async_nats::ConnectOptions::with_credentials_file(system.clone()).await.unwrap();
        let raw = raw.connect(nats.url()).await.unwrap();
        let answer = raw.request(claims::CLAIMS_UPDATE, forged.jwt.clone().into()).await.unwrap();
        assert!(String::from_utf8_lossy(&answer.payload).contains("jwt updated"), "{answer:?}");
        assert!(stored(&account.public_key()));
        std::fs::remove_file(nats.resolver_dir().join(format!("{}.jwt", account.public_key()))).unwrap();
    }

    // Signed by the operator but invalid (an import naming no account): the server refuses it,
    // and its words are reported.
    let seed = std::fs::read_to_string(dir.join(files::OPERATOR_SEED)).unwrap();
    let signer = KeyPair::from_seed(seed.trim()).unwrap();
    let import = ServiceImport { account: String::new(), subject: "todo.x".into() };
    let spec = AccountSpec { imports: vec![import], ..AccountSpec::default() };
    let jwt = account_jwt(&signer, &account.public_key(), "invalid", &spec, at).unwrap();
    let invalid = AccountJwt { account: account.public_key(), name: "invalid".into(), jwt };
    let err = claims::push(&nats.url(), &system, &operator, std::slice::from_ref(&invalid)).await.unwrap_err();
    assert!(matches!(err, PushError::Refused { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("nats-server refused the account JWT of invalid") && text.contains("validation"), "{text}");
    assert!(!stored(&account.public_key()));
}

#[tokio::test]
async fn agents_created_at_once_on_one_hive_all_reach_the_server_and_the_hive() {
    let (nats, js) = swarm().await;
    let h1_creds = nats.mint_hive("h1", &[]).await.unwrap();
    let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
    let names = ["b", "c", "d", "e"];
    // Each changes the hive's account; the server must end with the last one written.
    let (h1_name, agents) = (hive("h1"), names.map(agent));
    let made = futures::future::join_all(agents.iter().map(|a| accounts.create_agent(&h1_name, a, TTL))).await;
    let (h1, _) = connect_file(&nats, &h1_creds, hive_inbox_prefix(&hive("h1"))).await;
    let h1_js = jetstream::new(h1);
    for (name, made) in names.iter().zip(made) {
        let made = made.unwrap();
        connect(&nats, made.creds.expose(), agent_inbox_prefix(&agent(name))).await.expect("each agent connects");
        h1_js.publish(format!("todo.{name}"), "from h1".into()).await.unwrap().await.unwrap();
        assert_eq!(held(&js, &format!("todo.{name}")).await, 1, "h1 reaches {name}'s queue");
    }
}
