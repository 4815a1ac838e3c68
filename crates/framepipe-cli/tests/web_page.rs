//! The control page as a performer uses it (issue #22, items 1 and 7), in a real headless
//! Chromium driving the real binary:
//!
//! * with a token (`--web-token T`, and `--web 0.0.0.0:0`, which generates one: the tablet at
//!   front of house), the page opened at the printed URL loads its style and script, connects,
//!   shows the show's values, and a change made on it reaches the show; without the token it is
//!   refused;
//! * at 390x844 with touch, 1024x768 and 1440x900, in both views (perform, engineer): no two
//!   visible controls overlap, no sideways scroll, every control can be scrolled to and hit;
//!   screenshots are written to the test's directory (`FP_KEEP_TMP=1` keeps them); stop asks
//!   first; an oscillator's text is not rewritten while it is being edited, a new spec is sent
//!   from it and a bad one shows the server's reason; a `mix` shows the rows its mode uses;
//!   advanced properties are folded; read-only properties (`live: false`) have no control;
//!   a pinned parameter is in the perform view, kept over a reload; after the server closes the
//!   page's socket the page says so, connects again by itself and shows a value changed
//!   meanwhile.

mod browser;
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use browser::{cdp, Fp};
use common::tmpdir;
use serde_json::{json, Value};

/// Two sources crossfaded by `m`, then `s` stamps its value, `o` an oscillating one, a frei0r
/// effect (advanced properties: `isolate`, `on-crash`, `stall-ms`), out to a raw file. Small
/// frames: the page, not the pixels, is under test.
fn show(out: &Path) -> String {
    format!(
        "testsrc width=64 height=32 frames=100000 pattern=solid color=0,0,0 ! m.  \
         testsrc width=64 height=32 frames=100000 pattern=bars ! m.  \
         mix name=m mode=crossfade fader=0 ! \
         stamp name=s what=value value=1 decimals=0 x=0 y=0 scale=2 background=false ! \
         stamp name=o what=value value=~sine:1hz:0..90 decimals=0 x=44 y=0 scale=1 background=false ! \
         frei0r-brightness name=br ! \
         rawsink location={}",
        out.display()
    )
}

/// The page is up: styled by its stylesheet, its script running, connected, values in.
const READY: &str = "!!(window.fp && fp.graph && fp.stats && fp.ws && fp.ws.readyState === 1 \
    && document.getElementById('conn').textContent === 'connected' \
    && getComputedStyle(document.body).backgroundColor === 'rgb(22, 24, 28)' \
    && document.getElementById('val:s.value') && document.getElementById('val:s.value').textContent !== '')";

/// Opens `url`, waits until the page is up, types `value` into `s.value`'s box and waits for
/// the engine's reply and the engine's own value on the page.
fn drive(b: &mut cdp::Browser, url: &str, value: u32) {
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_for(READY, Duration::from_secs(15));
    b.eval(
        "(() => { const e = document.getElementById('num:s.value'); e.focus(); e.select(); })()",
    );
    b.call("Input.insertText", json!({ "text": value.to_string() }));
    b.key("Enter", "Enter", 13, Some("\r"));
    b.eval("document.activeElement.blur()");
    b.wait_for(
        &format!(
            "[...document.querySelectorAll('#log li.mine')].some(l => /^ok 'set s\\.value {value}'/.test(l.textContent)) \
             && document.getElementById('val:s.value').textContent === '{value}'"
        ),
        Duration::from_secs(10),
    );
    // The cookie that carried the token to the assets is not the page's to read.
    assert_eq!(
        b.eval("document.cookie"),
        json!(""),
        "the token cookie is HttpOnly"
    );
}

/// The page at `url` without the token, in a browser that forgot its cookies: refused.
fn refused_without_token(b: &mut cdp::Browser, url: &str) {
    b.call("Network.clearBrowserCookies", json!({}));
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_for(
        "document.readyState === 'complete' && /a token is required/.test(document.body.innerText)",
        Duration::from_secs(10),
    );
    assert_eq!(b.eval("typeof window.fp"), json!("undefined"));
}

