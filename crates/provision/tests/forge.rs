//! The forge adapter against the forge stand-in (`hyperhive_testkit::forge`), which checks what
//! a Forgejo/Gitea server checks for these operations: the whole provisioning flow, the looks
//! that make each step idempotent, and every way a call can fail.

use std::time::Duration;

use hyperhive_provision::forge::{Forge, ForgeError, ForgejoClient, NewForgeUser, TokenCheck, Visibility};
use hyperhive_provision::secret::Secret;
use hyperhive_testkit::forge::{ADMIN_USER, ForgeStandIn};
use proptest::prelude::*;

const TEMPLATE_OWNER: &str = "swarm-ops";
const TEMPLATE: &str = "agent-config-template";
const SCOPES: &[&str] = &["write:repository", "read:user"];
const TOKEN_NAME: &str = "hyperhive-agent";

async fn forge() -> (ForgeStandIn, ForgejoClient) {
    let stand_in = ForgeStandIn::start().await.expect("start the forge stand-in");
    stand_in.add_template(TEMPLATE_OWNER, TEMPLATE);
    let client = ForgejoClient::new(&stand_in.url(), Secret::new(stand_in.admin_token())).expect("client");
    (stand_in, client)
}

fn agent(name: &str) -> NewForgeUser {
    NewForgeUser {
        username: name.into(),
        email: format!("{name}@agents.example"),
        full_name: format!("Agent {name}"),
        visibility: Visibility::Private,
    }
}

fn password(text: &str) -> Secret {
    Secret::new(text)
}

#[track_caller]
fn assert_refused(result: Result<impl std::fmt::Debug, ForgeError>, status: u16, says: &str) -> ForgeError {
    let err = result.expect_err("the forge must refuse");
    assert_eq!(err.status(), Some(status), "{err}");
    assert!(err.to_string().contains(says), "{err:?} should say {says:?}");
    err
}

#[tokio::test]
async fn full_flow_creates_a_user_a_repo_and_a_token_and_sees_the_token_revoked() {
    let (stand_in, forge) = forge().await;
    let pw = password("agent-1-generated-password");

    assert_eq!(forge.user("agent-1").await.unwrap(), None);
    let user = forge.create_user(&agent("agent-1"), &pw).await.expect("create user");
    assert_eq!(user.login, "agent-1");
    assert_eq!(user.email, "agent-1@agents.example", "an admin sees the email");
    let facts = stand_in.user("agent-1").expect("the forge has the user");
    assert!(!facts.must_change_password, "the user must be able to sign in over the API at once");
    assert_eq!(facts.visibility, "private");
    assert_eq!(facts.full_name, "Agent agent-1");
    assert_eq!(forge.user("AGENT-1").await.unwrap().map(|u| u.id), Some(user.id), "names are case-insensitive");
    assert!(forge.password_works("agent-1", &pw).await.unwrap());

    assert_eq!(forge.repo("agent-1", "config").await.unwrap(), None);
    let repo = forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-1", "config", true).await.expect("generate");
    assert_eq!(
        (repo.owner.as_str(), repo.name.as_str(), repo.full_name.as_str()),
        ("agent-1", "config", "agent-1/config")
    );
    assert!(repo.private && !repo.template && !repo.empty, "{repo:?}");
    assert!(repo.clone_url.ends_with("/agent-1/config.git"), "{}", repo.clone_url);
    assert_eq!(forge.repo("agent-1", "config").await.unwrap(), Some(repo));

    let token = forge.mint_token("agent-1", &pw, TOKEN_NAME, SCOPES).await.expect("mint");
    assert_eq!(token.expose().len(), 40);
    assert_eq!(stand_in.token_scopes("agent-1", TOKEN_NAME).unwrap(), SCOPES);
    assert_eq!(forge.token_names("agent-1", &pw).await.unwrap(), vec![TOKEN_NAME.to_owned()]);
    assert_eq!(forge.check_token(&token).await.unwrap(), TokenCheck::Valid { login: "agent-1".into() });

    assert!(stand_in.revoke_token("agent-1", TOKEN_NAME));
    assert_eq!(forge.check_token(&token).await.unwrap(), TokenCheck::Invalid);
    assert_eq!(forge.check_token(&Secret::new("0123456789abcdef")).await.unwrap(), TokenCheck::Invalid);

    let counts = stand_in.counts();
    assert_eq!((counts.users_created, counts.repos_generated, counts.tokens_minted), (1, 1, 1));
}

