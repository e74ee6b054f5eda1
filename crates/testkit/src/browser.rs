//! A real headless Chromium (Debian's `chromium`), driven over WebDriver by `chromedriver`, for
//! end-to-end tests of the swarm UI: load pages, click, type, read, take screenshots and collect
//! the console's errors.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use serde_json::{Value, json};

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::{Tool, tool};
use crate::wait::wait_until;

/// The key WebDriver names an element with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The profile's directory inside the browser's own one.
const USER_DATA: &str = "user-data";

/// A browser session; the browser and its driver are stopped on drop (chromedriver's own end
/// would leave Chromium running).
///
/// Killing the browser alone leaves its helpers to notice and exit on their own, and a killed
/// process runs on for a moment: one writing its cache into the profile after the directory is
/// removed makes it again, left in the temporary directory for good. So the driver runs in a
/// process group of its own (the helpers rewrite their command lines and environments, and are
/// orphans once the browser dies, but keep the group), whose drop kills the whole group and
/// waits until none of it is alive; the profile, declared after it, goes only then.
#[derive(Debug)]
pub struct Browser {
    base: String,
    http: reqwest::Client,
    _driver: Process,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session with a fresh profile.
    ///
    /// # Errors
    /// Either is missing, or the session could not start.
    pub async fn start() -> anyhow::Result<Browser> {
        let driver = tool(Tool::Chromedriver)?;
        let chromium = tool(Tool::Chromium)?;
        let port = free_port();
        // The profile, and the temporary directory Chromium makes its singleton socket and
        // scoped directories in: killed, Chromium removes neither, so both live in one directory
        // that goes with the browser.
        let profile = tempfile::tempdir()?;
        let scratch = profile.path().join("tmp");
        std::fs::create_dir(&scratch)?;
        let user_data = profile.path().join(USER_DATA);
        let process = Process::builder(driver)
            .arg(format!("--port={port}"))
            .env("TMPDIR", &scratch)
            .own_process_group()
            .start("chromedriver")?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
        let status = format!("http://127.0.0.1:{port}/status");
        wait_until("chromedriver ready", Duration::from_secs(20), || async {
            let answer: Value = http.get(&status).send().await.ok()?.json().await.ok()?;
            answer["value"]["ready"].as_bool().filter(|ready| *ready)
        })
        .await?;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", format!("--user-data-dir={}", user_data.display())],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let answer: Value = http
            .post(format!("http://127.0.0.1:{port}/session"))
            .json(&capabilities)
            .send()
            .await?
            .json()
            .await
            .context("starting a Chromium session")?;
        let Some(session) = answer["value"]["sessionId"].as_str() else { bail!("no session: {answer}") };
        Ok(Browser {
            base: format!("http://127.0.0.1:{port}/session/{session}"),
            http,
            _driver: process,
            _profile: profile,
        })
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request.send().await?.json().await?;
        if let Some(error) = answer["value"]["error"].as_str() {
            bail!("webdriver {path}: {error}: {}", answer["value"]["message"]);
        }
        Ok(answer["value"].clone())
    }

    /// Loads `url`.
    ///
    /// # Errors
    /// The driver refused.
    pub async fn open(&self, url: &str) -> anyhow::Result<()> {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await.map(drop)
    }

