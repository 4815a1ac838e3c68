//! A private X server for window tests: Xvfb on a display number it picks itself
//! (`-displayfd`), killed when the guard drops (also when the test fails).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running Xvfb; killed and reaped on drop.
#[derive(Debug)]
pub struct Xvfb {
    child: Child,
    /// Its `$DISPLAY`, e.g. `:7`.
    pub display: String,
}

impl Xvfb {
    /// Xvfb with one `width`x`height` 24-bit screen, or `None` when it cannot start (said on
    /// stderr, for the test to skip). `-noreset`: what clients set (RandR monitors made with
    /// `xrandr --setmonitor`) stays when they disconnect; `-nolisten tcp`: local only.
    pub fn start(width: u32, height: u32) -> Option<Xvfb> {
        let spawned = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-nolisten",
                "tcp",
                "-noreset",
                "-screen",
                "0",
            ])
            .arg(format!("{width}x{height}x24"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: cannot start Xvfb ({e}); scripts/install-deps installs xvfb");
                return None;
            }
        };
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        if !matches!(read, Some(Ok(_))) || line.trim().parse::<u32>().is_err() {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("skipped: Xvfb did not start (no display number reported)");
            return None;
        }
        Some(Xvfb {
            child,
            display: format!(":{}", line.trim()),
        })
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
