//! A real browser for the dashboard tests: Debian's headless Chromium, driven over WebDriver
//! (`/usr/bin/chromedriver`, spawned here on a free loopback port). The few WebDriver commands
//! the tests send (a session, a page, a script, a screenshot) are plain JSON over HTTP, written
//! here with reqwest: a WebDriver client crate would bring its own dependency tree, and features
//! of shared crates the gateway's build does not have, so `cargo test` would rebuild them.
//!
//! Where the browser is missing the test fails, naming the packages and the script that
//! installs them: a browser test that skips itself silently would let the dashboard break
//! unseen.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long the page may take to show what a test waits for.
pub(crate) const PAGE_DEADLINE: Duration = Duration::from_secs(20);
/// Between two looks at the page.
const POLL: Duration = Duration::from_millis(50);

/// A browser session and the driver process behind it (killed on drop).
pub(crate) struct Browser {
    http: reqwest::Client,
    /// The session on the driver: `http://127.0.0.1:<port>/session/<id>`.
    session: String,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Start chromedriver and a headless Chromium with a fresh profile.
    pub(crate) async fn start() -> Browser {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: the dashboard's browser tests need Debian's `chromium` and \
                 `chromium-driver` packages (package `{package}`); run `scripts/test-deps` (as \
                 root, or with sudo) to install them"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        wait_for_driver(&url).await;
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1360,900".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let http = reqwest::Client::new();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let created = command(http.post(format!("{url}/session")).json(&capabilities))
            .await
            .unwrap_or_else(|e| panic!("chromedriver starts no Chromium session: {e}"));
        let id = created["sessionId"]
            .as_str()
            .expect("a new session has an id");
        Browser {
            session: format!("{url}/session/{id}"),
            http,
            _driver: driver,
            _profile: profile,
        }
    }

    /// Open `url` in the page and wait for it to load.
    pub(crate) async fn goto(&self, url: &str) {
        let request = self.http.post(format!("{}/url", self.session));
        command(request.json(&json!({"url": url})))
            .await
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// Run `script` (a function body that `return`s) in the page.
    pub(crate) async fn js(&self, script: &str) -> Value {
        let request = self.http.post(format!("{}/execute/sync", self.session));
        command(request.json(&json!({"script": script, "args": []})))
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Wait until `script` returns something truthy (not null, false, 0, "" or []), and return
    /// it; fail with `what` and the last value seen at the deadline.
    pub(crate) async fn until(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + PAGE_DEADLINE;
        loop {
            let value = self.js(script).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(_) => true,
                Value::Bool(true) => true,
            };
            if truthy {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {what} (last: {value})"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Save a PNG of the page to `docs/<name>.png` when `BATON_SCREENSHOTS` is set (the
    /// README's pictures are made this way: `BATON_SCREENSHOTS=1 cargo test --test it dashboard::`).
    pub(crate) async fn screenshot(&self, name: &str) {
        if std::env::var_os("BATON_SCREENSHOTS").is_none() {
            return;
        }
        let request = self.http.get(format!("{}/screenshot", self.session));
        let encoded = command(request).await.expect("screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().expect("a screenshot is base64 text"))
            .expect("a screenshot is base64");
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write the screenshot");
    }

    /// End the browser session.
    pub(crate) async fn close(self) {
        let _ = command(self.http.delete(&self.session)).await;
    }
}

/// Send one WebDriver command; its result (the reply's `value`), or the driver's error.
async fn command(request: reqwest::RequestBuilder) -> Result<Value, String> {
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body["value"].clone())
    } else {
        Err(format!("{status}: {}", body["value"]))
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn wait_for_driver(url: &str) {
    let deadline = Instant::now() + PAGE_DEADLINE;
    let http = reqwest::Client::new();
    loop {
        let ready = http.get(format!("{url}/status")).send().await;
        if let Ok(response) = ready
            && let Ok(body) = response.json::<Value>().await
            && body["value"]["ready"] == true
        {
            return;
        }
        assert!(Instant::now() < deadline, "chromedriver did not start");
        tokio::time::sleep(POLL).await;
    }
}
