//! The swarm UI in a real headless Chromium, through a real nginx in front of the controller's
//! socket (and a proxy the test can cut), with real NATS, the controller, a hive-c0re and its
//! agent: every page, at a desktop's and a phone's width, loads without a single console error
//! and without an API path or a variable name in its text, and is usable at 390 px; the overview
//! follows the swarm live; the agents list filters; pausing in the UI reaches `hive-status`; a
//! schedule added in the UI fires, is shown done, is edited and removed after a confirmation; a
//! running turn's output shows in the terminal view, between turn separators, and a browser
//! whose connection was cut resumes the terminal with nothing missed or doubled; a prompt typed
//! on the agent page runs and is listed with its result, and a running turn is cancelled from the
//! page. Screenshots of every page at both widths go to `target/ui-screenshots/`, or to
//! `HYPERHIVE_SCREENSHOT_DIR` when set (docs/ui holds a run's).
//!
//! Needs `cargo build -p hive-agent -p hive-c0re` and scripts/setup (chromium, chromedriver, nginx).

mod common;

use common::PNG;

use std::path::PathBuf;
use std::time::Duration;

use common::one_hive::{OneHive, printing_turn};
use hyperhive_testkit::{AutheliaBridge, Browser, ChaosProxy, Nginx, wait_until, workspace_root};
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(30);

/// The swarm (bee prints eight numbered lines, 0.4 s apart, per turn), nginx in front of its
/// socket and a proxy the test can cut in front of nginx.
struct Stack {
    swarm: OneHive,
    _nginx: Nginx,
    proxy: ChaosProxy,
    /// The secret store's key and files the browser uploads.
    files: tempfile::TempDir,
}

impl Stack {
    /// Agents can be created; their SSO, forge, Matrix and store steps are skipped unless
    /// `controller_env` configures them.
    async fn start(controller_env: &[(&str, &str)]) -> Stack {
        let (swarm, keys) =
            OneHive::start_able_to_create(&["bee"], |turns| printing_turn(turns, 8, "0.4"), controller_env).await;
        let nginx = Nginx::in_front_of(&swarm.socket).await.unwrap();
        let proxy = ChaosProxy::start(([127, 0, 0, 1], nginx.port()).into()).await.unwrap();
        Stack { swarm, _nginx: nginx, proxy, files: keys }
    }

    fn url(&self, route: &str) -> String {
        format!("http://127.0.0.1:{}/#/{route}", self.proxy.port())
    }
}

fn screenshot_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("HYPERHIVE_SCREENSHOT_DIR")
        .map_or_else(|| workspace_root().join("target/ui-screenshots"), PathBuf::from);
    dir.join(format!("{name}.png"))
}

/// The widths every page is looked at: a desktop's window and a phone's.
const WIDTHS: [(&str, u32, u32); 2] = [("desktop", 1400, 900), ("phone", 390, 844)];

/// Every page of the UI, by its route.
const PAGES: [&str; 11] = [
    "overview",
    "agents",
    "agents/bee",
    "hives",
    "hives/h1",
    "jobs",
    "schedules",
    "create",
    "config-prs",
    "issues",
    "links",
];

/// Text a person should never be shown: the API's routes, the controller's variables.
fn shows_internals(text: &str) -> bool {
    text.contains("/api/") || text.contains("SWARM_")
}

/// What overflows the window sideways (cut off on a phone): each element's tag and text.
async fn cut_off(browser: &Browser) -> Vec<String> {
    let found = browser
        .run(
            "const width = document.documentElement.clientWidth; return [...document.querySelectorAll('main *, header *')]\
             .filter((e) => e.offsetParent !== null && !e.parentElement.closest('.scroll') && e.getBoundingClientRect().right > width + 1)\
             .map((e) => `${e.tagName} ${e.textContent.slice(0, 40)}`).slice(0, 5);",
            json!([]),
        )
        .await
        .unwrap();
    serde_json::from_value(found).unwrap()
}

