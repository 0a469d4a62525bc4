//! A small WebDriver client over the HTTP client already in the tree (ureq), driving Debian's
//! `chromium` through `chromedriver` (package `chromium-driver`), headless; and the running
//! `bx console` it talks to.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::BrokerProcess;

/// How long any wait for a page condition may take before the test fails: generous, so a
/// loaded machine is slow, never wrong.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// The WebDriver element key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running `bx console` on a broker's folders, and the login address it printed.
pub struct Console {
    child: Child,
    /// `http://ADDR/login?token=…`, as printed.
    pub login: String,
    /// `http://ADDR`.
    pub origin: String,
    /// `ADDR`.
    pub addr: String,
}

impl Console {
    /// Starts `bx console` against `broker` and reads the address it prints.
    pub fn start(broker: &BrokerProcess) -> Console {
        let mut child = Command::new(testkit::binary("bx").unwrap())
            .arg("--config-dir")
            .arg(&broker.config)
            .arg("--state-dir")
            .arg(&broker.state)
            .arg("--runtime-dir")
            .arg(&broker.runtime)
            .arg("console")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut login = String::new();
        while !login.starts_with("http://") {
            login.clear();
            assert!(
                out.read_line(&mut login).unwrap() > 0,
                "bx console printed no address"
            );
        }
        let login = login.trim().to_string();
        let rest = login.strip_prefix("http://").unwrap();
        let addr = rest.split('/').next().unwrap().to_string();
        // The rest of its output is not read; keep the pipe open by leaking the reader into a
        // thread that drains it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        Console {
            child,
            origin: format!("http://{addr}"),
            addr,
            login,
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless chromium session through its own chromedriver.
pub struct Browser {
    driver: Child,
    base: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// Starts chromedriver and a headless chromium session.
    pub fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian: apt-get install -y chromium chromium-driver)");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let profile = testkit::temp_dir();
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            agent,
            _profile: profile,
        };
        let ready = Instant::now() + DEADLINE;
        while browser
            .agent
            .get(format!("{}/status", browser.base))
            .call()
            .is_err()
        {
            assert!(Instant::now() < ready, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions",
                    format!("--user-data-dir={}", browser._profile.path().display()),
                ],
            },
        }}});
        let session = browser.raw("POST", "/session", Some(capabilities));
        let id = session["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {session}"))
            .to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let response = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            _ => self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.unwrap_or(json!({})).to_string()),
        };
        let text = response.unwrap().body_mut().read_to_string().unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let answer = self.raw(method, path, body);
        assert!(
            answer["value"].get("error").is_none(),
            "WebDriver {method} {path}: {answer}"
        );
        answer["value"].clone()
    }

    /// Opens `url`.
    pub fn go(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page: its result.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Runs `script` whose last argument is a callback: what it passed.
    pub fn run_async(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/async",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Waits until `script` returns true, failing with `what` after [`DEADLINE`].
    pub fn wait_for(&self, what: &str, script: &str, args: Value) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let answer = self.raw(
                "POST",
                "/execute/sync",
                Some(json!({ "script": script, "args": args })),
            );
            if answer["value"] == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {what}; the page text:\n{}",
                self.text("body")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first element matching `css` (its WebDriver id).
    pub fn find(&self, css: &str) -> String {
        let found = self.command(
            "POST",
            "/element",
            Some(json!({ "using": "css selector", "value": css })),
        );
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    /// Clicks the first element matching `css`.
    pub fn click(&self, css: &str) {
        let element = self.find(css);
        self.command("POST", &format!("/element/{element}/click"), None);
    }

    /// Types `text` into the first element matching `css`.
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css);
        self.command(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({ "text": text })),
        );
    }

    /// The `textContent` of the first element matching `css` ("" when there is none).
    pub fn text(&self, css: &str) -> String {
        let found = self.raw(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
                "args": [css],
            })),
        );
        found["value"].as_str().unwrap_or_default().to_string()
    }

    /// Sets the window's size in CSS pixels.
    #[allow(
        dead_code,
        reason = "used by the screenshots example, not by every test"
    )]
    pub fn resize(&self, width: u32, height: u32) {
        self.command(
            "POST",
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        );
    }

    /// The page as a PNG, as WebDriver's screenshot gives it (base64, decoded).
    #[allow(
        dead_code,
        reason = "used by the screenshots example, not by every test"
    )]
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let encoded = self.command("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("the screenshot is not base64: {e}"))
    }

    /// Opens the console's login address and waits until the inbox's live stream is connected.
    pub fn log_in(&self, console: &Console) {
        self.go(&console.login);
        self.wait_for(
            "the inbox with its live stream connected",
            "const l = document.getElementById('live'); return !!l && l.textContent === 'connected';",
            json!([]),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.agent.delete(&self.base).call();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
