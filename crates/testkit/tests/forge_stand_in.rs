//! The forge stand-in's own checks, over raw HTTP: the rules of the forge's v1 API that the
//! adapter's well-formed requests never meet (the adapter's tests cover the rest).

use hyperhive_testkit::forge::{ADMIN_USER, ForgeStandIn};
use reqwest::{Client, Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

struct Api {
    stand_in: ForgeStandIn,
    http: Client,
}

impl Api {
    async fn start() -> Self {
        let stand_in = ForgeStandIn::start().await.expect("start the stand-in");
        stand_in.add_template("ops", "template");
        Self { stand_in, http: Client::new() }
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}/api/v1{path}", self.stand_in.url()))
    }

    fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.request(method, path).header("authorization", format!("token {}", self.stand_in.admin_token()))
    }
}

async fn answer(request: RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("the stand-in answers");
    let status = response.status();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[track_caller]
fn assert_error(got: (StatusCode, Value), status: StatusCode, says: &str) {
    assert_eq!(got.0, status, "{:?}", got.1);
    let message = got.1["message"].as_str().unwrap_or_else(|| panic!("APIError has a message: {:?}", got.1));
    assert!(message.contains(says), "{message:?} should say {says:?}");
    assert!(got.1["url"].as_str().is_some_and(|u| u.ends_with("/api/swagger")), "APIError has a url: {:?}", got.1);
}

fn new_user(name: &str) -> Value {
    json!({ "username": name, "email": format!("{name}@x.example"), "password": "a-long-password", "must_change_password": false })
}

#[tokio::test]
async fn a_user_created_without_must_change_password_false_is_barred_from_the_api() {
    let api = Api::start().await;
    let body = json!({ "username": "eve", "email": "eve@x.example", "password": "a-long-password" });
    let (status, user) = answer(api.admin(Method::POST, "/admin/users").json(&body)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (user["login"].as_str(), user["id"].is_i64(), user["is_admin"].as_bool()),
        (Some("eve"), true, Some(false))
    );
    let got = answer(api.request(Method::GET, "/user").basic_auth("eve", Some("a-long-password"))).await;
    assert_eq!(got.0, StatusCode::FORBIDDEN);
    assert!(got.1["message"].as_str().unwrap().starts_with("You must change your password. Change it at: "));
}

#[tokio::test]
async fn create_user_checks_the_bindings() {
    let api = Api::start().await;
    for (body, says) in [
        (json!({ "email": "a@x.example", "password": "a-long-password" }), "[Username]: Required"),
        (json!({ "username": "a", "password": "a-long-password" }), "[Email]: Required"),
        (json!({ "username": "a", "email": "not-an-email", "password": "a-long-password" }), "[Email]: Email"),
        (json!({ "username": "a--b", "email": "a@x.example", "password": "a-long-password" }), "[Username]"),
        (
            json!({ "username": "a", "email": "a@x.example", "password": "a-long-password", "visibility": "secret" }),
            "[Visibility]",
        ),
        (json!({ "username": 5 }), "cannot decode"),
    ] {
        assert_error(
            answer(api.admin(Method::POST, "/admin/users").json(&body)).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            says,
        );
    }
    assert_eq!(api.stand_in.counts().users_created, 0);
}

#[tokio::test]
async fn admin_routes_check_scopes_and_sign_in() {
    let api = Api::start().await;
    let read_user = api.stand_in.add_token(ADMIN_USER, "read-user", &["read:user"]);
    let got = answer(api.request(Method::POST, "/admin/users").bearer_auth(&read_user).json(&new_user("a"))).await;
    assert_error(got, StatusCode::FORBIDDEN, "required scope(s): [write:admin]");
    let repo_only = api.stand_in.add_token(ADMIN_USER, "repo-only", &["write:repository"]);
    let got = answer(api.request(Method::GET, &format!("/users/{ADMIN_USER}")).bearer_auth(&repo_only)).await;
    assert_error(got, StatusCode::FORBIDDEN, "[read:user]");
    assert_error(
        answer(api.request(Method::POST, "/admin/users").json(&new_user("a"))).await,
        StatusCode::UNAUTHORIZED,
        "token is required",
    );
    let unknown = api.request(Method::GET, &format!("/users/{ADMIN_USER}")).bearer_auth("0123456789abcdef");
    assert_error(answer(unknown).await, StatusCode::UNAUTHORIZED, "invalid username, password or token");
    // The deprecated query parameter signs in too, and is looked at before the header.
    let path = format!("/admin/users?access_token={}", api.stand_in.admin_token());
    let both = api.request(Method::POST, &path).bearer_auth("0123456789abcdef").json(&new_user("a"));
    assert_eq!(answer(both).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn token_routes_take_only_the_users_own_basic_auth_or_an_admins() {
    let api = Api::start().await;
    api.stand_in.add_user("ann", "ann-password", false);
    api.stand_in.add_user("bob", "bob-password", false);
    let anns_token = api.stand_in.add_token("ann", "all", &["all"]);

    let list = |who: Option<(&str, &str)>| {
        let request = api.request(Method::GET, "/users/ann/tokens");
        match who {
            Some((user, password)) => request.basic_auth(user, Some(password)),
            None => request,
        }
    };
    assert_error(answer(list(None)).await, StatusCode::FORBIDDEN, "doer should be the site admin");
    assert_error(answer(list(Some(("bob", "bob-password")))).await, StatusCode::FORBIDDEN, "doer should be");
    assert_error(
        answer(list(Some(("ann", "wrong")))).await,
        StatusCode::UNAUTHORIZED,
        "invalid username, password or token",
    );
    assert_error(
        answer(api.request(Method::GET, "/users/ann/tokens").bearer_auth(&anns_token)).await,
        StatusCode::UNAUTHORIZED,
        "auth required",
    );
    let (status, tokens) = answer(list(Some(("ann", "ann-password")))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        tokens,
        json!([{ "id": tokens[0]["id"], "name": "all", "sha1": "", "token_last_eight": &anns_token[32..], "scopes": ["all"] }])
    );
    assert_eq!(answer(list(Some((ADMIN_USER, "forge-admin-password")))).await.0, StatusCode::OK);

    let create = |body: Value| {
        api.request(Method::POST, "/users/ann/tokens").basic_auth("ann", Some("ann-password")).json(&body)
    };
    assert_error(
        answer(create(json!({ "scopes": ["all"] }))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[Name]: Required",
    );
    assert_error(answer(create(json!({ "name": "t" }))).await, StatusCode::BAD_REQUEST, "must have a scope");
    assert_error(
        answer(create(json!({ "name": "t", "scopes": ["repo"] }))).await,
        StatusCode::BAD_REQUEST,
        "invalid access token scope",
    );
    assert_error(
        answer(create(json!({ "name": "all", "scopes": ["all"] }))).await,
        StatusCode::BAD_REQUEST,
        "has been used already",
    );
    let (status, minted) = answer(create(json!({ "name": "t", "scopes": ["read:user"] }))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(minted["sha1"].as_str().map(str::len), Some(40));

    // A number is read as an id.
    let id = minted["id"].as_i64().unwrap();
    let delete = |token: String| {
        api.request(Method::DELETE, &format!("/users/ann/tokens/{token}")).basic_auth("ann", Some("ann-password"))
    };
    assert_eq!(answer(delete(id.to_string())).await.0, StatusCode::NO_CONTENT);
    assert_eq!(answer(delete(id.to_string())).await.0, StatusCode::NOT_FOUND);
    assert_eq!(answer(delete("all".into())).await.0, StatusCode::NO_CONTENT);
    assert_eq!(api.stand_in.token_names("ann"), Vec::<String>::new());
}

#[tokio::test]
async fn sudo_is_for_administrators_only() {
    let api = Api::start().await;
    api.stand_in.add_user("ann", "ann-password", false);
    let (status, user) = answer(api.admin(Method::GET, "/user").header("sudo", "ann")).await;
    assert_eq!((status, user["login"].as_str()), (StatusCode::OK, Some("ann")));
    let got =
        answer(api.request(Method::GET, "/user").basic_auth("ann", Some("ann-password")).header("sudo", ADMIN_USER))
            .await;
    assert_eq!(got, (StatusCode::FORBIDDEN, json!({ "message": "Only administrators allowed to sudo." })));
}

#[tokio::test]
async fn generate_checks_items_owner_and_permission() {
    let api = Api::start().await;
    api.stand_in.add_user("ann", "ann-password", false);
    api.stand_in.add_user("bob", "bob-password", false);
    let generate = |body: Value| api.admin(Method::POST, "/repos/ops/template/generate").json(&body);
    assert_error(
        answer(generate(json!({ "owner": "ann", "name": "c" }))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "at least one template item",
    );
    assert_error(
        answer(generate(json!({ "owner": "ann", "git_content": true }))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[Name]: Required",
    );
    assert_error(
        answer(generate(json!({ "owner": "ann", "name": "a b", "git_content": true }))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "AlphaDashDot",
    );
    let got = answer(generate(json!({ "owner": "nobody", "name": "c", "git_content": true }))).await;
    assert_eq!(got, (StatusCode::NOT_FOUND, json!({ "error": "request owner `nobody` does not exist" })));
    let as_ann = api
        .request(Method::POST, "/repos/ops/template/generate")
        .basic_auth("ann", Some("ann-password"))
        .json(&json!({ "owner": "bob", "name": "c", "git_content": true }));
    assert_error(answer(as_ann).await, StatusCode::FORBIDDEN, "Only admin can generate repository for other user.");
    let (status, repo) =
        answer(generate(json!({ "owner": "ann", "name": "c", "git_content": true, "private": true }))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (repo["owner"]["login"].as_str(), repo["full_name"].as_str(), repo["private"].as_bool()),
        (Some("ann"), Some("ann/c"), Some(true))
    );
    // A private repository is not there for someone else.
    let as_bob = api.request(Method::GET, "/repos/ann/c").basic_auth("bob", Some("bob-password"));
    assert_eq!(answer(as_bob).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn down_answers_503_to_everything_and_counts_requests() {
    let api = Api::start().await;
    api.stand_in.set_down(true);
    let got = answer(api.admin(Method::GET, "/user")).await;
    assert_eq!(got.0, StatusCode::SERVICE_UNAVAILABLE);
    api.stand_in.set_down(false);
    assert_eq!(answer(api.admin(Method::GET, "/user")).await.0, StatusCode::OK);
    assert_eq!(api.stand_in.counts().requests, 2);
}

#[tokio::test]
async fn organisations_teams_labels_and_hooks_check_owners_and_bindings() {
    let api = Api::start().await;
    api.stand_in.add_user("member", "member-password", false);
    let member = api.stand_in.add_token("member", "t", &["all"]);
    let as_member =
        |method: Method, path: &str| api.request(method, path).header("authorization", format!("token {member}"));

    // orgCreate: bindings, a name taken by a user, then 201 with the doer as owner.
    assert_error(
        answer(api.admin(Method::POST, "/orgs").json(&json!({}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[UserName]: Required",
    );
    assert_error(
        answer(api.admin(Method::POST, "/orgs").json(&json!({"username": "member"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "user already exists",
    );
    let (status, org) =
        answer(api.admin(Method::POST, "/orgs").json(&json!({"username": "swarm", "visibility": "private"}))).await;
    assert_eq!(
        (status, org["name"].as_str(), org["visibility"].as_str()),
        (StatusCode::CREATED, Some("swarm"), Some("private"))
    );
    assert_eq!(
        answer(api.request(Method::GET, "/orgs/swarm")).await.0,
        StatusCode::NOT_FOUND,
        "private: hidden from strangers"
    );
    assert_eq!(
        answer(api.admin(Method::GET, "/orgs/member")).await.0,
        StatusCode::NOT_FOUND,
        "a user is no organisation"
    );

    // Teams: owners only, name and permission bindings, taken names.
    let team = json!({"name": "agents", "permission": "read", "units": ["repo.code"]});
    assert_error(
        answer(as_member(Method::POST, "/orgs/swarm/teams").json(&team)).await,
        StatusCode::FORBIDDEN,
        "Must be an organization",
    );
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/teams").json(&json!({"name": "a b", "permission": "read"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "AlphaDashDot",
    );
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/teams").json(&json!({"name": "x", "permission": "owner"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[Permission]: In",
    );
    let (status, created) = answer(api.admin(Method::POST, "/orgs/swarm/teams").json(&team)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/teams").json(&team)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "team already exists",
    );
    let id = created["id"].as_i64().unwrap();
    assert_eq!(answer(api.admin(Method::PUT, &format!("/teams/{id}/members/ghost"))).await.0, StatusCode::NOT_FOUND);
    assert_eq!(answer(api.admin(Method::PUT, &format!("/teams/{id}/members/member"))).await.0, StatusCode::NO_CONTENT);
    let (status, members) = answer(api.admin(Method::GET, &format!("/teams/{id}/members"))).await;
    assert_eq!((status, members[0]["login"].as_str()), (StatusCode::OK, Some("member")));
    let (status, teams) = answer(as_member(Method::GET, "/orgs/swarm/teams")).await;
    assert_eq!(
        (status, teams.as_array().map(Vec::len)),
        (StatusCode::OK, Some(2)),
        "Owners and agents, seen by a member"
    );

    // Labels: name and colour required, the colour six hex digits.
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/labels").json(&json!({"name": "x"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[Color]: Required",
    );
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/labels").json(&json!({"name": "x", "color": "blue"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid color",
    );
    assert_error(
        answer(as_member(Method::POST, "/orgs/swarm/labels").json(&json!({"name": "x", "color": "00aa00"}))).await,
        StatusCode::FORBIDDEN,
        "owner",
    );
    let (status, label) =
        answer(api.admin(Method::POST, "/orgs/swarm/labels").json(&json!({"name": "x", "color": "#00AA00"}))).await;
    assert_eq!((status, label["color"].as_str()), (StatusCode::CREATED, Some("#00aa00")));

    // Hooks: type, config.url and config.content_type checked; the secret is never shown.
    let hook =
        |kind: &str, config: Value| json!({"type": kind, "config": config, "events": ["pull_request"], "active": true});
    let config = json!({"url": "http://127.0.0.1:9/hook", "content_type": "json", "secret": "s3cret-value"});
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/hooks").json(&hook("slack", config.clone()))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid hook type",
    );
    assert_error(
        answer(api.admin(Method::POST, "/orgs/swarm/hooks").json(&hook("gitea", json!({"content_type": "json"}))))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Missing config option: url",
    );
    assert_error(
        answer(
            api.admin(Method::POST, "/orgs/swarm/hooks")
                .json(&hook("gitea", json!({"url": "http://x", "content_type": "xml"}))),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid content type",
    );
    assert_error(answer(as_member(Method::GET, "/orgs/swarm/hooks")).await, StatusCode::FORBIDDEN, "owner");
    let (status, created) = answer(api.admin(Method::POST, "/orgs/swarm/hooks").json(&hook("forgejo", config))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(!created.to_string().contains("s3cret-value"), "{created}");
    let id = created["id"].as_i64().unwrap();
    let (status, edited) = answer(
        api.admin(Method::PATCH, &format!("/orgs/swarm/hooks/{id}")).json(&json!({"config": {"secret": "new"}})),
    )
    .await;
    assert_eq!(
        (status, edited["events"].clone()),
        (StatusCode::OK, json!(["push"])),
        "events set anew: none means push"
    );
    assert_eq!(api.stand_in.hooks("swarm")[0].secret, "new");
    assert_eq!(answer(api.admin(Method::DELETE, &format!("/orgs/swarm/hooks/{id}"))).await.0, StatusCode::NO_CONTENT);
    assert_eq!(answer(api.admin(Method::DELETE, &format!("/orgs/swarm/hooks/{id}"))).await.0, StatusCode::NOT_FOUND);
    let counts = api.stand_in.counts();
    assert_eq!(
        (
            counts.orgs_created,
            counts.teams_created,
            counts.labels_created,
            counts.hooks_created,
            counts.hooks_edited,
            counts.hooks_deleted
        ),
        (1, 1, 1, 1, 1, 1)
    );
}

#[tokio::test]
async fn pulls_issues_and_collaborators_check_visibility_and_bindings() {
    let api = Api::start().await;
    api.stand_in.add_org("swarm");
    api.stand_in.add_repo("swarm", "a-config", false, true);
    api.stand_in.add_user("a", "a-password", false);
    api.stand_in.add_user("b", "b-password", false);
    let token_b = api.stand_in.add_token("b", "t", &["all"]);
    let (number, sent) = api.stand_in.open_pull("swarm", "a-config", "a", "change", "topic").await;
    assert!(sent.is_empty(), "no hook, no delivery");
    api.stand_in.open_issue("swarm", "a-config", "bug", &[]).await;

    let as_b = |path: &str| api.request(Method::GET, path).header("authorization", format!("token {token_b}"));
    assert_eq!(answer(as_b("/repos/swarm/a-config/pulls")).await.0, StatusCode::NOT_FOUND, "private: hidden");
    assert_error(
        answer(api.admin(Method::GET, "/repos/swarm/a-config/pulls?state=merged")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[State]: In",
    );
    let (status, pulls) = answer(api.admin(Method::GET, "/repos/swarm/a-config/pulls?state=all")).await;
    assert_eq!(
        (status, pulls[0]["number"].as_i64(), pulls[0]["head"]["ref"].as_str()),
        (StatusCode::OK, Some(number), Some("topic"))
    );
    let (_, issues) = answer(api.admin(Method::GET, "/repos/swarm/a-config/issues?state=open&type=issues")).await;
    assert_eq!(
        (issues[0]["title"].as_str(), issues[0]["number"].as_i64()),
        (Some("bug"), Some(number + 1)),
        "one index for both"
    );

    // Collaborators: administrators or owners only, users only, a known permission.
    let put = |user: &str, body: Value| {
        api.admin(Method::PUT, &format!("/repos/swarm/a-config/collaborators/{user}")).json(&body)
    };
    assert_error(
        answer(put("a", json!({"permission": "owner"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "[Permission]: In",
    );
    assert_error(
        answer(put("swarm", json!({"permission": "write"}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "organization",
    );
    assert_eq!(answer(put("a", json!({"permission": "write"}))).await.0, StatusCode::NO_CONTENT);
    let as_b_put = api
        .request(Method::PUT, "/repos/swarm/a-config/collaborators/b")
        .header("authorization", format!("token {token_b}"))
        .json(&json!({"permission": "write"}));
    assert_eq!(answer(as_b_put).await.0, StatusCode::NOT_FOUND, "b cannot even see a's repository");
    assert_eq!(api.stand_in.collaborators("swarm", "a-config").len(), 1);
}

#[tokio::test]
async fn deliveries_are_signed_with_the_hooks_secret_and_carry_the_forges_headers() {
    use std::sync::{Arc, Mutex};
    use warp::Filter;
    let api = Api::start().await;
    api.stand_in.add_org("swarm");
    api.stand_in.add_repo("swarm", "r", false, true);
    let received: Arc<Mutex<Vec<(warp::http::HeaderMap, bytes::Bytes)>>> = Arc::default();
    let keep = received.clone();
    let route = warp::post().and(warp::header::headers_cloned()).and(warp::body::bytes()).map(move |h, b| {
        keep.lock().unwrap().push((h, b));
        warp::reply()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(warp::serve(route).incoming(listener).run());
    let body = json!({"type": "gitea", "config": {"url": url, "content_type": "json", "secret": "k"}, "events": ["pull_request"], "active": true});
    assert_eq!(answer(api.admin(Method::POST, "/orgs/swarm/hooks").json(&body)).await.0, StatusCode::CREATED);

    let (_, sent) = api.stand_in.open_pull("swarm", "r", ADMIN_USER, "t", "b").await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].status, Some(200));
    let issue = api.stand_in.open_issue("swarm", "r", "not subscribed", &[]).await;
    assert!(issue.1.is_empty(), "the hook does not take issues");
    let (headers, payload) = received.lock().unwrap()[0].clone();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    assert_eq!(header("x-forgejo-event"), "pull_request");
    assert_eq!(header("x-gitea-delivery"), header("x-forgejo-delivery"));
    assert_eq!(header("x-gitea-signature"), hyperhive_testkit::forge::signature("k", &payload));
    assert_eq!(header("content-type"), "application/json");
    let payload: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!((payload["action"].as_str(), payload["pull_request"]["title"].as_str()), (Some("opened"), Some("t")));
    assert_eq!(payload["repository"]["full_name"], "swarm/r");
    server.abort();
}

#[tokio::test]
async fn a_name_taken_before_the_create_is_answered_422_and_belongs_to_someone_else() {
    let api = Api::start().await;
    let (status, _) = answer(api.admin(Method::GET, "/users/zed")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nobody holds the name yet");
    api.stand_in.take_name_before_create("Zed");
    let got = answer(api.admin(Method::POST, "/admin/users").json(&new_user("zed"))).await;
    assert_error(got, StatusCode::UNPROCESSABLE_ENTITY, "user already exists [name: zed]");
    assert_eq!(api.stand_in.counts().users_created, 0, "the other account was not made through the API");
    let (status, user) = answer(api.admin(Method::GET, "/users/zed")).await;
    assert_eq!((status, user["login"].as_str()), (StatusCode::OK, Some("zed")));
    let got = answer(api.request(Method::GET, "/user").basic_auth("zed", Some("a-long-password"))).await;
    assert_eq!(got.0, StatusCode::UNAUTHORIZED, "the caller's password does not sign in to it");
    // Only the next create is affected.
    let (status, _) = answer(api.admin(Method::POST, "/admin/users").json(&new_user("zoe"))).await;
    assert_eq!(status, StatusCode::CREATED);
}

/// What the `forge-stand-in` program serves in place of Forgejo: a forge with no user until the
/// command line makes one, its links under the configured ROOT_URL, and the one file it keeps,
/// the README `auto_init` writes, carried into a repository generated with git content.
#[tokio::test]
async fn a_fresh_forge_starts_empty_and_keeps_the_readme_auto_init_writes() {
    use base64::Engine;
    use hyperhive_testkit::forge::NewUser;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let stand_in = ForgeStandIn::serve_fresh(listener, "http://forge.test:3000/").expect("serve");
    let http = Client::new();
    let api = |method: Method, path: &str| {
        http.request(method, format!("{}/api/v1{path}", stand_in.url())).basic_auth("boss", Some("a-long-password"))
    };
    assert_eq!(answer(api(Method::GET, "/user")).await.0, StatusCode::UNAUTHORIZED, "no user before the command line");

    let boss = NewUser {
        login: "boss".into(),
        email: "boss@x.example".into(),
        password: "a-long-password".into(),
        is_admin: true,
        must_change_password: false,
    };
    stand_in.create_user(&boss).expect("the administrator");
    assert_eq!(stand_in.create_user(&boss), Err("user already exists [name: boss]".into()));
    let short =
        NewUser { login: "other".into(), email: "other@x.example".into(), password: "short".into(), ..boss.clone() };
    assert_eq!(stand_in.create_user(&short), Err("password is too short".into()));
    let taken_email = NewUser { login: "other".into(), ..boss.clone() };
    assert!(stand_in.create_user(&taken_email).is_err_and(|e| e.contains("e-mail already in use")));
    let bob = NewUser { login: "bob".into(), email: "bob@x.example".into(), is_admin: false, ..boss.clone() };
    stand_in.create_user(&bob).expect("bob");

    let template = json!({ "name": "agent-config", "description": "what every agent starts from", "auto_init": true, "template": true });
    let (status, repo) = answer(api(Method::POST, "/user/repos").json(&template)).await;
    assert_eq!(status, StatusCode::CREATED, "{repo}");
    assert_eq!((repo["template"].as_bool(), repo["empty"].as_bool()), (Some(true), Some(false)));
    assert_eq!(repo["html_url"], "http://forge.test:3000/boss/agent-config");
    assert_error(
        answer(api(Method::POST, "/user/repos").json(&template)).await,
        StatusCode::CONFLICT,
        "already exists",
    );
    let bad = json!({ "name": "no spaces" });
    assert_error(answer(api(Method::POST, "/user/repos").json(&bad)).await, StatusCode::UNPROCESSABLE_ENTITY, "[Name]");
    let (status, _) = answer(api(Method::POST, "/user/repos").json(&json!({ "name": "bare" }))).await;
    assert_eq!(status, StatusCode::CREATED);

    let readme = |repo: &'static str| async move {
        let (status, file) = answer(api(Method::GET, &format!("/repos/boss/{repo}/contents/README.md"))).await;
        let text =
            file["content"].as_str().map(|c| base64::engine::general_purpose::STANDARD.decode(c).expect("base64"));
        (status, text.map(|t| String::from_utf8(t).expect("utf-8")))
    };
    let expected = "# agent-config\n\nwhat every agent starts from".to_owned();
    assert_eq!(readme("agent-config").await, (StatusCode::OK, Some(expected.clone())));
    assert_eq!(readme("bare").await.0, StatusCode::NOT_FOUND, "a repository made without auto_init holds nothing");

    let generate = json!({ "owner": "boss", "name": "gamma-config", "git_content": true });
    let (status, _) = answer(api(Method::POST, "/repos/boss/agent-config/generate").json(&generate)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(readme("gamma-config").await, (StatusCode::OK, Some(expected)), "the template's README carried over");

    let (status, _) = answer(api(Method::PUT, "/repos/boss/gamma-config/collaborators/bob")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, collaborators) = answer(api(Method::GET, "/repos/boss/gamma-config/collaborators")).await;
    assert_eq!(status, StatusCode::OK);
    let logins: Vec<_> = collaborators.as_array().expect("a list").iter().map(|u| u["login"].clone()).collect();
    assert_eq!(logins, [json!("bob")]);
}
