//! The matrix adapter against a real Synapse (testkit): registration with the shared secret,
//! login, `whoami`, logout, and every refusal the controller has to tell apart: an account that
//! exists, a wrong password, a deactivated or locked account, a wrong shared secret, throttling,
//! a homeserver that is down. Then the controller's admin session, and the repair of a
//! deactivated or locked account through the admin API. No password, token or shared secret may
//! appear in any error or `Debug` text.

use std::time::Duration;

use anyhow::{Context, bail};
use hyperhive_provision::Secret;
use hyperhive_provision::matrix::{AccountCheck, AdminAccountState, Matrix, MatrixError, Session, SynapseClient};
use hyperhive_testkit::{Synapse, wait_until};
use serde_json::json;

const PASSWORD: &str = "correct horse battery staple";
const ADMIN_LOCALPART: &str = "hyperhive-controller";
const ADMIN_PASSWORD: &str = "the controller's sealed admin password";

fn client(synapse: &Synapse) -> SynapseClient {
    SynapseClient::new(&synapse.base_url(), Secret::new(synapse.shared_secret())).expect("a valid client")
}

/// Fails when any of `secrets` occurs in `text`.
fn assert_no_secret(text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "a secret leaked into {text:?}");
    }
}

#[tokio::test]
async fn register_login_whoami_logout_and_a_second_registration() -> anyhow::Result<()> {
    let mut synapse = Synapse::start().await?;
    let matrix = client(&synapse);
    let password = Secret::new(PASSWORD);

    let registered = matrix.register("agent-a", &password, Some("Agent A")).await?;
    assert_eq!(registered.user_id, synapse.user_id("agent-a"));
    assert!(!registered.device_id.is_empty());
    let token = registered.access_token.expose().to_owned();
    let valid = AccountCheck::Valid { user_id: synapse.user_id("agent-a") };
    assert_eq!(matrix.whoami(&registered.access_token).await?, valid);

    // Registering again adopts nothing: the controller proves ownership by logging in.
    let again = matrix.register("agent-a", &password, None).await.expect_err("exists");
    assert!(matches!(&again, MatrixError::AlreadyExists { localpart } if localpart == "agent-a"), "{again}");
    let session = matrix.login("agent-a", &password).await?;
    assert_eq!(session.user_id, synapse.user_id("agent-a"));
    assert_ne!(session.device_id, registered.device_id, "a login is a new device");
    assert_eq!(matrix.whoami(&session.access_token).await?, valid);

    let wrong = matrix.login("agent-a", &Secret::new("not the password")).await.expect_err("wrong password");
    assert!(matches!(wrong, MatrixError::Forbidden { .. }), "{wrong}");
    let unknown = matrix.login("nobody", &password).await.expect_err("no such account");
    assert!(matches!(unknown, MatrixError::Forbidden { .. }), "{unknown}");

    // Logout revokes that token only; a revoked token counts as revoked again.
    matrix.logout(&registered.access_token).await?;
    assert_eq!(matrix.whoami(&registered.access_token).await?, AccountCheck::Invalid);
    assert_eq!(matrix.whoami(&session.access_token).await?, valid);
    matrix.logout(&registered.access_token).await?;
    assert_eq!(matrix.whoami(&Secret::new("syt_made_up")).await?, AccountCheck::Invalid);

    // Input the homeserver would refuse is refused before anything is sent.
    for (localpart, needle) in [("Agent-A", "'A'"), ("", "empty"), ("a:b", "':'")] {
        let err = matrix.register(localpart, &password, None).await.expect_err(needle);
        assert!(matches!(err, MatrixError::InvalidInput { what: "localpart", .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    let err = matrix.register("agent-b", &Secret::new(""), None).await.expect_err("empty password");
    assert!(matches!(err, MatrixError::InvalidInput { what: "password", .. }), "{err}");
    let err = matrix.register("agent-b", &password, Some("two\nlines")).await.expect_err("control character");
    assert!(matches!(err, MatrixError::InvalidInput { what: "display name", .. }), "{err}");

    // A homeserver that is down is named as unreachable.
    synapse.process().kill();
    let down = matrix.whoami(&session.access_token).await.expect_err("down");
    assert!(matches!(down, MatrixError::Unreachable { .. }), "{down:?}");
    assert!(down.to_string().contains("unreachable") && down.to_string().contains(&synapse.base_url()), "{down}");
    let down_register = matrix.register("agent-c", &password, None).await.expect_err("down");
    assert!(matches!(down_register, MatrixError::Unreachable { .. }), "{down_register:?}");

    let secrets = [PASSWORD, token.as_str(), session.access_token.expose(), synapse.shared_secret()];
    for text in [
        format!("{registered:?} {session:?} {matrix:?}"),
        format!("{again} {again:?} {wrong} {wrong:?} {unknown:?} {err:?}"),
        format!("{down} {down:?} {down_register:?}"),
    ] {
        assert_no_secret(&text, &secrets);
    }
    Ok(())
}

#[tokio::test]
async fn deactivated_and_locked_accounts_are_told_apart() -> anyhow::Result<()> {
    let synapse = Synapse::start().await?;
    let matrix = client(&synapse);
    let password = Secret::new(PASSWORD);
    let gone = matrix.register("agent-gone", &password, None).await?;
    let locked = matrix.register("agent-locked", &password, None).await?;

    synapse.deactivate(&synapse.user_id("agent-gone")).await?;
    // Deactivation deletes the account's tokens: whoami cannot tell it from a logout...
    assert_eq!(matrix.whoami(&gone.access_token).await?, AccountCheck::Invalid);
    // ...and neither can logging in: Synapse deletes a deactivated account's password, so the
    // password check fails before the deactivation check (M_USER_DEACTIVATED is never reached).
    // The account is lost either way: it cannot be used, and its user id stays taken.
    let err = matrix.login("agent-gone", &password).await.expect_err("deactivated");
    assert!(matches!(err, MatrixError::Forbidden { .. }), "{err}");
    // The user id stays taken: a new agent cannot inherit the old one's identity.
    let err = matrix.register("agent-gone", &password, None).await.expect_err("still taken");
    assert!(matches!(err, MatrixError::AlreadyExists { .. }), "{err}");

    synapse.lock(&synapse.user_id("agent-locked")).await?;
    assert_eq!(matrix.whoami(&locked.access_token).await?, AccountCheck::Locked);
    let err = matrix.login("agent-locked", &password).await.expect_err("locked");
    assert!(matches!(err, MatrixError::Locked), "{err}");
    assert_no_secret(&format!("{err} {err:?}"), &[PASSWORD, locked.access_token.expose()]);
    Ok(())
}

#[tokio::test]
async fn a_wrong_shared_secret_is_refused_clearly_and_creates_nothing() -> anyhow::Result<()> {
    let synapse = Synapse::start().await?;
    let wrong_secret = "not-the-registration-shared-secret";
    let impostor = SynapseClient::new(&synapse.base_url(), Secret::new(wrong_secret))?;
    let password = Secret::new(PASSWORD);

    let err = impostor.register("agent-a", &password, None).await.expect_err("wrong secret");
    assert!(matches!(err, MatrixError::SharedSecretRejected), "{err:?}");
    assert!(err.to_string().contains("shared secret"), "{err}");
    assert_no_secret(&format!("{err} {err:?} {impostor:?}"), &[wrong_secret, PASSWORD, synapse.shared_secret()]);

    // Nothing was created: the localpart is still free.
    let err = client(&synapse).login("agent-a", &password).await.expect_err("no account");
    assert!(matches!(err, MatrixError::Forbidden { .. }), "{err}");
    client(&synapse).register("agent-a", &password, None).await?;
    Ok(())
}

#[tokio::test]
async fn throttled_logins_say_how_long_to_wait() -> anyhow::Result<()> {
    // One failed login per account, then 429 until a token refills (100 s away).
    let synapse = Synapse::start_with_config(
        "rc_login:\n  address: {per_second: 1000, burst_count: 1000}\n  account: {per_second: 1000, burst_count: 1000}\n  failed_attempts: {per_second: 0.01, burst_count: 1}\n",
    )
    .await?;
    let matrix = client(&synapse);
    matrix.register("agent-a", &Secret::new(PASSWORD), None).await?;
    let wrong = Secret::new("wrong password");

    let first = matrix.login("agent-a", &wrong).await.expect_err("wrong password");
    assert!(matches!(first, MatrixError::Forbidden { .. }), "{first}");
    let throttled = matrix.login("agent-a", &wrong).await.expect_err("throttled");
    let MatrixError::RateLimited { retry_after: Some(wait) } = throttled else {
        panic!("not rate limited with a wait: {throttled:?}")
    };
    assert!(wait > Duration::ZERO && wait <= Duration::from_secs(101), "{wait:?}");
    assert!(throttled.to_string().contains("retry after"), "{throttled}");
    Ok(())
}

#[test]
fn malformed_settings_are_refused_without_echoing_the_secret() {
    for (url, needle) in [
        ("not a url", "not a URL"),
        ("ftp://matrix.example", "not http"),
        ("https://user:pw@matrix.example", "credentials"),
        ("https://matrix.example/?a=b", "query"),
    ] {
        let err = SynapseClient::new(url, Secret::new("s3cret")).expect_err(needle);
        assert!(matches!(err, MatrixError::InvalidInput { what: "base URL", .. }), "{err}");
        assert!(err.to_string().contains(needle), "{url}: {err}");
        assert_no_secret(&format!("{err} {err:?}"), &["s3cret", "pw@"]);
    }
    let err = SynapseClient::new("https://matrix.example", Secret::new("")).expect_err("empty secret");
    assert!(err.to_string().contains("shared secret"), "{err}");
    let ok = SynapseClient::new("https://matrix.example/", Secret::new("s3cret")).expect("valid");
    assert_eq!(ok.base_url(), "https://matrix.example");
    assert_no_secret(&format!("{ok:?}"), &["s3cret"]);
}

/// Deactivates `user_id` as an administrator would, with the admin session `admin_token`.
async fn deactivate_as(synapse: &Synapse, admin_token: &Secret, user_id: &str) -> anyhow::Result<()> {
    let url = format!("{}/_synapse/admin/v1/deactivate/{user_id}", synapse.base_url());
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(admin_token.expose())
        .json(&json!({ "erase": false }))
        .send()
        .await
        .context("calling the deactivate admin API")?;
    let status = response.status();
    if !status.is_success() {
        bail!("deactivating {user_id}: Synapse answered {status}: {}", response.text().await?);
    }
    Ok(())
}

/// A Synapse that can reactivate accounts, and its controller's admin session.
///
/// A fresh SQLite database builds some indexes in background updates, and reactivation needs the
/// one on `profiles.full_user_id` (Synapse upserts the profile on it; until then it answers 500).
/// The updates are made to run back to back, and a throwaway account is reactivated until that
/// works; a production database has long finished them.
async fn synapse_ready_for_repairs() -> anyhow::Result<(Synapse, SynapseClient, Session)> {
    let synapse = Synapse::start_with_config("background_updates:\n  sleep_enabled: false\n").await?;
    let matrix = client(&synapse);
    let admin = matrix.admin_session(ADMIN_LOCALPART, &Secret::new(ADMIN_PASSWORD)).await?;
    let probe = matrix.register("probe", &Secret::new(PASSWORD), None).await?;
    deactivate_as(&synapse, &admin.access_token, &probe.user_id).await?;
    let (m, token, user_id, password) = (&matrix, &admin.access_token, &probe.user_id, &Secret::new(PASSWORD));
    wait_until("Synapse's background update of the profiles index", Duration::from_secs(60), move || async move {
        match m.reactivate(token, user_id, password).await {
            Err(MatrixError::Server { status: 500, .. }) => None,
            done => Some(done),
        }
    })
    .await??;
    Ok((synapse, matrix, admin))
}

#[tokio::test]
async fn a_deactivated_or_locked_account_is_repaired_with_the_same_password() -> anyhow::Result<()> {
    let (synapse, matrix, admin) = synapse_ready_for_repairs().await?;
    let password = Secret::new(PASSWORD);
    assert_eq!(admin.user_id, synapse.user_id(ADMIN_LOCALPART));
    let agent_id = synapse.user_id("agent-a");
    let registered = matrix.register("agent-a", &password, None).await?;
    let valid = AccountCheck::Valid { user_id: agent_id.clone() };
    let active = AdminAccountState::Exists { deactivated: false, locked: false };
    assert_eq!(matrix.account_state(&admin.access_token, &agent_id).await?, active);

    // An administrator deactivates it: the token and the password are gone.
    deactivate_as(&synapse, &admin.access_token, &agent_id).await?;
    assert_eq!(matrix.whoami(&registered.access_token).await?, AccountCheck::Invalid);
    let err = matrix.login("agent-a", &password).await.expect_err("deactivated");
    assert!(matches!(err, MatrixError::Forbidden { .. }), "{err}");
    let deactivated = AdminAccountState::Exists { deactivated: true, locked: false };
    assert_eq!(matrix.account_state(&admin.access_token, &agent_id).await?, deactivated);

    // The repair: the same user id and password work again; the old token stays revoked.
    matrix.reactivate(&admin.access_token, &agent_id, &password).await?;
    assert_eq!(matrix.account_state(&admin.access_token, &agent_id).await?, active);
    let session = matrix.login("agent-a", &password).await?;
    assert_eq!(matrix.whoami(&session.access_token).await?, valid);
    assert_eq!(matrix.whoami(&registered.access_token).await?, AccountCheck::Invalid);
    // Repairing an account that needs nothing changes nothing: its session stays valid.
    matrix.reactivate(&admin.access_token, &agent_id, &password).await?;
    assert_eq!(matrix.whoami(&session.access_token).await?, valid);

    // A lock keeps the tokens but refuses them; the repair unlocks and keeps the devices.
    synapse.lock(&agent_id).await?;
    assert_eq!(matrix.whoami(&session.access_token).await?, AccountCheck::Locked);
    let locked = AdminAccountState::Exists { deactivated: false, locked: true };
    assert_eq!(matrix.account_state(&admin.access_token, &agent_id).await?, locked);
    matrix.reactivate(&admin.access_token, &agent_id, &password).await?;
    assert_eq!(matrix.account_state(&admin.access_token, &agent_id).await?, active);
    assert_eq!(matrix.whoami(&session.access_token).await?, valid);
    matrix.login("agent-a", &password).await?;

    let secrets = [PASSWORD, ADMIN_PASSWORD, admin.access_token.expose(), session.access_token.expose()];
    assert_no_secret(&format!("{admin:?} {session:?} {err} {err:?} {matrix:?}"), &secrets);
    Ok(())
}

#[tokio::test]
async fn the_admin_session_is_registered_once_then_proven_by_its_password() -> anyhow::Result<()> {
    let synapse = Synapse::start().await?;
    let matrix = client(&synapse);
    let admin_password = Secret::new(ADMIN_PASSWORD);
    let first = matrix.admin_session(ADMIN_LOCALPART, &admin_password).await?;
    let second = matrix.admin_session(ADMIN_LOCALPART, &admin_password).await?;
    assert_eq!(first.user_id, synapse.user_id(ADMIN_LOCALPART));
    assert_eq!(second.user_id, first.user_id);
    assert_ne!(second.device_id, first.device_id, "the second is a login: a new device");
    for session in [&first, &second] {
        let state = matrix.account_state(&session.access_token, &first.user_id).await?;
        assert_eq!(state, AdminAccountState::Exists { deactivated: false, locked: false });
    }

    // Someone else's account under that localpart is not adopted.
    let wrong = matrix.admin_session(ADMIN_LOCALPART, &Secret::new("a guess")).await.expect_err("wrong password");
    assert!(matches!(wrong, MatrixError::Forbidden { .. }), "{wrong}");

    // A plain account, even one whose password is known, is no admin: not for the admin API,
    // and not as the admin session.
    let password = Secret::new(PASSWORD);
    let agent = matrix.register("agent-a", &password, None).await?;
    let not_admin = matrix.account_state(&agent.access_token, &agent.user_id).await.expect_err("not an admin");
    assert!(matches!(&not_admin, MatrixError::Forbidden { message } if message.contains("admin")), "{not_admin}");
    let err = matrix.reactivate(&agent.access_token, &agent.user_id, &password).await.expect_err("not an admin");
    assert!(matches!(err, MatrixError::Forbidden { .. }), "{err}");
    let plain = matrix.admin_session("agent-a", &password).await.expect_err("not an admin");
    assert!(matches!(&plain, MatrixError::Forbidden { message } if message.contains("admin")), "{plain}");
    let revoked = matrix.account_state(&Secret::new("syt_made_up"), &agent.user_id).await.expect_err("no token");
    assert!(matches!(revoked, MatrixError::UnknownToken), "{revoked}");

    // An unknown user is not found, and reactivating it creates nothing.
    let nobody = synapse.user_id("nobody");
    assert_eq!(matrix.account_state(&first.access_token, &nobody).await?, AdminAccountState::NotFound);
    let err = matrix.reactivate(&first.access_token, &nobody, &password).await.expect_err("no account");
    assert!(matches!(&err, MatrixError::NotFound { user_id } if *user_id == nobody), "{err}");
    assert_eq!(matrix.account_state(&first.access_token, &nobody).await?, AdminAccountState::NotFound);

    // A user id with a `/` is one path segment.
    let slash = matrix.register("agent/slash", &password, None).await?;
    let state = matrix.account_state(&first.access_token, &slash.user_id).await?;
    assert_eq!(state, AdminAccountState::Exists { deactivated: false, locked: false });

    let secrets = [PASSWORD, ADMIN_PASSWORD, first.access_token.expose(), agent.access_token.expose()];
    assert_no_secret(&format!("{first:?} {wrong} {wrong:?} {not_admin:?} {plain:?} {err:?}"), &secrets);
    Ok(())
}

#[tokio::test]
async fn malformed_user_ids_are_refused_before_any_request() {
    // Nothing listens there: a request would answer Unreachable.
    let matrix = SynapseClient::new("http://127.0.0.1:1", Secret::new("s3cret")).expect("valid");
    let token = Secret::new("syt_token");
    for user_id in ["agent-a", "@agent-a", "@:localhost", "@agent a:localhost", "agent-a:localhost"] {
        let err = matrix.account_state(&token, user_id).await.expect_err(user_id);
        assert!(matches!(err, MatrixError::InvalidInput { what: "user id", .. }), "{user_id}: {err}");
        let err = matrix.reactivate(&token, user_id, &Secret::new(PASSWORD)).await.expect_err(user_id);
        assert!(matches!(err, MatrixError::InvalidInput { what: "user id", .. }), "{user_id}: {err}");
    }
    let err = matrix.reactivate(&token, "@agent-a:localhost", &Secret::new("")).await.expect_err("empty");
    assert!(matches!(err, MatrixError::InvalidInput { what: "password", .. }), "{err}");
}