/// Issue #22 item 1: the one setup that needs a token, a tablet at front of house, works.
#[test]
fn a_page_opened_with_its_token_loads_styled_connects_and_drives_the_show() {
    let Some(exe) = cdp::chromium() else {
        println!("SKIPPED: chromium is not installed (scripts/install-deps installs it)");
        return;
    };
    let dir = tmpdir("web-page-token");
    let mut given = Fp::start(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--web",
        "127.0.0.1:0",
        "--web-token",
        "s3cret-T0ken",
        &show(&dir.join("given.raw")),
    ]);
    assert!(given.url.ends_with("?token=s3cret-T0ken"), "{}", given.url);
    let mut b = cdp::Browser::start(&exe);
    drive(&mut b, &given.url, 7);
    let bare = format!("http://{}/", given.authority());
    refused_without_token(&mut b, &bare);

    // Off loopback, the generated token, reached through 127.0.0.1 as a tablet reaches the
    // machine's address.
    let mut generated = Fp::start(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--web",
        "0.0.0.0:0",
        &show(&dir.join("generated.raw")),
    ]);
    let token = generated.token().expect("a generated token in the URL");
    let port = generated.port();
    drive(
        &mut b,
        &format!("http://127.0.0.1:{port}/?token={token}"),
        5,
    );
    // Both servers' pages in one browser: each keeps its own cookie (per port).
    b.call("Page.navigate", json!({ "url": given.url }));
    b.wait_for(READY, Duration::from_secs(15));
    refused_without_token(&mut b, &format!("http://127.0.0.1:{port}/"));

    for fp in [&mut given, &mut generated] {
        let mut ws = tungstenite::connect(format!(
            "ws://{}/ws?token={}",
            fp.authority().replace("0.0.0.0", "127.0.0.1"),
            fp.token().unwrap()
        ))
        .expect("the WebSocket with the token")
        .0;
        ws.send(tungstenite::Message::Text(
            json!({"id": 1, "cmd": "stop"}).to_string().into(),
        ))
        .unwrap();
        assert!(fp.wait_exit(Duration::from_secs(10)));
    }
    let said = format!(
        "{}{}",
        given.stderr.lock().unwrap(),
        generated.stderr.lock().unwrap()
    );
    assert_eq!(
        said.matches("s3cret-T0ken").count(),
        1,
        "the given token is printed once, in the URL, never logged again: {said}"
    );
}

/// Visible interactive elements whose boxes overlap (page coordinates), by name.
const OVERLAPS: &str = r#"(() => {
  const name = (e) => e.id || (e.tagName + ':' + (e.textContent || '').trim().slice(0, 20));
  const vis = [...document.querySelectorAll('button, input, select, textarea, a[href], summary')].filter((e) => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
  });
  const rs = vis.map((e) => { const r = e.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]; });
  const bad = [];
  for (let i = 0; i < vis.length; i++) for (let j = i + 1; j < vis.length; j++) {
    const a = rs[i], b = rs[j];
    if (Math.min(a[2], b[2]) - Math.max(a[0], b[0]) > 0.5 && Math.min(a[3], b[3]) - Math.max(a[1], b[1]) > 0.5) bad.push(name(vis[i]) + ' / ' + name(vis[j]));
  }
  return { count: vis.length, bad };
})()"#;

/// Visible interactive elements that cannot be scrolled to and hit at their centre.
const UNREACHABLE: &str = r#"(() => {
  const name = (e) => e ? (e.id || (e.tagName + ':' + (e.textContent || '').trim().slice(0, 20))) : 'nothing';
  const vis = [...document.querySelectorAll('button, input, select, textarea, a[href], summary')].filter((e) => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
  });
  const bad = [];
  for (const e of vis) {
    e.scrollIntoView({ block: 'center', inline: 'center' });
    const r = e.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) { bad.push(name(e) + ' off screen'); continue; }
    const hit = document.elementFromPoint(x, y);
    if (!(hit === e || e.contains(hit))) bad.push(name(e) + ' under ' + name(hit));
  }
  scrollTo(0, 0);
  return bad;
})()"#;