    /// Resizes the window to `width` x `height` CSS pixels (a phone is 390 wide).
    ///
    /// # Errors
    /// The driver refused.
    pub async fn set_window_size(&self, width: u32, height: u32) -> anyhow::Result<()> {
        self.command(reqwest::Method::POST, "/window/rect", Some(json!({"width": width, "height": height})))
            .await
            .map(drop)
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns its value.
    ///
    /// # Errors
    /// The script threw, or the driver refused.
    pub async fn run(&self, script: &str, args: Value) -> anyhow::Result<Value> {
        self.command(reqwest::Method::POST, "/execute/sync", Some(json!({"script": script, "args": args}))).await
    }

    /// The first element matching `css`, waiting up to `patience` for it.
    ///
    /// # Errors
    /// None appeared.
    pub async fn find(&self, css: &str, patience: Duration) -> anyhow::Result<String> {
        wait_until(&format!("an element {css}"), patience, || async {
            let value = self
                .command(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css})))
                .await
                .ok()?;
            value[ELEMENT].as_str().map(str::to_owned)
        })
        .await
    }

    /// Clicks the first element matching `css` (a real click, as a person's), scrolled to the
    /// middle of the window first, as a person would: the driver scrolls it only just into view,
    /// where a sticky header can cover it.
    ///
    /// # Errors
    /// No such element, or it cannot be clicked.
    pub async fn click(&self, css: &str, patience: Duration) -> anyhow::Result<()> {
        let element = self.find(css, patience).await?;
        self.run("arguments[0].scrollIntoView({block: 'center'})", json!([{ ELEMENT: element }])).await?;
        self.command(reqwest::Method::POST, &format!("/element/{element}/click"), Some(json!({}))).await.map(drop)
    }

    /// Types `text` into the first element matching `css`.
    ///
    /// # Errors
    /// No such element.
    pub async fn type_into(&self, css: &str, text: &str, patience: Duration) -> anyhow::Result<()> {
        let element = self.find(css, patience).await?;
        self.command(reqwest::Method::POST, &format!("/element/{element}/value"), Some(json!({"text": text})))
            .await
            .map(drop)
    }

    /// The text of the first element matching `css`, once `ready` accepts it.
    ///
    /// # Errors
    /// It never did within `patience`.
    pub async fn text_when(
        &self,
        css: &str,
        patience: Duration,
        ready: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        wait_until(&format!("the text of {css}"), patience, || async {
            let text = self
                .run("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", json!([css]))
                .await
                .ok()?;
            text.as_str().filter(|t| ready(t)).map(str::to_owned)
        })
        .await
    }

    /// Accepts the next `window.prompt` with `answer` (a prompt blocks WebDriver otherwise).
    ///
    /// # Errors
    /// The script could not run.
    pub async fn answer_prompts_with(&self, answer: &str) -> anyhow::Result<()> {
        self.run("window.prompt = () => arguments[0];", json!([answer])).await.map(drop)
    }

    /// Saves a PNG of the window to `path`.
    ///
    /// # Errors
    /// The driver failed, or the file could not be written.
    pub async fn screenshot(&self, path: &Path) -> anyhow::Result<()> {
        let value = self.command(reqwest::Method::GET, "/screenshot", None).await?;
        let png = base64::engine::general_purpose::STANDARD.decode(value.as_str().unwrap_or_default())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(path, png).with_context(|| format!("writing the screenshot {}", path.display()))
    }

    /// The console's entries at level SEVERE since the last call (errors, failed loads).
    ///
    /// # Errors
    /// The driver failed.
    pub async fn console_errors(&self) -> anyhow::Result<Vec<String>> {
        let entries = self.command(reqwest::Method::POST, "/se/log", Some(json!({"type": "browser"}))).await?;
        Ok(entries
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test run used to leave a profile directory in the temporary directory: a Chromium
    /// helper still running wrote its cache index after the directory was removed. Here every
    /// process but the driver is stopped first, as helpers slow to exit on a loaded machine.
    #[tokio::test]
    async fn a_dropped_browser_leaves_no_process_and_no_profile() {
        use crate::process::group_members;
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let browser = Browser::start().await.unwrap();
        browser.open("data:text/html,<p>bees</p>").await.unwrap();
        let profile = browser._profile.path().to_owned();
        let group = browser._driver.pid();
        let running = group_members(group);
        // The driver, the browser and its helpers (zygotes, a renderer, the network service).
        assert!(running.len() > 5, "the driver's process group: {running:?}");
        for pid in running.iter().filter(|pid| **pid != group as i32) {
            kill(Pid::from_raw(*pid), Signal::SIGSTOP).unwrap();
        }
        drop(browser);
        let survivors = group_members(group);
        let _ = killpg(Pid::from_raw(group as i32), Signal::SIGKILL);
        assert_eq!(survivors, Vec::<i32>::new(), "processes of the driver's group outlived the browser");
        assert!(!profile.exists(), "the profile {} is left behind", profile.display());
    }
}
