//! The real binary with `--web` and a real headless Chromium, shared by the web tests
//! (`web.rs`, `web_page.rs`): [`Fp`], a `framepipe run` that prints its URL, and [`cdp`], a
//! minimal DevTools client.
//!
//! The DevTools client is a few lines over tungstenite (already needed for the WebSocket tests)
//! rather than chromiumoxide or headless_chrome: those pull an async stack or a browser
//! downloader, and these tests need a handful of CDP methods.
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{tmpdir, FP};
use serde_json::{json, Value};

/// A `framepipe run` with `--web` (stdin closed): the shared [`common::Fp`](crate::common::Fp),
/// with the URL it printed.
pub struct Fp {
    fp: crate::common::Fp,
    pub url: String,
}

impl Fp {
    /// Starts `framepipe run ARGS` and waits for the web URL it prints.
    pub fn start(args: &[&str]) -> Fp {
        let fp =
            crate::common::Fp::start(Command::new(FP).arg("run").args(args).stdin(Stdio::null()));
        let url = fp.after("web control on ");
        Fp { fp, url }
    }

    /// `host:port` of the server.
    pub fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_string()
    }

    pub fn port(&self) -> u16 {
        self.authority()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    pub fn token(&self) -> Option<String> {
        self.url.split("token=").nth(1).map(str::to_string)
    }
}

impl std::ops::Deref for Fp {
    type Target = crate::common::Fp;
    fn deref(&self) -> &Self::Target {
        &self.fp
    }
}

impl std::ops::DerefMut for Fp {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.fp
    }
}

/// A minimal Chrome DevTools Protocol client: one page, reached through the browser's
/// WebSocket with a flattened session.
pub mod cdp {
    use super::*;
    use std::os::unix::process::CommandExt;
    use tungstenite::{stream::MaybeTlsStream, Message, WebSocket};

    pub struct Browser {
        child: Child,
        ws: WebSocket<MaybeTlsStream<TcpStream>>,
        session: String,
        next: u64,
        _profile: framepipe_testkit::TestDir,
    }

    /// Debian's chromium, if installed.
    pub fn chromium() -> Option<PathBuf> {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    }

    impl Browser {
        /// Starts headless Chromium with a fresh profile and opens one blank page.
        pub fn start(exe: &Path) -> Browser {
            Browser::start_with(exe, &[])
        }

