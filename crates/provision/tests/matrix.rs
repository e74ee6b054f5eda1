//! The matrix adapter against a real Synapse (testkit): registration with the shared secret,
//! login, `whoami`, logout, and every refusal the controller has to tell apart: an account that
//! exists, a wrong password, a deactivated or locked account, a wrong shared secret, throttling,
//! a homeserver that is down. No password, token or shared secret may appear in any error or
//! `Debug` text.

use std::time::Duration;

use hyperhive_provision::Secret;
use hyperhive_provision::matrix::{AccountCheck, Matrix, MatrixError, SynapseClient};
use hyperhive_testkit::Synapse;

const PASSWORD: &str = "correct horse battery staple";

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