#[tokio::test]
async fn a_token_whose_value_was_lost_is_deleted_by_name_and_minted_again() {
    let (stand_in, forge) = forge().await;
    let pw = password("agent-2-generated-password");
    forge.create_user(&agent("agent-2"), &pw).await.unwrap();
    let lost = forge.mint_token("agent-2", &pw, TOKEN_NAME, SCOPES).await.unwrap();

    // After a crash the controller knows only the name.
    assert!(forge.token_names("agent-2", &pw).await.unwrap().contains(&TOKEN_NAME.to_owned()));
    let again = forge.mint_token("agent-2", &pw, TOKEN_NAME, SCOPES).await;
    assert!(assert_refused(again, 400, "has been used already").is_already_exists());
    forge.delete_token("agent-2", &pw, TOKEN_NAME).await.expect("delete by name");
    let fresh = forge.mint_token("agent-2", &pw, TOKEN_NAME, SCOPES).await.expect("mint again");

    assert_ne!(fresh.expose(), lost.expose());
    assert_eq!(forge.check_token(&lost).await.unwrap(), TokenCheck::Invalid);
    assert_eq!(forge.check_token(&fresh).await.unwrap(), TokenCheck::Valid { login: "agent-2".into() });

    forge.delete_token("agent-2", &pw, "never-minted").await.expect("a token already gone is success");
    let counts = stand_in.counts();
    assert_eq!((counts.tokens_minted, counts.tokens_deleted), (2, 1));
}

#[tokio::test]
async fn an_existing_user_is_proven_only_by_its_password() {
    let (stand_in, forge) = forge().await;
    stand_in.add_user("agent-3", "the-sealed-password", false);

    let found = forge.user("agent-3").await.unwrap().expect("exists");
    assert_eq!(found.login, "agent-3");
    assert!(forge.password_works("agent-3", &password("the-sealed-password")).await.unwrap());
    assert!(!forge.password_works("agent-3", &password("someone-elses-password")).await.unwrap());
    assert!(!forge.password_works("nobody-here", &password("the-sealed-password")).await.unwrap());

    let again = forge.create_user(&agent("agent-3"), &password("the-sealed-password")).await;
    assert!(assert_refused(again, 422, "user already exists").is_already_exists());
    assert_eq!(stand_in.counts().users_created, 0);
}

#[tokio::test]
async fn a_user_barred_from_the_api_is_neither_proven_nor_disproven() {
    let (stand_in, forge) = forge().await;
    stand_in.add_user("agent-4", "agent-4-password", false);
    stand_in.set_must_change_password("agent-4", true);
    let result = forge.password_works("agent-4", &password("agent-4-password")).await;
    assert_refused(result, 403, "must change your password");
    let result = forge.mint_token("agent-4", &password("agent-4-password"), TOKEN_NAME, SCOPES).await;
    assert_refused(result, 403, "must change your password");
}

#[tokio::test]
async fn a_wrong_or_weak_admin_token_is_refused() {
    let (stand_in, _) = forge().await;
    let pw = password("agent-5-generated-password");

    let stranger = ForgejoClient::new(&stand_in.url(), Secret::new("not-a-token-of-this-forge")).unwrap();
    // Not even a public look passes for anonymous: the answer would hide emails.
    assert_refused(stranger.user(ADMIN_USER).await, 401, "invalid username, password or token");
    assert_refused(stranger.create_user(&agent("agent-5"), &pw).await, 401, "invalid username, password or token");
    assert_refused(
        stranger.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-5", "c", true).await,
        401,
        "invalid username, password or token",
    );

    stand_in.add_user("plain-user", "plain-user-password", false);
    let not_admin =
        ForgejoClient::new(&stand_in.url(), Secret::new(stand_in.add_token("plain-user", "t", &["all"]))).unwrap();
    assert_refused(not_admin.create_user(&agent("agent-5"), &pw).await, 403, "user should be the site admin");

    let narrow =
        ForgejoClient::new(&stand_in.url(), Secret::new(stand_in.add_token(ADMIN_USER, "narrow", &["read:user"])))
            .unwrap();
    assert_refused(narrow.create_user(&agent("agent-5"), &pw).await, 403, "[write:admin]");
    assert_eq!(stand_in.counts().users_created, 0);
    assert!(stand_in.user("agent-5").is_none());
}

