//! No process, shared memory or descriptor of an isolated plugin outlives its node or the run
//! (issue #21, item 6), through the real `framepipe` binary.
//!
//! The plugin is a real frei0r filter built here with `cc` (as `tests/isolate.rs` builds its
//! crashing ones): at its first frame it forks a grandchild that records its pid and process
//! group and then sleeps for ever, still mapping the child's shared memory (the frame pools and
//! the instance's memfd), as a plugin that starts a helper process would. It crashes at the frame
//! after the test creates a trigger file (removing the file: one crash). The test then counts:
//! the grandchild's process and every other process of the child's group are gone after a
//! restart and after the run, no process maps the plugin's shared memory any more, and the
//! parent's descriptor count after the restart is what it was before.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{tmpdir, FP};

const FORKING_FILTER_C: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>
typedef struct { const char *name, *author; int plugin_type, color_model, frei0r_version,
    major_version, minor_version, num_params; const char *explanation; } info_t;
typedef struct { const char *name; int type; const char *explanation; } param_info_t;
typedef struct { unsigned w, h; } inst_t;
static int forked;
int f0r_init(void) { return 1; }
void f0r_deinit(void) {}
void f0r_get_plugin_info(info_t *i) {
    i->name = "forking"; i->author = "framepipe tests"; i->plugin_type = 0; i->color_model = 1;
    i->frei0r_version = 1; i->major_version = 0; i->minor_version = 1; i->num_params = 0;
    i->explanation = "copies its input; forks a sleeping helper; crashes on request";
}
void f0r_get_param_info(param_info_t *p, int i) { (void)p; (void)i; }
void *f0r_construct(unsigned w, unsigned h) {
    inst_t *s = calloc(1, sizeof *s); s->w = w; s->h = h; return s;
}
void f0r_destruct(void *s) { free(s); }
void f0r_set_param_value(void *p, void *v, int i) { (void)p; (void)v; (void)i; }
void f0r_get_param_value(void *p, void *v, int i) { (void)p; (void)v; (void)i; }
void f0r_update(void *p, double t, const uint32_t *in, uint32_t *out) {
    inst_t *s = p; size_t n = (size_t)s->w * s->h; (void)t;
#ifdef PIDS
    if (!forked) {
        forked = 1;
        if (fork() == 0) {
            FILE *f = fopen(PIDS, "a");
            fprintf(f, "%d %d\n", (int)getpid(), (int)getpgrp());
            fclose(f);
            for (;;) pause();
        }
    }
#endif
#ifdef CRASH
    if (unlink(CRASH) == 0) *(volatile int *)0 = 1;
#endif
#ifdef FAIL_AT_MS
    if ((long)(t + 0.5) == FAIL_AT_MS) *(volatile int *)0 = 1;
#endif
    for (size_t i = 0; i < n; i++) out[i] = in[i];
}
"#;

/// A frei0r filter like the forking one, that only crashes: at the frame whose time is 200 ms
/// (frame 6 at 30 fps), as `tests/isolate.rs`'s `fp_segv` does.
fn build_crashing(dir: &Path, stem: &str) {
    let src = dir.join("crashing.c");
    std::fs::write(&src, FORKING_FILTER_C).unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-DFAIL_AT_MS=200", "-o"])
        .arg(dir.join(format!("{stem}.so")))
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc failed");
}

/// The scratch directory with the plugin `STEM.so` built in it, its pid file and its trigger.
struct Forking {
    dir: framepipe_testkit::TestDir,
    stem: String,
}

impl Forking {
    fn build(stem: &str) -> Forking {
        let dir = tmpdir(&format!("procs-{stem}"));
        let src = dir.join("forking.c");
        std::fs::write(&src, FORKING_FILTER_C).unwrap();
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1"])
            .arg(format!("-DPIDS=\"{}\"", dir.join("pids").display()))
            .arg(format!("-DCRASH=\"{}\"", dir.join("crash").display()))
            .arg("-o")
            .arg(dir.join(format!("{stem}.so")))
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(st.success(), "cc failed");
        Forking {
            dir,
            stem: stem.to_string(),
        }
    }

