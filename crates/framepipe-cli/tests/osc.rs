//! Issue 10, OSC (requirements 3 and 6) through the real binary: `--osc` on a real UDP socket,
//! packets made by rosc's encoder (and liblo's `oscsend` where installed), effects checked on
//! the output's pixels; garbage, huge datagrams and floods counted, never fatal.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{free_udp_port, tmpdir, wait, wait_until};
use rosc::{encoder, OscBundle, OscMessage, OscPacket, OscTime, OscType};

const W: usize = 64;
const H: usize = 32;
const FRAME: usize = W * H * 4;

/// A black 64x32 frame with a white "8" stamped at (0,0), inverted: white frame, black digit.
fn pipeline(out: &Path) -> String {
    format!(
        "testsrc width={W} height={H} frames=100000 pattern=solid color=0,0,0 ! \
         stamp what=value value=8 decimals=0 x=0 y=0 scale=2 background=false ! invert ! \
         rawsink location={}",
        out.display()
    )
}

fn msg(addr: &str, args: Vec<OscType>) -> Vec<u8> {
    encoder::encode(&OscPacket::Message(OscMessage {
        addr: addr.into(),
        args,
    }))
    .unwrap()
}

/// What a frame shows: `(inverted, leftmost column of the digit)`.
fn look(f: &[u8]) -> (bool, Option<usize>) {
    let white = f.chunks(4).filter(|p| p[..3] == [255, 255, 255]).count();
    let inverted = white > W * H / 2;
    let ink = if inverted { 0 } else { 255 };
    let left = (0..W).find(|&x| (0..H).any(|y| f[(y * W + x) * 4] == ink));
    (inverted, left)
}

/// The last whole frame written so far.
fn last_frame(path: &Path) -> Option<(bool, Option<usize>)> {
    let b = std::fs::read(path).ok()?;
    let n = b.len() / FRAME;
    (n > 0).then(|| look(&b[(n - 1) * FRAME..n * FRAME]))
}

fn start(out: &Path, port: u16) -> std::process::Child {
    common::spawn(&[
        "run",
        "--fps",
        "60",
        "--control",
        "none",
        "--osc",
        &format!("127.0.0.1:{port}"),
        &pipeline(out),
    ])
}

/// Sends `packet` until framepipe's output shows `want` (UDP may be sent before the socket is
/// bound, so the first one is repeated until seen).
fn send_until(
    sock: &UdpSocket,
    port: u16,
    packet: &[u8],
    out: &Path,
    want: (bool, Option<usize>),
) -> u32 {
    let mut sent: u32 = 0;
    wait_until(Duration::from_secs(20), &format!("{want:?}"), || {
        if last_frame(out) == Some(want) {
            return true;
        }
        // Once every 25 polls.
        if sent.is_multiple_of(25) {
            sock.send_to(packet, ("127.0.0.1", port)).unwrap();
        }
        sent += 1;
        false
    });
    sent.div_ceil(25).max(1)
}

fn counts(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .filter(|l| l.contains(" ok, "))
        .find_map(|l| l.strip_prefix("framepipe: osc: "))
        .unwrap_or_else(|| panic!("no osc counts in: {stderr}"));
    let mut it = line.split(", ");
    let num = |s: Option<&str>, what: &str| -> u64 {
        s.and_then(|s| s.strip_suffix(what))
            .unwrap_or_else(|| panic!("{line}"))
            .trim()
            .parse()
            .unwrap()
    };
    (num(it.next(), " ok"), num(it.next(), " bad"))
}

/// Checks the output frame by frame: the states come in `order`, each one at least once
/// (except those marked optional), and never go back.
fn check_sequence(out: &Path, order: &[(bool, Option<usize>)], optional: &[usize]) {
    let bytes = std::fs::read(out).unwrap();
    assert_eq!(bytes.len() % FRAME, 0, "whole frames only");
    let mut at = 0;
    let mut seen = vec![false; order.len()];
    for (i, f) in bytes.chunks(FRAME).enumerate() {
        let s = look(f);
        let k = order
            .iter()
            .position(|o| *o == s)
            .unwrap_or_else(|| panic!("frame {i}: unexpected {s:?}"));
        assert!(
            k >= at,
            "frame {i}: went back from {:?} to {s:?}",
            order[at]
        );
        at = k;
        seen[k] = true;
    }
    for k in optional {
        seen[*k] = true;
    }
    assert!(
        seen.iter().all(|s| *s),
        "states seen: {seen:?} of {order:?}"
    );
}