/// Loads every page at both widths: no console error at all, nothing internal in the text,
/// nothing cut off on a phone, the navigation folded behind its button there; a screenshot of
/// each.
async fn every_page_at_every_width(stack: &Stack, browser: &Browser) {
    for (width_name, width, height) in WIDTHS {
        browser.set_window_size(width, height).await.unwrap();
        for page in PAGES {
            show(stack, browser, page).await;
            browser.text_when("main h1", SOON, |t| !t.is_empty() && t != "Unavailable").await.unwrap();
            if page == "agents/bee" {
                browser.text_when("#turn-header", SOON, |t| !t.contains("waiting for")).await.unwrap();
            }
            let text = browser.text_when("main", SOON, |_| true).await.unwrap();
            let banner = browser.text_when("#banner", SOON, |_| true).await.unwrap();
            assert!(!shows_internals(&text) && !shows_internals(&banner), "{page}: {text} {banner}");
            let errors = browser.console_errors().await.unwrap();
            assert_eq!(errors, Vec::<String>::new(), "console errors on {page} at {width_name} width");
            if width_name == "phone" {
                assert_eq!(cut_off(browser).await, Vec::<String>::new(), "{page} cut off at {width} px");
            }
            browser.screenshot(&screenshot_path(&format!("{}-{width_name}", page.replace('/', "-")))).await.unwrap();
        }
    }
    // On a phone the navigation opens from its button.
    let nav_shown = "return document.getElementById('nav').offsetHeight > 0;";
    assert_eq!(browser.run(nav_shown, json!([])).await.unwrap(), json!(false), "the navigation folded on a phone");
    browser.click("#menu", SOON).await.unwrap();
    assert_eq!(browser.run(nav_shown, json!([])).await.unwrap(), json!(true), "the menu button shows the navigation");
    browser.click(r##"nav a[href="#/agents"]"##, SOON).await.unwrap();
    browser.text_when("main h1", SOON, |t| t == "Agents").await.unwrap();
    browser.set_window_size(1400, 900).await.unwrap();
}

/// Opens `page` and waits until it is drawn (a change of the hash alone leaves the previous
/// page's elements in place for a moment).
async fn show(stack: &Stack, browser: &Browser, page: &str) {
    browser.open(&stack.url(page)).await.unwrap();
    let path = page.split('?').next().unwrap_or(page);
    let view = match path.split_once('/') {
        Some((kind, _)) => format!("{kind}/item"),
        None => path.to_owned(),
    };
    wait_until(&format!("{page} drawn"), SOON, || async {
        let drawn =
            browser.run("return document.getElementById('main').dataset.view || null;", json!([])).await.ok()?;
        (drawn.as_str() == Some(view.as_str())).then_some(())
    })
    .await
    .unwrap();
}

/// Draws an example graph (alpha's three provisioning steps, one failed and one blocked behind
/// it; beta's one step, done an hour ago) on the page and reads back what was drawn.
const JOB_GRAPH: &str = r#"(() => {
  const hour_ago = new Date(Date.now() - 3600000).toISOString();
  const node = (id, agent, state, extra = {}) => ({id, kind: id.split('.')[1], agent, state, attempts: 1, last_error: null,
    next_attempt_at: null, created_at: hour_ago, started_at: hour_ago, finished_at: hour_ago, ...extra});
  const view = graphView({generation: 1, nodes: [
    node('alpha.sso', 'alpha', 'succeeded'), node('alpha.forge-user', 'alpha', 'failed', {attempts: 5, last_error: 'the forge answered 500'}),
    node('alpha.deploy', 'alpha', 'blocked'), node('beta.sso', 'beta', 'succeeded')],
    edges: [{from: 'alpha.sso', to: 'alpha.forge-user'}, {from: 'alpha.forge-user', to: 'alpha.deploy'}]}, () => {});
  document.getElementById('main').append(view);
  const alpha = view.querySelector('[data-agent=alpha]');
  const x = (id) => Number(alpha.querySelector(`g[data-job="${id}"] rect`).getAttribute('x'));
  return [alpha.querySelectorAll('g.node').length, alpha.querySelectorAll('path.edge').length, alpha.open,
    view.querySelector('[data-agent=beta]').open, x('alpha.sso') < x('alpha.forge-user') && x('alpha.forge-user') < x('alpha.deploy'),
    alpha.querySelector('button.retry').dataset.job, alpha.querySelector('g[data-job="alpha.deploy"]').getAttribute('class')];
})()"#;

/// `GET path` on the controller's socket, as JSON.
async fn api_get(stack: &Stack, path: &str) -> Value {
    let request = hyper::Request::builder().uri(path).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
    let (status, body) = swarmctl::client::send(&stack.swarm.socket, request).await.unwrap();
    assert!(status.is_success(), "{path}: {status}");
    serde_json::from_slice(&body).unwrap()
}

/// An agent's labels as `GET /api/agents` lists them now (JSON `null` when it has none). A
/// listing started after a write was answered shows it: no waiting.
async fn labels_of(stack: &Stack, agent: &str) -> Value {
    let agents = api_get(stack, "/api/agents").await;
    let listed = agents.as_array().unwrap().iter().find(|a| a["name"] == agent);
    listed.unwrap_or_else(|| panic!("{agent} is not listed: {agents}")).get("labels").cloned().unwrap_or(Value::Null)
}

/// Runs `expression` in the page and returns its value.
async fn eval(browser: &Browser, expression: &str) -> serde_json::Value {
    browser.run(&format!("return {expression};"), json!([])).await.unwrap()
}