    /// `framepipe run` of an endless paced show through the plugin, isolated.
    fn spawn(&self) -> Running {
        Running(Some(
            Command::new(FP)
                .env(
                    "FREI0R_PATH",
                    format!("{}:/usr/lib/frei0r-1", self.dir.display()),
                )
                .args([
                    "run",
                    "-q",
                    &format!(
                        "testsrc width=32 height=32 rate=25 ! frei0r-{} isolate=true ! nullsink",
                        self.stem
                    ),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn framepipe"),
        ))
    }

    /// (pid, process group) of each grandchild forked so far, in order.
    fn grandchildren(&self) -> Vec<(i32, i32)> {
        std::fs::read_to_string(self.dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let mut f = l.split(' ').map(|n| n.parse::<i32>().unwrap());
                (f.next().unwrap(), f.next().unwrap())
            })
            .collect()
    }

    fn wait_grandchildren(&self, n: usize, child: &mut Running) -> Vec<(i32, i32)> {
        let child = child.0.as_mut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let g = self.grandchildren();
            if g.len() >= n {
                return g;
            }
            if let Some(st) = child.try_wait().unwrap() {
                panic!("framepipe ended ({st}) before grandchild {n} was forked");
            }
            assert!(
                Instant::now() < deadline,
                "grandchild {n} not forked in 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The memfd names of the plugin's shared memory, as /proc/PID/maps shows them.
    fn memfd_tag(&self) -> String {
        format!("memfd:framepipe-frei0r-{}", self.stem)
    }
}

impl Drop for Forking {
    /// A failed test leaves no helper behind: the grandchildren it recorded are the test's own.
    fn drop(&mut self) {
        for (pid, _) in self.grandchildren() {
            if alive(pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// A running framepipe, killed when dropped (a failed test leaves no process behind).
struct Running(Option<std::process::Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The process is gone (or a zombie: it holds no memory or descriptor any more).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next())
        })
        .flatten()
        .is_some_and(|state| state != 'Z')
}

/// Every live process: (pid, process group, whether its maps name `tag`).
fn processes(tag: &str) -> Vec<(i32, i32, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.first() == Some(&"Z") {
            continue;
        }
        let pgrp: i32 = f[2].parse().unwrap();
        let maps = std::fs::read_to_string(e.path().join("maps"))
            .unwrap_or_default()
            .contains(tag);
        out.push((pid, pgrp, maps));
    }
    out
}

/// Within 2 s: no live process in group `pgid`, and none mapping `tag` (when given).
fn assert_group_gone(pgid: i32, tag: Option<&str>, when: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left: Vec<(i32, i32, bool)> = processes(tag.unwrap_or("\0"))
            .into_iter()
            .filter(|&(_, g, maps)| g == pgid || maps)
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{when}: processes left (pid, group, maps the plugin's shared memory): {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The parent's descriptor count once it has been the same for 300 ms (a child starting or
/// being reaped meanwhile changes it for a moment).
fn settled_fd_count(pid: u32) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = fd_count(pid);
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_millis(300) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let n = fd_count(pid);
        if n != last {
            last = n;
            since = Instant::now();
        }
    }
    last
}

fn trigger_crash(p: &Forking) {
    std::fs::write(p.dir.join("crash"), b"").unwrap();
}

fn stderr_of(mut child: Running) -> (std::process::ExitStatus, String) {
    let out = common::wait(
        child.0.take().unwrap(),
        Duration::from_secs(20),
        "framepipe",
    );
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_isolated_plugins_processes_end_with_its_child_and_with_the_run() {
    let p = Forking::build("fp_fork_run");
    let mut fp = p.spawn();
    let first = p.wait_grandchildren(1, &mut fp)[0];
    let (g1, group1) = first;
    // The premise: the grandchild runs in the child's group and holds its shared memory.
    assert!(alive(g1), "grandchild {g1} not running");
    assert_ne!(
        group1,
        fp.id() as i32,
        "the child shares framepipe's process group"
    );
    let tag = p.memfd_tag();
    assert!(
        std::fs::read_to_string(format!("/proc/{g1}/maps"))
            .unwrap()
            .contains(&tag),
        "the grandchild does not map the plugin's shared memory"
    );
    let fds_before = settled_fd_count(fp.id());

    // The plugin crashes: its child is restarted, and the first child's whole group ends.
    trigger_crash(&p);
    let (g2, group2) = p.wait_grandchildren(2, &mut fp)[1];
    assert_ne!(group2, group1, "the restarted child has a group of its own");
    assert_group_gone(group1, None, "after the restart");
    assert!(!alive(g1), "the first child's grandchild {g1} outlived it");
    assert_eq!(
        settled_fd_count(fp.id()),
        fds_before,
        "framepipe's descriptors after the restart"
    );

    // The run ends (SIGINT: the normal stop): nothing of the plugin is left.
    common::kill(fp.id(), "INT");
    let (status, err) = stderr_of(fp);
    assert_eq!(status.code(), Some(130), "stopped by SIGINT: {err}");
    assert!(err.contains("plugin crashed"), "{err}");
    assert_group_gone(group2, Some(&tag), "after the run");
    assert!(!alive(g2), "the grandchild {g2} outlived the run");
}

#[test]
fn an_isolated_plugins_processes_end_when_framepipe_is_killed() {
    // SIGKILL gives framepipe no chance to end anything: the child notices that its parent is
    // gone (within half a second) and ends its own group.
    let p = Forking::build("fp_fork_kill");
    let mut fp = p.spawn();
    let (g1, group1) = p.wait_grandchildren(1, &mut fp)[0];
    assert!(alive(g1));
    common::kill(fp.id(), "KILL");
    let _ = fp.0.take().unwrap().wait();
    assert_group_gone(group1, Some(&p.memfd_tag()), "after SIGKILL");
    assert!(!alive(g1), "the grandchild {g1} outlived framepipe");
}

const SHOW_FRAMES: usize = 45;
const SIDE: usize = 32;

fn frames_in(path: &Path) -> usize {
    std::fs::metadata(path).map_or(0, |m| m.len() as usize) / (SIDE * SIDE * 4)
}

#[test]
fn a_plugin_crashing_in_one_show_leaves_the_other_shows_running() {
    // Issue #21 item 7: with several shows in one process, a frei0r node runs isolated unless
    // it says isolate=false, so its crash costs its show one frame, not every show.
    let dir = tmpdir("procs-shows");
    build_crashing(&dir, "fp_crash_shows");
    let (a, b) = (dir.join("a.rgba"), dir.join("b.rgba"));
    let out = common::run(
        Command::new(FP)
            .env(
                "FREI0R_PATH",
                format!("{}:/usr/lib/frei0r-1", dir.display()),
            )
            .args([
                "run",
                "--fps",
                "30",
                "--control",
                "none",
                &format!(
                    "testsrc width={SIDE} height={SIDE} frames={SHOW_FRAMES} rate=30 ! \
                     frei0r-fp_crash_shows name=fx ! rawsink location={}",
                    a.display()
                ),
                &format!(
                    "testsrc width={SIDE} height={SIDE} frames={SHOW_FRAMES} rate=30 ! invert ! \
                     rawsink location={}",
                    b.display()
                ),
            ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    assert_eq!(frames_in(&b), SHOW_FRAMES, "the other show's frames: {err}");
    assert_eq!(
        frames_in(&a),
        SHOW_FRAMES,
        "the crashing show's frames: {err}"
    );
    assert!(
        err.contains(
            "frei0r-fp_crash_shows (isolated): plugin crashed (signal 11 SIGSEGV) at frame 6"
        ),
        "{err}"
    );
}

#[test]
fn a_plugin_crashing_in_process_names_its_node_and_frame() {
    // Issue #22 item 8: isolate=false (one show's default), the crash kills the process, but
    // first says where.
    use std::os::unix::process::ExitStatusExt;
    let dir = tmpdir("procs-note");
    build_crashing(&dir, "fp_crash_note");
    let out = common::run(
        Command::new(FP)
            .env(
                "FREI0R_PATH",
                format!("{}:/usr/lib/frei0r-1", dir.display()),
            )
            .args([
                "run",
                "-q",
                "--unpaced",
                &format!(
                    "testsrc width={SIDE} height={SIDE} frames={SHOW_FRAMES} rate=30 ! \
                     frei0r-fp_crash_note name=fx ! nullsink"
                ),
            ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(11), "{}: {err}", out.status);
    assert!(
        err.contains(
            "framepipe: crashed in node fx (frei0r-fp_crash_note) on frame 6: SIGSEGV; run it isolated with isolate=true\n"
        ),
        "{err}"
    );
}
