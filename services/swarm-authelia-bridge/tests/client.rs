//! The provisioning crate's SSO client (`hyperhive_provision::sso::BridgeClient`) against the
//! real bridge: the calls the controller makes, the ownership proof, and the errors it must tell
//! apart.

use hyperhive_provision::Secret;
use hyperhive_provision::sso::{BridgeClient, Created, NewSsoUser, Sso, SsoError};
use hyperhive_testkit::AutheliaBridge;

const BIN: &str = env!("CARGO_BIN_EXE_swarm-authelia-bridge");

const HUMAN: &str = "users:\n  alice:\n    disabled: false\n    displayname: Alice\n    password: \"$2b$12$x\"\n    email: alice@example.com\n    groups: [admins]\n";

fn agent(name: &str) -> NewSsoUser {
    NewSsoUser {
        name: name.into(),
        displayname: format!("Agent {name}"),
        email: format!("{name}@agents.example.com"),
        groups: vec!["agents-dev".into()],
    }
}

#[tokio::test]
async fn the_client_creates_proves_updates_and_deletes_through_the_real_bridge() {
    let bridge = AutheliaBridge::builder(BIN).users(HUMAN).start().await.unwrap();
    let sso: Box<dyn Sso> = Box::new(BridgeClient::new(&bridge.url(), Secret::new(bridge.token())).unwrap());
    let password = Secret::new("sealed-before-creating-0001");

    assert_eq!(sso.user("agent-alpha").await.unwrap(), None);
    assert_eq!(sso.create_or_update(&agent("agent-alpha"), &password).await.unwrap(), Created::Created);
    let user = sso.user("agent-alpha").await.unwrap().expect("created");
    assert!(user.managed && !user.disabled);
    assert_eq!(user.groups, ["agents-dev", "hyperhive-agents"]);
    assert_eq!(user.email, "agent-alpha@agents.example.com");

    // After a crash the controller finds the user and proves it is its own before adopting it.
    assert!(sso.verify_password("agent-alpha", &password).await.unwrap());
    assert!(!sso.verify_password("agent-alpha", &Secret::new("someone-elses-password")).await.unwrap());
    assert_eq!(sso.create_or_update(&agent("agent-alpha"), &password).await.unwrap(), Created::Updated);

    // A person's user is neither proven, changed nor deleted.
    let human = sso.user("alice").await.unwrap().expect("alice");
    assert!(!human.managed);
    let err = sso.create_or_update(&agent("alice"), &password).await.unwrap_err();
    assert!(matches!(&err, SsoError::Unmanaged { name, .. } if name == "alice"), "{err}");
    assert!(!err.is_retryable());
    assert!(matches!(sso.verify_password("alice", &password).await, Err(SsoError::Unmanaged { .. })));
    assert!(matches!(sso.delete("alice").await, Err(SsoError::Unmanaged { .. })));
    let err = sso.verify_password("agent-nobody", &password).await.unwrap_err();
    assert!(matches!(err, SsoError::UnknownUser { .. }), "{err}");

    sso.delete("agent-alpha").await.unwrap();
    sso.delete("agent-alpha").await.expect("deleting again succeeds");
    assert_eq!(sso.user("agent-alpha").await.unwrap(), None);
}

#[tokio::test]
async fn failures_name_the_call_and_status_and_never_the_token_or_password() {
    let mut bridge = AutheliaBridge::builder(BIN).start().await.unwrap();
    let password = Secret::new("sealed-before-creating-0002");

    let wrong = BridgeClient::new(&bridge.url(), Secret::new("not-the-token-at-all")).unwrap();
    let err = wrong.create_or_update(&agent("agent-a"), &password).await.unwrap_err();
    assert!(matches!(err, SsoError::Rejected { status: 401, .. }), "{err}");
    let text = format!("{err} {err:?}");
    assert!(text.contains("PUT user agent-a") && text.contains("401"), "{text}");
    assert!(!text.contains("not-the-token") && !text.contains("sealed-before"), "{text}");

    let client = BridgeClient::new(&bridge.url(), Secret::new(bridge.token())).unwrap();
    let mut bad = agent("agent-a");
    bad.email = "no address".into();
    let err = client.create_or_update(&bad, &password).await.unwrap_err();
    assert!(matches!(&err, SsoError::Rejected { status: 400, message, .. } if message.contains("e-mail")), "{err}");
    let err = client.user("Bad/Name").await.unwrap_err();
    assert!(matches!(err, SsoError::Rejected { status: 400, .. }), "{err}");
    assert!(!format!("{client:?}").contains(bridge.token()));

    // The users file broken: retryable, with the bridge's reason.
    std::fs::write(bridge.users_file(), "users: [").unwrap();
    let err = client.create_or_update(&agent("agent-a"), &password).await.unwrap_err();
    assert!(err.is_retryable() && matches!(err, SsoError::Unavailable { status: 503, .. }), "{err}");
    assert!(err.to_string().contains("not valid YAML"), "{err}");

    // A base URL that is not the bridge's root: its 404s are no "no such user".
    let elsewhere =
        BridgeClient::new(&format!("{}/not-the-bridge", bridge.url()), Secret::new(bridge.token())).unwrap();
    let err = elsewhere.user("agent-a").await.unwrap_err();
    assert!(matches!(err, SsoError::Unexpected { status: 404, .. }), "{err}");
    assert!(matches!(elsewhere.delete("agent-a").await, Err(SsoError::Unexpected { status: 404, .. })));

    // The bridge gone: a transport error, retryable, naming the address.
    let url = bridge.url();
    bridge.process().kill();
    let err = client.user("agent-a").await.unwrap_err();
    assert!(err.is_retryable() && matches!(err, SsoError::Transport { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
}