        /// [`Browser::start`] with `extra` flags after the usual ones.
        pub fn start_with(exe: &Path, extra: &[&str]) -> Browser {
            // A profile of its own: two browsers of this binary's tests may run at once.
            static BROWSERS: std::sync::atomic::AtomicUsize =
                std::sync::atomic::AtomicUsize::new(0);
            let n = BROWSERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let profile = tmpdir(&format!("web-chromium-profile-{n}"));
            // Chromium (and its helper processes) make `org.chromium.Chromium.*` directories in
            // $TMPDIR and leave some behind: give it one inside the guarded profile directory.
            let chromium_tmp = profile.join("tmp");
            std::fs::create_dir(&chromium_tmp).unwrap();
            let mut child = Command::new(exe)
                .args([
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--no-default-browser-check",
                    "--disable-extensions",
                    "--disable-background-networking",
                    "--hide-scrollbars",
                    "--window-size=1200,900",
                    "--remote-debugging-port=0",
                    "--remote-allow-origins=*",
                ])
                .args(extra)
                .arg(format!("--user-data-dir={}", profile.display()))
                .env("TMPDIR", &chromium_tmp)
                // Its own process group: dropping the browser kills its helpers too, so that
                // none writes into the profile while the guard removes it.
                .process_group(0)
                .arg("about:blank")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn chromium");
            let mut err = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            let ws_url = loop {
                line.clear();
                if err.read_line(&mut line).unwrap_or(0) == 0 {
                    let _ = child.kill();
                    panic!("chromium ended without a DevTools URL");
                }
                if let Some(u) = line.split("DevTools listening on ").nth(1) {
                    break u.trim().to_string();
                }
            };
            // Keep draining chromium's stderr so that it never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = err.read_to_end(&mut sink);
            });
            let (ws, _) = tungstenite::connect(ws_url.as_str()).expect("DevTools WebSocket");
            if let MaybeTlsStream::Plain(s) = ws.get_ref() {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            }
            let mut b = Browser {
                child,
                ws,
                session: String::new(),
                next: 0,
                _profile: profile,
            };
            let target = b.call_browser("Target.createTarget", json!({ "url": "about:blank" }));
            let target_id = target["targetId"].as_str().unwrap().to_string();
            let attached = b.call_browser(
                "Target.attachToTarget",
                json!({ "targetId": target_id, "flatten": true }),
            );
            b.session = attached["sessionId"].as_str().unwrap().to_string();
            b.call("Page.enable", json!({}));
            b
        }

        fn exchange(&mut self, msg: Value) -> Value {
            self.try_exchange(msg)
                .unwrap_or_else(|v| panic!("DevTools error: {v}"))
        }

        /// One request and its reply: `Err` holds a reply that is an error.
        fn try_exchange(&mut self, mut msg: Value) -> Result<Value, Value> {
            self.next += 1;
            let id = self.next;
            msg["id"] = json!(id);
            self.ws.send(Message::Text(msg.to_string().into())).unwrap();
            loop {
                let m = self.ws.read().expect("DevTools reply");
                let Message::Text(t) = m else { continue };
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["id"] == json!(id) {
                    if v.get("error").is_some() {
                        return Err(v);
                    }
                    return Ok(v["result"].clone());
                }
            }
        }

        fn call_browser(&mut self, method: &str, params: Value) -> Value {
            self.exchange(json!({ "method": method, "params": params }))
        }

        /// A method on the page's session.
        pub fn call(&mut self, method: &str, params: Value) -> Value {
            let s = self.session.clone();
            self.exchange(json!({ "method": method, "params": params, "sessionId": s }))
        }

        /// Evaluates `expr` in the page, returning its value.
        pub fn eval(&mut self, expr: &str) -> Value {
            let r = self.call(
                "Runtime.evaluate",
                json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
            );
            assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
            r["result"]["value"].clone()
        }

        /// Evaluates `expr` for `wait_for`: an evaluation cut short because the page navigated
        /// (a click on a link while waiting for the next page) is "not yet", not an error.
        fn poll(&mut self, expr: &str) -> Value {
            let s = self.session.clone();
            let msg = json!({ "method": "Runtime.evaluate", "sessionId": s, "params":
                { "expression": expr, "returnByValue": true, "awaitPromise": true } });
            match self.try_exchange(msg) {
                Ok(r) => {
                    assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
                    r["result"]["value"].clone()
                }
                Err(v)
                    if v.to_string()
                        .contains("Inspected target navigated or closed") =>
                {
                    Value::Null
                }
                Err(v) => panic!("DevTools error: {v}"),
            }
        }

        /// A real mouse click (pressed, released) at the centre of the element `id`.
        pub fn click(&mut self, id: &str) {
            let r = self.eval(&format!(
                "(() => {{ const e = document.getElementById({id:?}); e.scrollIntoView({{block: 'center'}}); \
                 const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
            ));
            let (x, y) = (r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
            for kind in ["mousePressed", "mouseReleased"] {
                self.call(
                    "Input.dispatchMouseEvent",
                    json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
                );
            }
        }

        /// A real key press (down, up) with its DOM key, code and Windows key code.
        pub fn key(&mut self, key: &str, code: &str, vk: u32, text: Option<&str>) {
            let mut down = json!({ "type": if text.is_some() { "keyDown" } else { "rawKeyDown" },
                "key": key, "code": code, "windowsVirtualKeyCode": vk });
            if let Some(t) = text {
                down["text"] = json!(t);
            }
            self.call("Input.dispatchKeyEvent", down);
            self.call(
                "Input.dispatchKeyEvent",
                json!({ "type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk }),
            );
        }

        /// Waits until `expr` is true in the page.
        pub fn wait_for(&mut self, expr: &str, limit: Duration) {
            let start = Instant::now();
            while self.poll(expr) != json!(true) {
                assert!(
                    start.elapsed() < limit,
                    "page: not within {limit:?}: {expr}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    impl Drop for Browser {
        fn drop(&mut self) {
            let _ = self.ws.close(None);
            // SAFETY: kill(2) on the process group we made for our own child (its id is the
            // group's, and the child is not reaped yet, so the id is not reused); no memory.
            unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Standard base64 (the screenshot's encoding).
    pub fn base64(text: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let bytes: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(val).collect();
        bytes
            .chunks(4)
            .flat_map(|c| {
                let n = c.iter().fold(0u32, |a, &b| a << 6 | b as u32) << (6 * (4 - c.len()));
                let all = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
                all[..c.len() - 1].to_vec()
            })
            .collect()
    }
}
