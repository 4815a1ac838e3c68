//! The pacing measurement tools against each other: pace-meter must see paced-writer's frames
//! at the period, and must see an unpaced writer as unpaced.

use std::process::Command;

fn meter(period_us: u32, cmd: &[&str]) -> std::collections::HashMap<String, f64> {
    let out = Command::new(env!("CARGO_BIN_EXE_pace-meter"))
        .args([
            "--frame-bytes",
            "16384",
            "--period-us",
            &period_us.to_string(),
        ])
        .args(["--label", "t", "--"])
        .args(cmd)
        .output()
        .expect("run pace-meter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn meter_sees_the_pacers_period() {
    // 100 frames at 200 fps: 0.5 s.
    let m = meter(
        5000,
        &[
            env!("CARGO_BIN_EXE_paced-writer"),
            "--fps",
            "200",
            "--frames",
            "100",
        ],
    );
    assert_eq!(m["frames"], 90.0, "{m:?}"); // the first 10 are skipped as start-up
                                            // Lenient: a shared machine can take the CPU away for tens of ms. An unpaced or wrongly
                                            // paced writer is off by a whole period or more.
    assert!((4000.0..6500.0).contains(&m["mean_interval_us"]), "{m:?}");
    assert!(m["median_us"] < 2500.0, "{m:?}");
}

#[test]
fn meter_sees_an_unpaced_writer() {
    // 100 frames written as fast as a pipe takes them: intervals near 0, so |interval - 5 ms|
    // is near 5 ms.
    let m = meter(5000, &["sh", "-c", "head -c 1638400 /dev/zero"]);
    assert_eq!(m["frames"], 90.0, "{m:?}");
    assert!(m["median_us"] > 4000.0, "{m:?}");
    assert!(m["drift_us"] < -400_000.0, "{m:?}");
}