#[test]
fn osc_sets_a_property_scales_norm_bypasses_and_stops() {
    let dir = tmpdir("osc-set");
    let out = dir.join("out.rgba");
    let port = free_udp_port();
    let child = start(&out, port);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    wait_until(Duration::from_secs(20), "first frames", || {
        last_frame(&out) == Some((true, Some(0)))
    });
    // A value in the property's units (an int).
    send_until(
        &sock,
        port,
        &msg("/framepipe/stamp/x", vec![OscType::Int(40)]),
        &out,
        (true, Some(40)),
    );
    // /norm: x's range is -16384..16384, so 0.5 + 2^-11 is 16.
    send_until(
        &sock,
        port,
        &msg(
            "/framepipe/stamp/x/norm",
            vec![OscType::Float(0.5 + 1.0 / 2048.0)],
        ),
        &out,
        (true, Some(16)),
    );
    // A bundle: bypass the invert and move the digit back, applied in order.
    let bundle = encoder::encode(&OscPacket::Bundle(OscBundle {
        timetag: OscTime::from((0, 1)),
        content: vec![
            OscPacket::Message(OscMessage {
                addr: "/framepipe/invert/bypass".into(),
                args: vec![OscType::Bool(true)],
            }),
            OscPacket::Message(OscMessage {
                addr: "/framepipe/stamp/x".into(),
                args: vec![OscType::Float(8.0)],
            }),
        ],
    }))
    .unwrap();
    send_until(&sock, port, &bundle, &out, (false, Some(8)));
    // Stop: with liblo's oscsend where installed, else rosc.
    let oscsend = Command::new("oscsend")
        .args(["127.0.0.1", &port.to_string(), "/framepipe/stop"])
        .status()
        .is_ok_and(|s| s.success());
    if !oscsend {
        eprintln!("oscsend (liblo-tools) not found: stopping with rosc");
        sock.send_to(&msg("/framepipe/stop", vec![]), ("127.0.0.1", port))
            .unwrap();
    }
    let res = wait(child, Duration::from_secs(20), "framepipe --osc");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{stderr}");
    assert!(stderr.contains("ok 'stop'"), "{stderr}");
    let (ok, bad) = counts(&stderr);
    assert_eq!(bad, 0, "{stderr}");
    assert!(ok >= 5, "{stderr}");
    check_sequence(
        &out,
        &[
            (true, Some(0)),
            (true, Some(40)),
            (true, Some(16)),
            // A bundle lands at one frame: never (false, Some(16)) in between.
            (false, Some(8)),
        ],
        &[],
    );
}

#[test]
fn osc_garbage_huge_datagrams_and_floods_are_counted_and_the_run_goes_on() {
    let dir = tmpdir("osc-garbage");
    let out = dir.join("out.rgba");
    let port = free_udp_port();
    let child = start(&out, port);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", port);
    wait_until(Duration::from_secs(20), "first frames", || {
        last_frame(&out) == Some((true, Some(0)))
    });
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut surely_bad = 0u64;
    let mut sent = 0u64;
    // Random bytes (never starting like an address or a bundle), sent at a pace the socket
    // buffer holds.
    for i in 0..300 {
        let len = 1 + (next() % 600) as usize;
        let mut d: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        d[0] = b'A' + (d[0] % 26);
        sock.send_to(&d, to).unwrap();
        surely_bad += 1;
        sent += 1;
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // Every strict prefix of a valid message (refused or, rarely, a valid shorter one).
    let good = msg(
        "/framepipe/stamp/x",
        vec![OscType::Int(4), OscType::String("abc".into())],
    );
    for len in 1..good.len() {
        sock.send_to(&good[..len], to).unwrap();
        sent += 1;
    }
    // 60 KiB: a blob to a property, and a 60 KiB address.
    sock.send_to(
        &msg(
            "/framepipe/stamp/x",
            vec![OscType::Blob(vec![7; 60 * 1024])],
        ),
        to,
    )
    .unwrap();
    let long = format!("/framepipe/{}/x/norm", "n".repeat(60 * 1024));
    sock.send_to(&msg(&long, vec![OscType::Float(0.5)]), to)
        .unwrap();
    // Deep nesting, built by hand.
    let mut deep = msg("/framepipe/stop", vec![]);
    for _ in 0..2000 {
        let mut outer = b"#bundle\0\0\0\0\0\0\0\0\x01".to_vec();
        outer.extend_from_slice(&(deep.len() as u32).to_be_bytes());
        outer.extend_from_slice(&deep);
        deep = outer;
    }
    sock.send_to(&deep, to).unwrap();
    surely_bad += 3;
    sent += 3;
    std::thread::sleep(Duration::from_millis(20));
    // A burst of 5,000: unknown addresses and wrong types (the kernel may drop some).
    for i in 0..5000 {
        let p = if i % 2 == 0 {
            msg("/framepipe/warp", vec![OscType::Float(1.0)])
        } else {
            msg("/framepipe/speed", vec![OscType::String("fast".into())])
        };
        sock.send_to(&p, to).unwrap();
        sent += 1;
    }
    // Still controlled, and still running.
    let n = send_until(
        &sock,
        port,
        &msg("/framepipe/stamp/x", vec![OscType::Int(40)]),
        &out,
        (true, Some(40)),
    );
    sent += u64::from(n);
    sock.send_to(&msg("/framepipe/stop", vec![]), to).unwrap();
    sent += 1;
    let res = wait(child, Duration::from_secs(20), "framepipe --osc garbage");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{stderr}");
    let (ok, bad) = counts(&stderr);
    assert!(bad >= surely_bad, "{bad} bad < {surely_bad}: {stderr}");
    assert!(ok >= 2, "{stderr}");
    assert!(ok + bad <= sent, "{ok} + {bad} > {sent} sent");
    // Warnings are limited to about one line a second.
    let warnings = stderr.lines().filter(|l| l.contains("osc: from")).count();
    assert!(warnings <= 10, "{warnings} warning lines: {stderr}");
    check_sequence(&out, &[(true, Some(0)), (true, Some(40))], &[]);
}