#[tokio::test]
async fn generating_needs_a_template_that_exists_and_is_one_and_a_free_name() {
    let (stand_in, forge) = forge().await;
    forge.create_user(&agent("agent-6"), &password("agent-6-generated-password")).await.unwrap();
    stand_in.add_repo(TEMPLATE_OWNER, "not-a-template", false, false);

    assert_refused(forge.generate_repo(TEMPLATE_OWNER, "missing", "agent-6", "config", true).await, 404, "HTTP 404");
    assert_refused(
        forge.generate_repo(TEMPLATE_OWNER, "not-a-template", "agent-6", "config", true).await,
        422,
        "this is not a template repo",
    );
    assert_refused(
        forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "ghost-owner", "config", true).await,
        404,
        "request owner `ghost-owner` does not exist",
    );
    assert_refused(forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-6", "x.git", true).await, 422, "not allowed");

    forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-6", "config", false).await.expect("first");
    let again = forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-6", "config", false).await;
    assert!(assert_refused(again, 409, "same name already exists").is_already_exists());
    assert_eq!(stand_in.counts().repos_generated, 1);
    assert!(!stand_in.repo("agent-6", "config").unwrap().private);
}

#[tokio::test]
async fn the_forge_refuses_taken_emails_reserved_names_weak_passwords_and_users_with_repos() {
    let (stand_in, forge) = forge().await;
    forge.create_user(&agent("agent-7"), &password("agent-7-generated-password")).await.unwrap();
    let mut same_email = agent("agent-8");
    same_email.email = "AGENT-7@agents.example".into();
    let taken = forge.create_user(&same_email, &password("agent-8-generated-password")).await;
    assert!(assert_refused(taken, 422, "e-mail already in use").is_already_exists());

    let reserved = forge.create_user(&agent("admin"), &password("admin-generated-password")).await;
    assert!(!assert_refused(reserved, 422, "name is reserved").is_already_exists());
    assert_refused(forge.create_user(&agent("agent-9"), &password("short")).await, 400, "PasswordIsRequired");

    forge.generate_repo(TEMPLATE_OWNER, TEMPLATE, "agent-7", "config", true).await.unwrap();
    assert_refused(forge.delete_user("agent-7").await, 422, "ownership of repositories");
    forge.create_user(&agent("agent-10"), &password("agent-10-generated-password")).await.unwrap();
    forge.delete_user("agent-10").await.expect("delete");
    forge.delete_user("agent-10").await.expect("a user already gone is success");
    assert_eq!(stand_in.counts().users_deleted, 1);
    assert_eq!(stand_in.counts().users_created, 2);
}

#[tokio::test]
async fn malformed_input_is_refused_before_any_request() {
    let (stand_in, forge) = forge().await;
    let pw = password("a-good-password");
    let before = stand_in.counts().requests;

    let invalid = [
        forge.user("../admin").await.map(|_| ()),
        forge.user("").await.map(|_| ()),
        forge.create_user(&NewForgeUser { email: "no-at-sign".into(), ..agent("agent-11") }, &pw).await.map(|_| ()),
        forge.create_user(&agent("agent-11"), &password("")).await.map(|_| ()),
        forge.repo("agent-11", "a/b").await.map(|_| ()),
        forge.generate_repo(TEMPLATE_OWNER, "..", "agent-11", "config", true).await.map(|_| ()),
        forge.mint_token("agent-11", &pw, "123", SCOPES).await.map(|_| ()),
        forge.mint_token("agent-11", &pw, TOKEN_NAME, &["repo"]).await.map(|_| ()),
        forge.mint_token("agent-11", &pw, TOKEN_NAME, &[]).await.map(|_| ()),
        forge.delete_token("agent-11", &pw, "0x1f").await,
        forge.check_token(&Secret::new("has space")).await.map(|_| ()),
    ];
    for result in invalid {
        let err = result.expect_err("malformed input must be refused");
        assert!(matches!(err, ForgeError::Invalid { .. }), "{err:?}");
        assert!(!err.is_transient(), "{err}");
    }
    assert_eq!(stand_in.counts().requests, before, "nothing was sent");
}

#[tokio::test]
async fn a_forge_that_is_down_gives_a_transient_error_that_says_so() {
    let (stand_in, forge) = forge().await;
    stand_in.set_down(true);
    let err = forge.user("agent-12").await.expect_err("down");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("HTTP 503 Service Unavailable"), "{err}");
    let err = forge.create_user(&agent("agent-12"), &password("agent-12-password")).await.expect_err("down");
    assert!(err.is_transient() && err.to_string().contains("create user \"agent-12\""), "{err}");

    stand_in.set_down(false);
    forge.create_user(&agent("agent-12"), &password("agent-12-password")).await.expect("the caller's retry works");
    assert_eq!(stand_in.counts().users_created, 1);
}