/// Writes the whole page as a PNG into `dir`.
fn screenshot(b: &mut cdp::Browser, dir: &Path, name: &str) {
    let size =
        b.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]");
    let shot = b.call(
        "Page.captureScreenshot",
        json!({ "format": "png", "captureBeyondViewport": true,
                "clip": { "x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1 } }),
    );
    let png = cdp::base64(shot["data"].as_str().unwrap());
    assert!(png.len() > 1000, "an empty screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// The layout checks of the current view: fits the width, nothing overlaps, all reachable.
fn check_layout(b: &mut cdp::Browser, dir: &Path, name: &str, width: u32) {
    // Every folded section open: what it holds must fit too.
    b.eval("document.querySelectorAll('details').forEach((d) => d.open = true)");
    // A phone's browser widens its layout viewport to content that overflows: `innerWidth`
    // alone would follow the page, so the screen's width bounds it too.
    let widths = b.eval("[document.documentElement.scrollWidth, innerWidth]");
    let page = widths[0].as_f64().unwrap();
    assert!(
        page <= widths[1].as_f64().unwrap() && page <= f64::from(width),
        "{name}: sideways scroll: page {page} wide, innerWidth {}, screen {width}",
        widths[1]
    );
    let o = b.eval(OVERLAPS);
    assert!(
        o["count"].as_u64().unwrap() > 5,
        "{name}: too few controls seen: {o}"
    );
    assert_eq!(o["bad"], json!([]), "{name}: overlapping controls");
    assert_eq!(
        b.eval(UNREACHABLE),
        json!([]),
        "{name}: unreachable controls"
    );
    screenshot(b, dir, name);
    b.eval("document.querySelectorAll('details').forEach((d) => d.open = false)");
}

/// `mobile`: a phone's viewport (Chromium's mobile emulation); `touch`: a touch screen.
fn layout_at(width: u32, height: u32, mobile: bool, touch: bool) {
    let Some(exe) = cdp::chromium() else {
        println!("SKIPPED: chromium is not installed (scripts/install-deps installs it)");
        return;
    };
    let label = format!("{width}x{height}");
    let dir = tmpdir(&format!("web-page-{label}"));
    let mut fp = Fp::start(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--web",
        "127.0.0.1:0",
        &show(&dir.join("out.raw")),
    ]);
    let mut b = cdp::Browser::start(&exe);
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
    );
    if touch {
        b.call(
            "Emulation.setTouchEmulationEnabled",
            json!({ "enabled": true, "maxTouchPoints": 5 }),
        );
    }
    b.call("Page.navigate", json!({ "url": fp.url }));
    b.wait_for(READY, Duration::from_secs(15));
    // A phone starts in the perform view, a larger screen in the engineer's.
    assert_eq!(
        b.eval("fp.view"),
        json!(if width <= 700 { "perform" } else { "engineer" })
    );

    // The engineer view: every node and property.
    b.click("view-engineer");
    b.wait_for("fp.view === 'engineer'", Duration::from_secs(2));
    // Advanced properties folded away; read-only ones have no control that posts (every node's
    // but the preview's own tap, which gets no panel at all).
    assert_eq!(
        b.eval(
            "(() => { const r = document.getElementById('row:br.isolate'); return !!r && !!r.closest('details.advanced') && !r.closest('details').open; })()"
        ),
        json!(true),
        "isolate is folded under advanced"
    );
    let fixed = b.eval(
        "fp.graph.nodes.flatMap((n) => n.props.filter((p) => p.live === false).map((p) => n.name + '.' + p.name))",
    );
    let with_control = b.eval(
        "fp.graph.nodes.filter((n) => n.name !== fp.graph.preview_tap) \
         .flatMap((n) => n.props.filter((p) => p.live === false).map((p) => n.name + '.' + p.name)) \
         .filter((k) => { const r = document.getElementById('row:' + k); return !r || r.querySelector('input, select, button'); })",
    );
    assert_eq!(
        with_control,
        json!([]),
        "read-only properties {fixed} must show no control"
    );
    println!("{label}: read-only properties in the graph: {fixed}");
    // A server that says which properties are live says `isolate` is not (docs/ISOLATION.md:
    // it is read when the node starts); one that does not, says nothing read-only.
    if b.eval("fp.graph.nodes.some((n) => n.props.some((p) => 'live' in p))") == json!(true) {
        assert!(
            fixed.as_array().unwrap().contains(&json!("br.isolate")),
            "{fixed}"
        );
        assert_eq!(
            b.eval("document.getElementById('row:br.isolate').classList.contains('readonly')"),
            json!(true)
        );
    } else {
        assert_eq!(fixed, json!([]));
    }
    // The mix shows the rows its mode uses: crossfade → its fader, no layer rows.
    let mix_rows = "['m.fader', 'm.opacity-1', 'm.blend-1', 'm.opacity-2'].map((k) => !document.getElementById('row:' + k).hidden)";
    assert_eq!(b.eval(mix_rows), json!([true, false, false, false]));
    check_layout(&mut b, dir.path(), &format!("{label}-engineer"), width);

    // The oscillator's text is not rewritten while it is being edited (values come ~15 times
    // a second, and `o.value` moves).
    b.eval("(() => { const t = document.getElementById('osc:o.value'); t.scrollIntoView({block: 'center'}); t.focus(); t.setSelectionRange(t.value.length, t.value.length); })()");
    assert!(
        b.eval("document.getElementById('osc:o.value').value")
            .as_str()
            .unwrap()
            .starts_with("~sine:"),
        "the box starts from the running oscillator"
    );
    b.call("Input.insertText", json!({ "text": "xyz" }));
    let typed = b.eval("document.getElementById('osc:o.value').value");
    let frames = b.eval("fp.frame").as_u64().unwrap();
    b.wait_for(&format!("fp.frame > {frames} + 10"), Duration::from_secs(5));
    assert_eq!(
        b.eval("document.getElementById('osc:o.value').value"),
        typed,
        "the box was rewritten under the typing"
    );
    // A bad spec: the server's reason next to the field; the oscillator runs on.
    b.eval("(() => { const t = document.getElementById('osc:o.value'); t.select(); })()");
    b.call("Input.insertText", json!({ "text": "~wobble:1hz:0..9" }));
    b.key("Enter", "Enter", 13, Some("\r"));
    b.wait_for(
        "/wobble/.test(document.getElementById('err:o.value').textContent)",
        Duration::from_secs(5),
    );
    // A new spec from the box (edited, not a default sine): the show runs it.
    b.eval("(() => { const t = document.getElementById('osc:o.value'); t.select(); })()");
    b.call("Input.insertText", json!({ "text": "~triangle:2hz:0..50" }));
    b.click("osc-attach:o.value");
    b.eval("document.activeElement.blur()");
    b.wait_for(
        "/^~triangle:2hz:0\\.\\.50/.test(fp.osc[fp.graph.nodes.findIndex((n) => n.name === 'o')][fp.graph.nodes.find((n) => n.name === 'o').props.findIndex((p) => p.name === 'value')]) \
         && document.getElementById('err:o.value').textContent === ''",
        Duration::from_secs(5),
    );
    b.wait_for(
        "/^~triangle/.test(document.getElementById('osc:o.value').value)",
        Duration::from_secs(5),
    );

    // The mix in layers mode: its fader row goes, its one layer's rows come.
    b.eval("(() => { const s = document.getElementById('ctl:m.mode'); s.value = 'layers'; s.dispatchEvent(new Event('change')); })()");
    b.wait_for(
        &format!("JSON.stringify({mix_rows}) === '[false,true,true,false]'"),
        Duration::from_secs(5),
    );
    b.eval("(() => { const s = document.getElementById('ctl:m.mode'); s.value = 'crossfade'; s.dispatchEvent(new Event('change')); })()");
    b.wait_for(
        &format!("JSON.stringify({mix_rows}) === '[true,false,false,false]'"),
        Duration::from_secs(5),
    );

    // Pin `s.scale` and `s.value`: they show in the perform view, and stay after a reload.
    b.click("pin:s.value");
    b.click("pin:s.scale");
    b.call("Page.navigate", json!({ "url": fp.url }));
    b.wait_for(READY, Duration::from_secs(15));
    b.click("view-perform");
    b.wait_for("fp.view === 'perform'", Duration::from_secs(2));
    b.wait_for(
        "!!document.getElementById('pin-row:s.value') && !!document.getElementById('pin-row:s.scale') \
         && document.getElementById('pin-val:s.value').textContent !== ''",
        Duration::from_secs(5),
    );
    // A pinned control drives the show.
    b.eval("(() => { const e = document.getElementById('pin-num:s.value'); e.focus(); e.select(); })()");
    b.call("Input.insertText", json!({ "text": "4" }));
    b.key("Enter", "Enter", 13, Some("\r"));
    b.eval("document.activeElement.blur()");
    b.wait_for(
        "document.getElementById('val:s.value').textContent === '4'",
        Duration::from_secs(5),
    );
    assert_eq!(
        b.eval("!document.getElementById('faders-card').hidden && !!document.getElementById('pin-ctl:m.fader')"),
        json!(true),
        "the mix's fader is on the perform view"
    );
    check_layout(&mut b, dir.path(), &format!("{label}-perform"), width);

    // Stop asks first: one click does not end the show.
    let frames = b.eval("fp.stats.frames").as_u64().unwrap();
    b.click("btn-stop");
    assert_eq!(
        b.eval("!document.getElementById('stop-confirm').hidden && document.getElementById('btn-stop').hidden"),
        json!(true)
    );
    b.wait_for(
        &format!("fp.stats.frames > {frames} + 15"),
        Duration::from_secs(5),
    );
    assert!(
        fp.child.try_wait().unwrap().is_none(),
        "one click stopped the show"
    );
    b.click("btn-stop-cancel");
    assert_eq!(
        b.eval("document.getElementById('stop-confirm').hidden && !document.getElementById('btn-stop').hidden"),
        json!(true)
    );

    // The server closes the page's socket (a message over its limit): the page says so, tries
    // again by itself (here while the network is down, so it backs off), and once back shows
    // the value another surface set meanwhile.
    b.call("Network.enable", json!({}));
    b.call(
        "Network.emulateNetworkConditions",
        json!({ "offline": true, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 }),
    );
    b.eval("fp.ws.send('x'.repeat(5000))");
    b.wait_for(
        "/^(disconnected|reconnecting)/.test(document.getElementById('conn').textContent)",
        Duration::from_secs(5),
    );
    let mut other = tungstenite::connect(format!("ws://{}/ws", fp.authority()))
        .expect("a second surface")
        .0;
    other
        .send(tungstenite::Message::Text(
            json!({"id": 1, "cmd": "set s.value 9"}).to_string().into(),
        ))
        .unwrap();
    let start = Instant::now();
    loop {
        let m: Value = match other.read().unwrap() {
            tungstenite::Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
            _ => continue,
        };
        if m["type"] == "reply" && m["id"] == 1 {
            assert_eq!(m["ok"], true, "{m}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no reply");
    }
    let conn = b.eval("document.getElementById('conn').textContent");
    assert!(
        conn.as_str().unwrap().starts_with("disconnected")
            || conn.as_str().unwrap().starts_with("reconnecting"),
        "the page got back while offline: {conn}"
    );
    b.wait_for(
        "/try [2-9]/.test(document.getElementById('conn').textContent)",
        Duration::from_secs(5),
    );
    b.call(
        "Network.emulateNetworkConditions",
        json!({ "offline": false, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 }),
    );
    b.wait_for(
        "document.getElementById('conn').textContent === 'connected' && fp.connects === 2 \
         && document.getElementById('val:s.value').textContent === '9' \
         && document.getElementById('pin-val:s.value').textContent === '9'",
        Duration::from_secs(15),
    );

    // Stop, confirmed: the show ends.
    b.click("btn-stop");
    b.click("btn-stop-confirm");
    assert!(
        fp.wait_exit(Duration::from_secs(10)),
        "{}",
        fp.stderr.lock().unwrap()
    );
}

#[test]
fn the_page_works_on_a_phone_with_touch_at_390x844() {
    layout_at(390, 844, true, true);
}

#[test]
fn the_page_works_on_a_touch_tablet_at_1024x768() {
    layout_at(1024, 768, false, true);
}

#[test]
fn the_page_works_on_a_desktop_at_1440x900() {
    layout_at(1440, 900, false, false);
}
