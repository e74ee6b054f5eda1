//! The swarm UI in a real headless Chromium, through a real nginx in front of the controller's
//! socket (and a proxy the test can cut), with real NATS, the controller, a hive-c0re and its
//! agent: the pages load without errors, pausing in the UI reaches `hive-status`, a schedule added
//! in the UI fires, a running turn's output shows in the terminal view, and a browser whose
//! connection was cut resumes the terminal with nothing missed or doubled, a prompt typed on the
//! agent page runs and is listed with its result, and a running turn is cancelled from the page.
//! Screenshots of the main
//! pages go to `target/ui-screenshots/`, or to `HYPERHIVE_SCREENSHOT_DIR` when set (a run whose
//! user cannot write the checkout's `target/`).
//!
//! Needs `cargo build -p hive-agent -p hive-c0re` and scripts/setup (chromium, chromedriver, nginx).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::one_hive::{OneHive, printing_turn};
use hyperhive_testkit::{Browser, ChaosProxy, Nginx, wait_until, workspace_root};
use serde_json::json;

const SOON: Duration = Duration::from_secs(30);

/// The swarm (bee prints eight numbered lines, 0.4 s apart, per turn), nginx in front of its
/// socket and a proxy the test can cut in front of nginx.
struct Stack {
    swarm: OneHive,
    _nginx: Nginx,
    proxy: ChaosProxy,
}

impl Stack {
    async fn start() -> Stack {
        let swarm = OneHive::start(&["bee"], |turns| printing_turn(turns, 8, "0.4"), &[]).await;
        let nginx = Nginx::in_front_of(&swarm.socket).await.unwrap();
        let proxy = ChaosProxy::start(([127, 0, 0, 1], nginx.port()).into()).await.unwrap();
        Stack { swarm, _nginx: nginx, proxy }
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

/// Console errors other than the failed loads of the routes a controller without a forge or a
/// secret store answers with 404 or 503 (the page says what is not there; Chromium logs the load).
async fn page_errors(browser: &Browser) -> Vec<String> {
    let optional = ["linked-accounts", "config-pr", "config-prs", "/api/issues"];
    let errors = browser.console_errors().await.unwrap();
    errors
        .into_iter()
        .filter(|e| !(e.contains("Failed to load resource") && optional.iter().any(|o| e.contains(o))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_drives_the_swarm_in_a_real_browser() {
    let stack = Stack::start().await;
    let browser = Browser::start().await.unwrap();

    // Agents: bee listed, running.
    browser.open(&stack.url("agents")).await.unwrap();
    browser.text_when("main", SOON, |t| t.contains("bee") && t.contains("running")).await.unwrap();
    browser.screenshot(&screenshot_path("agents")).await.unwrap();
    for route in ["hives", "jobs", "schedules", "config-prs", "issues", "links", "create"] {
        browser.open(&stack.url(route)).await.unwrap();
        browser.text_when("main h1", SOON, |t| !t.is_empty() && t != "Unavailable").await.unwrap();
        if route == "hives" {
            browser.text_when("main", SOON, |t| t.contains("h1") && t.contains("fresh")).await.unwrap();
            browser.screenshot(&screenshot_path("hives")).await.unwrap();
        }
    }
    assert_eq!(page_errors(&browser).await, Vec::<String>::new(), "console errors while loading the pages");

    // Pause in the UI: the hive reports bee paused; then up again.
    browser.open(&stack.url("agents")).await.unwrap();
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

    // A schedule added in the UI (once, five seconds from now) fires.
    browser.open(&stack.url("schedules")).await.unwrap();
    browser.type_into(r#"#schedule-form input[name="name"]"#, "from-the-ui", SOON).await.unwrap();
    browser.type_into(r#"#schedule-form input[name="agents"]"#, "bee", SOON).await.unwrap();
    browser.type_into(r#"#schedule-form textarea[name="body"]"#, "a prompt typed in the UI", SOON).await.unwrap();
    browser.click("#schedule-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("main table", SOON, |t| t.contains("from-the-ui")).await.unwrap();
    browser.screenshot(&screenshot_path("schedules")).await.unwrap();
    wait_until("the UI's schedule fired", SOON, || async {
        stack.swarm.turns("bee").contains("a prompt typed in the UI").then_some(())
    })
    .await
    .unwrap();

    // Creating an agent on a controller without a secret store: the page says why, with the
    // API's own words, and nothing is created.
    browser.open(&stack.url("create")).await.unwrap();
    browser.type_into(r#"#create-form input[name="name"]"#, "gamma", SOON).await.unwrap();
    browser.type_into(r#"#create-form input[name="turn_command"]"#, "cat", SOON).await.unwrap();
    browser.click("#create-form button[type=submit]", SOON).await.unwrap();
    browser.text_when("#banner", SOON, |t| t.contains("SWARM_SECRETS_KEY_FILE")).await.unwrap();

    // The terminal view shows a running turn's output as it comes.
    browser.open(&stack.url("agents/bee")).await.unwrap();
    browser.find("#terminal", SOON).await.unwrap();
    let todo = json!({"id": "t-ui", "source": "ui test", "body": "watch me"}).to_string();
    stack.swarm.js.publish("todo.bee", todo.into()).await.unwrap().await.unwrap();
    browser.text_when("#terminal", SOON, |t| t.contains("line 1 of t-ui")).await.unwrap();
    let header = browser.text_when("#turn-header", SOON, |t| t.contains("working")).await.unwrap();
    assert!(header.contains("t-ui"), "{header}");
    let so_far = browser.text_when("#terminal", SOON, |_| true).await.unwrap();
    assert!(!so_far.contains("line 8 of t-ui"), "the first line showed only once the turn ended: {so_far}");
    browser.screenshot(&screenshot_path("agent")).await.unwrap();

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

    // A prompt typed into the agent page runs, and its turn is listed with its result; a second
    // one is cancelled from the page while it runs.
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
    browser.click("#cancel-turn", SOON).await.unwrap();
    browser.text_when("#turns", SOON, |t| t.contains("cancelled")).await.unwrap();
    browser.screenshot(&screenshot_path("agent-turns")).await.unwrap();
    // What the steps above made on purpose: the refused create (503) and the streams the cut ended.
    let expected = [
        "/api/agents - Failed to load resource: the server responded with a status of 503",
        "ERR_INCOMPLETE_CHUNKED_ENCODING",
    ];
    let errors: Vec<String> =
        page_errors(&browser).await.into_iter().filter(|e| !expected.iter().any(|x| e.contains(x))).collect();
    assert_eq!(errors, Vec::<String>::new(), "console errors while driving the pages");
    // Pages left, streams closed by the browser or cut by the proxy, a refused create: nothing
    // the controller should call an error of its own.
    let log = stack.swarm.controller.log();
    let logged: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert_eq!(logged, Vec::<&str>::new(), "the controller logged errors while the browser drove it");
    drop(stack.swarm.nats);
}