#[tokio::test]
async fn no_server_or_a_silent_one_is_unreachable_and_transient() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    // Accepts connections and never answers.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let forge =
        ForgejoClient::with_timeout(&silent_url, Secret::new("admin-token"), Duration::from_millis(300)).unwrap();
    let err = forge.user("agent-13").await.expect_err("no answer");
    assert!(matches!(err, ForgeError::Unreachable { .. }) && err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("timed out"), "{err}");
    holder.abort();

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let forge = ForgejoClient::new(&closed_url, Secret::new("admin-token")).unwrap();
    let err = forge.user("agent-13").await.expect_err("nobody listens");
    assert!(matches!(err, ForgeError::Unreachable { .. }) && err.is_transient(), "{err:?}");
}

#[tokio::test]
async fn malformed_json_from_the_forge_is_a_clear_error() {
    let (stand_in, forge) = forge().await;
    let pw = password("agent-14-generated-password");
    forge.create_user(&agent("agent-14"), &pw).await.unwrap();
    stand_in.set_malformed(true);
    for err in [
        forge.user("agent-14").await.map(|_| ()).expect_err("garbage"),
        forge.mint_token("agent-14", &pw, TOKEN_NAME, SCOPES).await.map(|_| ()).expect_err("garbage"),
        forge.token_names("agent-14", &pw).await.map(|_| ()).expect_err("garbage"),
    ] {
        assert!(matches!(err, ForgeError::BadAnswer { .. }), "{err:?}");
        assert!(err.to_string().contains("unexpected answer: HTTP 2"), "{err}");
        assert!(err.to_string().contains("wrong type") || err.to_string().contains("ends early"), "{err}");
        assert!(!err.is_transient());
    }
}

#[tokio::test]
async fn token_listing_reads_every_page() {
    let (stand_in, forge) = forge().await;
    let pw = password("agent-15-generated-password");
    forge.create_user(&agent("agent-15"), &pw).await.unwrap();
    assert_eq!(forge.token_names("agent-15", &pw).await.unwrap(), Vec::<String>::new());
    stand_in.set_max_page(2);
    let names: Vec<String> = (0..5).map(|i| format!("token-{i}")).collect();
    for name in &names {
        forge.mint_token("agent-15", &pw, name, SCOPES).await.unwrap();
    }
    let mut listed = forge.token_names("agent-15", &pw).await.unwrap();
    listed.sort();
    assert_eq!(listed, names, "every page read, none twice");
    let wrong = forge.token_names("agent-15", &password("wrong-password")).await;
    assert_refused(wrong, 401, "invalid username, password or token");
}

#[tokio::test]
async fn the_admin_token_never_appears_in_the_clients_debug() {
    let (stand_in, forge) = forge().await;
    let debug = format!("{forge:?}");
    assert!(!debug.contains(&stand_in.admin_token()), "{debug}");
}

/// Runs the calls that can fail with a secret in hand and collects their errors.
async fn errors_with(forge: &ForgejoClient, stand_in: &ForgeStandIn, user: &str, secret: &Secret) -> Vec<ForgeError> {
    let mut errors = Vec::new();
    stand_in.set_down(true);
    errors.extend(forge.mint_token(user, secret, TOKEN_NAME, SCOPES).await.err());
    errors.extend(forge.check_token(secret).await.err());
    errors.extend(forge.create_user(&agent(user), secret).await.err());
    stand_in.set_down(false);
    stand_in.set_malformed(true);
    errors.extend(forge.mint_token(user, secret, TOKEN_NAME, SCOPES).await.err());
    errors.extend(forge.check_token(secret).await.err());
    stand_in.set_malformed(false);
    errors.extend(forge.token_names(user, secret).await.err());
    errors.extend(forge.mint_token(user, secret, "9-starts-with-a-digit", SCOPES).await.err());
    errors
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Whatever the secret, no error the adapter returns shows it, nor the admin token, in its
    // message or its Debug form.
    #[test]
    fn no_error_shows_a_password_a_token_or_the_admin_token(secret in "[A-Za-z0-9!#%&*+=?^_~-]{12,48}") {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        runtime.block_on(async {
            let (stand_in, forge) = forge().await;
            let secret = Secret::new(format!("S3cr3t-{secret}"));
            stand_in.add_user("prop-user", secret.expose(), false);
            let errors = errors_with(&forge, &stand_in, "prop-user", &secret).await;
            assert!(errors.len() >= 5, "{errors:?}");
            for err in errors {
                for shown in [err.to_string(), format!("{err:?}")] {
                    assert!(!shown.contains(secret.expose()), "{shown}");
                    assert!(!shown.contains(&stand_in.admin_token()), "{shown}");
                }
            }
        });
    }
}