/// The number shown for `key` on the overview's card `card`.
async fn count_on(browser: &Browser, card: &str, key: &str, patience: Duration, want: &str) {
    browser
        .text_when(&format!(r#"#{card} [data-count="{key}"] dd"#), patience, |t| t == want)
        .await
        .unwrap_or_else(|e| panic!("{card} {key} never {want}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_drives_the_swarm_in_a_real_browser() {
    let mut stack = Stack::start(&[]).await;
    let browser = Browser::start().await.unwrap();

    // The agents list: bee running and idle, its queue empty, on its hive's link.
    show(&stack, &browser, "agents").await;
    let row = browser
        .text_when("#agent-list", SOON, |t| t.contains("bee") && t.contains("running") && t.contains("idle"))
        .await
        .unwrap();
    assert!(row.contains("h1"), "{row}");
    assert_eq!(
        eval(&browser, "document.querySelector('#agent-list a[href=\"#/hives/h1\"]') !== null").await,
        json!(true)
    );
    every_page_at_every_width(&stack, &browser).await;

    // The list filters by a search (name, hive, state...) and by hive and state.
    show(&stack, &browser, "agents").await;
    browser.type_into("#agent-search", "nobody", SOON).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| !t.contains("bee")).await.unwrap();
    let set = |css: &str, value: &str| {
        format!(
            "const e = document.querySelector('{css}'); e.value = '{value}'; e.dispatchEvent(new Event('input')); return true;"
        )
    };
    browser.run(&set("#agent-search", "h1 idle"), json!([])).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| t.contains("bee")).await.unwrap();
    browser.run(&set("#agent-state", "paused"), json!([])).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| !t.contains("bee")).await.unwrap();
    browser.run(&set("#agent-state", ""), json!([])).await.unwrap();
    browser.run(&set("#agent-hive", "h1"), json!([])).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| t.contains("bee")).await.unwrap();
    // A stale hive's agent is shown as of its last report, and an unapplied wanted state as
    // pending.
    let shown = eval(
        &browser,
        "reportedState({actual: {actual: 'running', wanted: 'up'}, wanted: {state: 'paused'}}, {stale: true, age_secs: 54}).textContent",
    )
    .await;
    assert_eq!(shown, json!("running, as of 54 s ago; hive not reporting pending: paused"));

    // The overview counts bee idle on a fresh hive, and follows a pause without a reload.
    show(&stack, &browser, "overview").await;
    count_on(&browser, "agents-doing", "idle", SOON, "1").await;
    count_on(&browser, "hives-fresh", "fresh", SOON, "1").await;
    count_on(&browser, "hives-fresh", "stale", SOON, "0").await;
    let pause = "fetch('/api/hives/h1/agents/bee/state', {method: 'PUT', headers: {'content-type': 'application/json'}, body: JSON.stringify({state: arguments[0]})}); return true;";
    browser.run(pause, json!(["paused"])).await.unwrap();
    count_on(&browser, "agents-doing", "paused", SOON, "1").await;
    browser.run(pause, json!(["up"])).await.unwrap();
    count_on(&browser, "agents-doing", "idle", SOON, "1").await;

    // The hive page: its version, its last report and its agents.
    show(&stack, &browser, "hives/h1").await;
    let hive = browser.text_when("main", SOON, |t| t.contains("bee") && t.contains("Version")).await.unwrap();
    assert!(hive.contains("fresh") && hive.contains("s ago"), "{hive}");
    // Each report redraws the hive's facts, never its agents' rows (a button under the pointer
    // stays where it is).
    let mark = "document.querySelector('#hive dl').dataset.mark = 'old'; document.querySelector('#hive-agents table').dataset.mark = 'old'; return true;";
    browser.run(mark, json!([])).await.unwrap();
    let facts_redrawn = "return document.querySelector('#hive dl').dataset.mark === undefined ? true : null;";
    wait_until("the hive's next report drawn", SOON, || async {
        browser.run(facts_redrawn, json!([])).await.ok()?.as_bool().map(|_| ())
    })
    .await
    .unwrap();
    assert_eq!(eval(&browser, "document.querySelector('#hive-agents table').dataset.mark").await, json!("old"));

    // Pause in the UI: the hive reports bee paused; then up again.
    show(&stack, &browser, "agents").await;
    browser.click(r#"button[data-agent="bee"][data-state="paused"]"#, SOON).await.unwrap();
    wait_until("bee paused in hive-status", SOON, || async {
        (stack.swarm.actual_in_hive_status("bee").await.as_deref() == Some("paused")).then_some(())
    })
    .await
    .unwrap();
    browser.click(r#"button[data-agent="bee"][data-state="up"]"#, SOON).await.unwrap();
    wait_until("bee running in hive-status", SOON, || async {
        (stack.swarm.actual_in_hive_status("bee").await.as_deref() == Some("running")).then_some(())
    })
    .await
    .unwrap();

    // A schedule added in the UI (once, five seconds from now, bee picked from the roster)
    // fires, and is then shown done, without a Pause button.
    show(&stack, &browser, "schedules").await;
    browser.type_into(r#"#schedule-form input[name="name"]"#, "from-the-ui", SOON).await.unwrap();
    browser.click(r#"#schedule-form input[name="agents"][value="bee"]"#, SOON).await.unwrap();
    browser.type_into(r#"#schedule-form textarea[name="body"]"#, "a prompt typed in the UI", SOON).await.unwrap();
    browser.click("#schedule-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#schedules", SOON, |t| t.contains("from-the-ui") && t.contains("up")).await.unwrap();
    wait_until("the UI's schedule fired", SOON, || async {
        stack.swarm.turns("bee").contains("a prompt typed in the UI").then_some(())
    })
    .await
    .unwrap();
    browser.text_when("#schedules", SOON, |t| t.contains("done")).await.unwrap();
    let buttons = browser.text_when(r#"[data-schedule="from-the-ui"]"#, SOON, |_| true).await.unwrap();
    assert!(!buttons.contains("Pause"), "a fired one-shot has nothing to pause: {buttons}");
    // Edited in its form: every hour, in the CLI's syntax; times in the viewer's zone, UTC on
    // hover.
    browser.click(r#"[data-schedule="from-the-ui"] button.edit"#, SOON).await.unwrap();
    browser.click(r#"#schedule-form input[name="kind"][value="every"]"#, SOON).await.unwrap();
    browser.type_into(r#"#schedule-form input[name="every"]"#, "1h", SOON).await.unwrap();
    browser.click("#schedule-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#schedules", SOON, |t| t.contains("every 1h") && t.contains("up")).await.unwrap();
    let hover = eval(&browser, "document.querySelector('#schedules td[data-label=\"Next fire\"] time').title").await;
    assert!(hover.as_str().unwrap().ends_with("(UTC)"), "{hover}");
    browser.screenshot(&screenshot_path("schedules")).await.unwrap();
    show(&stack, &browser, "overview").await;
    browser.text_when("#next-fires", SOON, |t| t.contains("from-the-ui")).await.unwrap();
    browser.screenshot(&screenshot_path("overview")).await.unwrap();
    // Remove asks first: cancelled, the schedule stays; confirmed, it is gone.
    show(&stack, &browser, "schedules").await;
    browser.click(r#"[data-schedule="from-the-ui"] button.remove"#, SOON).await.unwrap();
    browser.click(r#"#confirm button[value="cancel"]"#, SOON).await.unwrap();
    browser.text_when("#schedules", SOON, |t| t.contains("from-the-ui")).await.unwrap();
    browser.click(r#"[data-schedule="from-the-ui"] button.remove"#, SOON).await.unwrap();
    browser.click("#confirm-ok", SOON).await.unwrap();
    browser.text_when("main", SOON, |t| !t.contains("from-the-ui") && t.contains("Add schedule")).await.unwrap();
    // A calendar schedule in a zone: its next fire is the controller's reading of the calendar
    // in that zone (09:00 on 1 January in Berlin is 08:00 UTC).
    browser.type_into(r#"#schedule-form input[name="name"]"#, "new-year", SOON).await.unwrap();
    browser.click(r#"#schedule-form input[name="agents"][value="bee"]"#, SOON).await.unwrap();
    browser.type_into(r#"#schedule-form textarea[name="body"]"#, "a happy new year", SOON).await.unwrap();
    browser.click(r#"#schedule-form input[name="kind"][value="calendar"]"#, SOON).await.unwrap();
    browser.type_into(r#"#schedule-form input[name="calendar"]"#, "0 9 1 1 *", SOON).await.unwrap();
    browser.type_into(r#"#schedule-form input[name="tz"]"#, "Europe/Berlin", SOON).await.unwrap();
    browser.click("#schedule-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#schedules", SOON, |t| t.contains("0 9 1 1 * (Europe/Berlin)")).await.unwrap();
    let hover = eval(&browser, "document.querySelector('#schedules td[data-label=\"Next fire\"] time').title").await;
    assert!(hover.as_str().unwrap().ends_with("-01-01T08:00:00Z (UTC)"), "{hover}");
    browser.click(r#"[data-schedule="new-year"] button.remove"#, SOON).await.unwrap();
    browser.click("#confirm-ok", SOON).await.unwrap();
    browser.text_when("main", SOON, |t| !t.contains("new-year") && t.contains("Add schedule")).await.unwrap();

    // Creating an agent: the browser checks the name's pattern (an invalid pattern would be
    // dropped); the turn command is empty, its example only a placeholder; after the create a
    // notice says the agent starts paused and links to it, and its jobs are drawn as they run:
    // the steps of the systems this controller was not given are `skipped`, not `succeeded`.
    show(&stack, &browser, "create").await;
    browser.type_into(r#"#create-form input[name="name"]"#, "Not_valid", SOON).await.unwrap();
    let name = "document.querySelector('#create-form input[name=name]')";
    assert_eq!(eval(&browser, &format!("{name}.validity.patternMismatch")).await, json!(true));
    browser.run(&format!("{name}.value = ''; return true;"), json!([])).await.unwrap();
    let command = "document.querySelector('#create-form input[name=turn_command]')";
    assert_eq!(
        eval(&browser, &format!("[{command}.value, {command}.placeholder]")).await,
        json!(["", "e.g. claude -p"])
    );
    browser.type_into(r#"#create-form input[name="name"]"#, "gamma", SOON).await.unwrap();
    assert_eq!(eval(&browser, &format!("{name}.validity.valid")).await, json!(true));
    browser.type_into(r#"#create-form input[name="turn_command"]"#, "cat", SOON).await.unwrap();
    browser.type_into(r#"#create-form input[name="labels"]"#, "team=web", SOON).await.unwrap();
    browser.click("#create-form button[type=submit]", SOON).await.unwrap();
    let notice = browser.text_when("#created", SOON, |t| t.contains("gamma")).await.unwrap();
    assert_eq!(labels_of(&stack, "gamma").await, json!({"team": "web"}));
    assert!(notice.contains("starts paused"), "{notice}");
    assert_eq!(eval(&browser, "document.querySelector('#created a').hash").await, json!("#/agents/gamma"));
    let graph = wait_until("gamma's jobs settled", Duration::from_secs(60), || async {
        let graph = api_get(&stack, "/api/jobq/graph?agent=gamma").await;
        let nodes = graph["nodes"].as_array()?;
        let settled = ["succeeded", "skipped", "failed", "blocked", "cancelled"];
        (!nodes.is_empty() && nodes.iter().all(|n| settled.contains(&n["state"].as_str().unwrap_or(""))))
            .then_some(graph)
    })
    .await
    .unwrap();
    let state_of = |id: &str| graph["nodes"].as_array().unwrap().iter().find(|n| n["id"] == id).unwrap().clone();
    let sso = state_of("gamma.sso");
    assert_eq!(sso["state"], "skipped", "{graph}");
    assert!(sso["skipped_because"].as_str().unwrap().contains("is not set"), "{sso}");
    assert_eq!(state_of("gamma.deploy")["state"], "succeeded", "{graph}");
    assert!(state_of("gamma.deploy").get("skipped_because").is_none());
    browser.text_when(r#"#create-graph g[data-job="gamma.sso"]"#, SOON, |t| t.contains("skipped")).await.unwrap();
    browser.text_when(r#"#create-graph g[data-job="gamma.deploy"]"#, SOON, |t| t.contains("succeeded")).await.unwrap();
    browser.screenshot(&screenshot_path("created")).await.unwrap();
    // A controller that cannot create agents says so in plain words above the form.
    browser.run("configured = Promise.resolve({}); route(); return true;", json!([])).await.unwrap();
    let unable = browser.text_when("#create-unavailable", SOON, |t| !t.is_empty()).await.unwrap();
    assert!(unable.contains("cannot create agents") && !shows_internals(&unable), "{unable}");
    assert_eq!(
        eval(&browser, "document.querySelector('#create-form button[type=submit]').disabled").await,
        json!(true)
    );

    // The job graph is drawn: a column per dependency level, an arrow per edge, a state per
    // box, Retry beside a failed job; an agent whose jobs all succeeded long ago is folded.
    show(&stack, &browser, "jobs").await;
    let drawn = eval(&browser, JOB_GRAPH).await;
    assert_eq!(drawn, json!([3, 2, true, false, true, "alpha.forge-user", "node blocked"]));
    browser.screenshot(&screenshot_path("jobs-graph")).await.unwrap();

    // The agent page: labelled states, the icon that uploads, a running turn's output as it
    // comes, by who asked, with a live elapsed time.
    show(&stack, &browser, "agents/bee").await;
    let states = browser.text_when("#agent-states", SOON, |t| !t.is_empty()).await.unwrap();
    assert!(states.contains("wanted") && states.contains("on its hive"), "{states}");
    assert_eq!(eval(&browser, "document.querySelector('label.icon-upload img') !== null && document.querySelector('label.icon-upload input[type=file]').offsetWidth <= 1").await, json!(true));
    // A PNG chosen through the icon's hidden file input becomes bee's icon.
    let png = stack.files.path().join("bee.png");
    std::fs::write(&png, PNG).unwrap();
    browser.type_into("#icon-file", png.to_str().unwrap(), SOON).await.unwrap();
    wait_until("bee's uploaded icon", SOON, || async {
        let request = hyper::Request::builder()
            .uri("/api/agents/bee/icon")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let (_, body) = swarmctl::client::send(&stack.swarm.socket, request).await.ok()?;
        (body.as_ref() == PNG).then_some(())
    })
    .await
    .unwrap();
    // (The page redraws after an upload: open it again before typing into it.)
    show(&stack, &browser, "agents/bee").await;
    // Labels: two added in one go, one removed by its chip's button; each a merge patch.
    browser.type_into("#label-input", "team=infra tier=gold", SOON).await.unwrap();
    browser.click("#label-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#agent-labels", SOON, |t| t.contains("team=infra") && t.contains("tier=gold")).await.unwrap();
    browser.click(r#"#agent-labels [data-label="tier=gold"] button"#, SOON).await.unwrap();
    browser.text_when("#agent-labels", SOON, |t| t.contains("team=infra") && !t.contains("tier")).await.unwrap();
    assert_eq!(labels_of(&stack, "bee").await, json!({"team": "infra"}));
    // A word that is not a label is refused in the page, saying how to write one.
    browser.type_into("#label-input", "nolabel", SOON).await.unwrap();
    browser.click("#label-form button[type=submit]", SOON).await.unwrap();
    let refused = browser.text_when("#banner", SOON, |t| !t.is_empty()).await.unwrap();
    assert!(refused.contains("key=value"), "{refused}");
    // The agents list filters by label: bee (team=infra) shown, gamma (team=web) not.
    show(&stack, &browser, "agents").await;
    browser.text_when("#agent-label", SOON, |t| t.contains("team=infra") && t.contains("team=web")).await.unwrap();
    browser.run(&set("#agent-label", "team=infra"), json!([])).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| t.contains("bee") && !t.contains("gamma")).await.unwrap();
    browser.run(&set("#agent-label", "team=web"), json!([])).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| !t.contains("bee") && t.contains("gamma")).await.unwrap();
    // The list pages by its address, in name order: "Next page" moves on, "First page" back,
    // and the last page offers no next one.
    let names: Vec<String> = api_get(&stack, "/api/agents")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.len() >= 2 && !names[1].contains(&names[0]) && !names[0].contains(&names[1]), "{names:?}");
    show(&stack, &browser, "agents?limit=1").await;
    browser.text_when("#agent-list", SOON, |t| t.contains(&names[0]) && !t.contains(&names[1])).await.unwrap();
    browser.click("#next-page", SOON).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| t.contains(&names[1]) && !t.contains(&names[0])).await.unwrap();
    browser.click("#first-page", SOON).await.unwrap();
    browser.text_when("#agent-list", SOON, |t| t.contains(&names[0]) && !t.contains(&names[1])).await.unwrap();
    show(&stack, &browser, &format!("agents?limit={}", names.len() + 1)).await;
    browser.text_when("#agent-list", SOON, |t| names.iter().all(|n| t.contains(n.as_str()))).await.unwrap();
    assert_eq!(eval(&browser, "document.getElementById('next-page')").await, Value::Null, "a short page is the last");
    show(&stack, &browser, "agents/bee").await;
    browser.find("#terminal", SOON).await.unwrap();
    let todo = json!({"id": "t-ui", "source": "ui test", "body": "watch me"}).to_string();
    stack.swarm.js.publish("todo.bee", todo.into()).await.unwrap().await.unwrap();
    browser.text_when("#terminal", SOON, |t| t.contains("line 1 of t-ui")).await.unwrap();
    // The header and its elapsed time read at once: the turn may end between two reads.
    let (header, started) = wait_until("the working header", SOON, || async {
        let read = "const e = document.getElementById('turn-elapsed'); return e ? [document.getElementById('turn-header').textContent, e.dataset.elapsed] : null;";
        let both = browser.run(read, json!([])).await.ok()?;
        Some((both[0].as_str()?.to_owned(), both[1].as_str()?.to_owned()))
    })
    .await
    .unwrap();
    assert!(header.contains("working") && header.contains("ui test (t-ui)"), "{header}");
    let so_far = browser.text_when("#terminal", SOON, |_| true).await.unwrap();
    assert!(!so_far.contains("line 8 of t-ui"), "the first line showed only once the turn ended: {so_far}");
    // The turn's elapsed time counts from its start, kept current by the page's ticker (shown
    // on an element of its own: the turn may end before a second passes).
    assert!(time::OffsetDateTime::parse(&started, &time::format_description::well_known::Rfc3339).is_ok(), "{started}");
    let tick = "const e = document.createElement('span'); e.id = 'tick'; e.dataset.elapsed = new Date(Date.now() - 65000).toISOString(); document.body.append(e); return true;";
    browser.run(tick, json!([])).await.unwrap();
    browser.text_when("#tick", SOON, |t| t == "1 min 5 s" || t == "1 min 6 s").await.unwrap();
    browser.screenshot(&screenshot_path("agent")).await.unwrap();

    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors while driving the pages");

    // The browser's connection is cut mid-turn; it reconnects by itself and resumes.
    stack.proxy.cut();
    wait_until("the browser's connections cut", SOON, || async { (stack.proxy.live_connections() == 0).then_some(()) })
        .await
        .unwrap();
    // The turn writes on while the browser is cut off: the terminal must catch up on that.
    let at_cut = stack.swarm.last_terminal_sequence("bee").await;
    wait_until("output written while cut off", SOON, || async {
        (stack.swarm.last_terminal_sequence("bee").await > at_cut).then_some(())
    })
    .await
    .unwrap();
    stack.proxy.pass();
    let text = browser.text_when("#terminal", SOON, |t| t.contains("line 8 of t-ui")).await.unwrap();
    for i in 1..=8 {
        let line = format!("line {i} of t-ui");
        assert_eq!(text.matches(&line).count(), 1, "{line:?} missed or doubled: {text}");
    }
    browser.text_when("#turn-header", SOON, |t| t.contains("idle")).await.unwrap();
    // What the cut made: the streams it ended and the requests it refused, nothing else.
    let cut_made = ["ERR_INCOMPLETE_CHUNKED_ENCODING", "ERR_SOCKET_NOT_CONNECTED", "ERR_CONNECTION_"];
    let errors: Vec<String> = browser
        .console_errors()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| !cut_made.iter().any(|c| e.contains(c)))
        .collect();
    assert_eq!(errors, Vec::<String>::new(), "console errors around the cut");

    // A prompt typed into the agent page runs, and its turn is listed with its result; a second
    // one, shown by who asked, is cancelled from the page while it runs.
    browser.type_into("#prompt-form textarea[name=body]", "a prompt from the agent page", SOON).await.unwrap();
    browser.click("#prompt-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#prompt-form output", SOON, |t| t.starts_with("queued prompt-")).await.unwrap();
    wait_until("the page's prompt ran", SOON, || async {
        stack.swarm.turns("bee").contains("a prompt from the agent page").then_some(())
    })
    .await
    .unwrap();
    browser.text_when("#turns", SOON, |t| t.contains("operator:") && t.contains("succeeded")).await.unwrap();
    browser.type_into("#prompt-form textarea[name=body]", "a prompt to cancel", SOON).await.unwrap();
    browser.click("#prompt-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#terminal", SOON, |t| t.matches("line 1 of prompt-").count() == 2).await.unwrap();
    browser.text_when("#turn-header", SOON, |t| t.contains("working") && t.contains("operator:")).await.unwrap();
    // A third prompt waits in the queue behind the running turn, and is removed from it.
    browser.type_into("#prompt-form textarea[name=body]", "a prompt to remove", SOON).await.unwrap();
    browser.click("#prompt-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#queue", SOON, |t| t.contains("waiting") && t.contains("a prompt to remove")).await.unwrap();
    browser.click("#queue button.danger", SOON).await.unwrap();
    browser.text_when("#queue", SOON, |t| !t.contains("a prompt to remove")).await.unwrap();
    browser.click("#cancel-turn", SOON).await.unwrap();
    browser.text_when("#turns", SOON, |t| t.contains("cancelled")).await.unwrap();
    assert!(!stack.swarm.turns("bee").contains("a prompt to remove"), "the removed prompt never ran");
    // Each turn began under a separator naming who asked.
    let separators =
        eval(&browser, "[...document.querySelectorAll('#terminal .turn-separator')].map((s) => s.textContent)").await;
    let separators: Vec<String> = serde_json::from_value(separators).unwrap();
    assert!(separators.len() >= 2 && separators.iter().any(|s| s.contains("operator:")), "{separators:?}");
    assert_eq!(eval(&browser, "turnSource('schedule:s1', {s1: 'nightly'})").await, json!("schedule nightly"));
    // Follow can be stopped and started again; the terminal downloads as text.
    browser.click("#follow", SOON).await.unwrap();
    assert_eq!(
        eval(
            &browser,
            "[document.getElementById('follow').textContent, document.getElementById('terminal').dataset.follow]"
        )
        .await,
        json!(["Follow", "off"])
    );
    browser.click("#follow", SOON).await.unwrap();
    assert_eq!(eval(&browser, "document.getElementById('terminal').dataset.follow").await, json!("on"));
    browser.click("#download", SOON).await.unwrap();
    assert!(eval(&browser, "document.getElementById('download').href").await.as_str().unwrap().starts_with("blob:"));
    browser.screenshot(&screenshot_path("agent-turns")).await.unwrap();
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors after the cut");

    // The hive stops reporting (hive-c0re killed, its agents with it): once its last status is
    // older than 45 s, the overview counts it stale (and bee's last turn, the cancelled one) and
    // the agents list shows bee as of that report, found by the `stale` filter.
    stack.swarm.hive.kill();
    show(&stack, &browser, "overview").await;
    count_on(&browser, "last-turns", "cancelled", SOON, "1").await;
    count_on(&browser, "hives-fresh", "stale", Duration::from_secs(90), "1").await;
    show(&stack, &browser, "agents").await;
    browser.run(&set("#agent-state", "stale"), json!([])).await.unwrap();
    let row = browser.text_when("#agent-list", SOON, |t| t.contains("bee")).await.unwrap();
    assert!(row.contains("hive not reporting") && row.contains(" s ago"), "{row}");
    show(&stack, &browser, "agents/bee").await;
    let states = browser.text_when("#agent-states", SOON, |t| t.contains("not reporting")).await.unwrap();
    assert!(states.contains("as of"), "{states}");
    // Pages left, streams closed by the browser or cut by the proxy: nothing the controller
    // should call an error of its own.
    let log = stack.swarm.controller.log();
    let logged: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert_eq!(logged, Vec::<&str>::new(), "the controller logged errors while the browser drove it");
    drop(stack.swarm.nats);
}

/// The real case for Retry: the SSO bridge is unreachable when an agent is created (a proxy in
/// front of it closes every connection), so its `sso` job fails (one attempt allowed here) and
/// blocks the rest; the bridge is reachable again, the operator clicks Retry on the jobs page, and
/// the job and those it blocked run to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failed_while_its_system_was_down_succeeds_when_retried_from_the_jobs_page() {
    let bridge = AutheliaBridge::from_workspace().unwrap().start().await.unwrap();
    let link = ChaosProxy::start(([127, 0, 0, 1], bridge.port()).into()).await.unwrap();
    link.cut();
    let (url, token_file) = (format!("http://127.0.0.1:{}", link.port()), bridge.dir().join("token"));
    let env = [
        ("SWARM_SSO_BRIDGE_URL", url.as_str()),
        ("SWARM_SSO_BRIDGE_TOKEN_FILE", token_file.to_str().unwrap()),
        ("SWARM_JOBQ_MAX_ATTEMPTS", "1"),
    ];
    let stack = Stack::start(&env).await;
    let create = json!({"name": "gamma", "hive": "h1", "spec": {"turn_command": "cat"}});
    let request = hyper::Request::builder()
        .method("POST")
        .uri("/api/agents")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(create.to_string())))
        .unwrap();
    let (status, body) = swarmctl::client::send(&stack.swarm.socket, request).await.unwrap();
    assert_eq!(status, hyper::StatusCode::ACCEPTED, "{}", String::from_utf8_lossy(&body));
    let job_state = |graph: &Value, id: &str| {
        graph["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == id)).map(|n| n["state"].clone())
    };
    wait_until("gamma.sso to fail with the bridge down", SOON, || async {
        let graph = api_get(&stack, "/api/jobq/graph?agent=gamma").await;
        (job_state(&graph, "gamma.sso")? == "failed" && job_state(&graph, "gamma.deploy")? == "blocked").then_some(())
    })
    .await
    .unwrap();

    let browser = Browser::start().await.unwrap();
    show(&stack, &browser, "jobs").await;
    let retry = r#"button.retry[data-job="gamma.sso"]"#;
    browser.find(retry, SOON).await.unwrap();
    link.pass();
    browser.click(retry, SOON).await.unwrap();
    let finished = wait_until("gamma's jobs to run to the end after the retry", Duration::from_secs(60), || async {
        let graph = api_get(&stack, "/api/jobq/graph?agent=gamma").await;
        (job_state(&graph, "gamma.sso")? == "succeeded" && job_state(&graph, "gamma.deploy")? == "succeeded")
            .then_some(())
    })
    .await;
    if let Err(err) = finished {
        // Which job stopped, and whether the click's retry reached the controller at all.
        let graph = api_get(&stack, "/api/jobq/graph?agent=gamma").await;
        let audit = api_get(&stack, "/api/audit").await;
        panic!("{err}\ngamma's jobs: {}\naudit: {}", graph["nodes"], audit["entries"]);
    }
    browser.text_when(r#"g[data-job="gamma.sso"]"#, SOON, |t| t.contains("succeeded")).await.unwrap();
    let users = std::fs::read_to_string(bridge.users_file()).unwrap();
    assert!(users.contains("gamma"), "the retried job made gamma's SSO user: {users}");
    let audit = api_get(&stack, "/api/audit").await;
    let retried = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["method"] == "POST" && e["path"] == "/api/jobq/jobs/gamma.sso/retry" && e["status"] == 202);
    assert!(retried, "the retry is in the audit log: {audit}");
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new());

    // An agent that does not exist has no page: its one-agent read is a 404, the only error the
    // browser logs (an agent's page reads only that agent).
    browser.open(&stack.url("agents/nobody")).await.unwrap();
    browser.text_when("main p.empty", SOON, |t| t.contains("There is no agent nobody.")).await.unwrap();
    let errors = browser.console_errors().await.unwrap();
    assert!(errors.len() == 1 && errors[0].contains("/api/agents/nobody") && errors[0].contains("404"), "{errors:?}");
}
