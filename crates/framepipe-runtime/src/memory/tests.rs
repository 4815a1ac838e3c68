use std::sync::Arc;

use framepipe_core::{Limits, VideoInfo};

use super::*;
use framepipe_core::Rational;

fn info(width: u32, height: u32) -> VideoInfo {
    VideoInfo {
        width,
        height,
        rate: Rational::new(30, 1),
    }
}

/// A chain: a source, then effects with these instance counts, then a sink.
fn chain<'a>(infos: &[VideoInfo], instances: &[usize]) -> Vec<PoolNode<'a>> {
    let n = infos.len();
    let mut nodes: Vec<PoolNode<'a>> = (0..n)
        .map(|i| PoolNode {
            info: infos[i],
            kind: MemoryKind::Cpu,
            instance_bytes: framepipe_core::limits::frame_bytes(infos[i].width, infos[i].height),
            gpu_bytes: 0,
            name: "stage",
            writes: true,
            instances: if i == 0 { 0 } else { instances[i - 1] },
            in_branch: false,
            sinks_fed: usize::from(i == n - 1),
            feeds_master: i == n - 1,
            extra: 0,
        })
        .collect();
    nodes.push(PoolNode {
        info: infos[n - 1],
        kind: MemoryKind::Cpu,
        instance_bytes: 0,
        gpu_bytes: 0,
        name: "sink",
        writes: false,
        instances: 0,
        in_branch: false,
        sinks_fed: 0,
        feeds_master: false,
        extra: 0,
    });
    nodes
}

#[test]
fn the_memory_book_counts_what_is_held_until_dropped_and_names_both_parts() {
    let limit = Limits::current().max_memory;
    let book = Arc::new(MemoryBook::default());
    let running = book.hold(MemoryKind::Cpu, limit / 2);
    let instance = book.hold(MemoryKind::Cpu, limit / 8);
    assert_eq!(book.held(), limit / 2 + limit / 8);
    // The new version would add half the budget: over it beside what is held.
    let e = book
        .admit(
            limit / 2 + limit / 8,
            limit / 2,
            "the new one",
            "while the edit switches",
            "",
        )
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("the running graph ("), "{e}");
    assert!(e.contains("and the new one ("), "{e}");
    assert!(
        e.contains("held at once while the edit switches, would take"),
        "{e}"
    );
    assert!(e.ends_with("raise --max-memory"), "{e}");
    // A replaced version still held is named apart from the running one.
    let e = book
        .admit(
            limit / 2,
            limit / 2,
            "the new one",
            "while the edit switches",
            "",
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("an earlier edit replaced, not freed yet"), "{e}");
    assert!(e.ends_with("a paused show holds them)"), "{e}");
    // It would fit once the replaced version is freed: left to the edit thread.
    assert!(book.take_later() && !book.take_later());
    assert!(book.fits(limit / 4) && !book.fits(limit / 2));
    drop(running);
    assert_eq!(book.held(), limit / 8);
    assert!(book
        .admit(
            limit / 8,
            limit / 2,
            "the new one",
            "while the edit switches",
            ""
        )
        .is_ok());
    let stats = book.stats();
    assert_eq!(stats.held_max, limit / 2 + limit / 8);
    assert_eq!(stats.edits_refused, 1);
    drop(instance);
    assert_eq!(book.held(), 0);
}

#[test]
fn a_one_frame_run_gets_pools_for_one_frame() {
    let infos = [info(64, 64), info(64, 64)];
    let f = in_flight(2, 0, &infos, Some(1));
    assert_eq!(f, 1);
    let nodes = chain(&infos, &[2]);
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: true,
        threads: 2,
        in_flight: f,
        keep_last: false,
    };
    let (plans, node_pool) = needs.plan();
    // The source's frame, glow's output while it runs, a frame the sink may keep.
    assert_eq!(plans[0].capacity, 3);
    assert_eq!(plans[0].fill, 2, "a paced run fills what the frame uses");
    assert_eq!(node_pool, vec![0, 0, 0]);
}

#[test]
fn the_default_in_flight_shrinks_for_large_frames_but_keeps_every_worker_busy() {
    let hd = [info(1280, 720)];
    let uhd = [info(3840, 2160)];
    let huge = [info(16384, 16384)];
    assert_eq!(
        in_flight(2, 0, &hd, None),
        6,
        "small frames: 2 * threads + 2"
    );
    assert_eq!(
        in_flight(2, 0, &uhd, None),
        3,
        "4K: 96 MiB of frames, threads + 1"
    );
    assert_eq!(in_flight(8, 0, &huge, None), 9, "never below threads + 1");
    assert_eq!(in_flight(2, 40, &uhd, None), 40, "asked for: as asked");
    assert_eq!(
        in_flight(2, 40, &uhd, Some(5)),
        5,
        "no more than the frames"
    );
    assert_eq!(in_flight(2, 0, &hd, Some(0)), 1);
}

#[test]
fn each_pool_counts_only_the_stages_writing_into_it() {
    // 4K source -> scale to 720p (parallel) -> serial effect at 720p -> sink, paced, live.
    let infos = [info(3840, 2160), info(1280, 720), info(1280, 720)];
    let nodes = chain(&infos, &[4, 1]);
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: true,
        threads: 4,
        in_flight: 10,
        keep_last: true,
    };
    let (plans, node_pool) = needs.plan();
    assert_eq!(node_pool, vec![0, 1, 1, 1]);
    // 4K: only tokens (the source writes into it, no effect does).
    assert_eq!(plans[0].capacity, 10);
    // 720p: tokens + 4 parallel scale instances and 1 serial instance, at most 4 running,
    // + the sink's frame + the output thread's last frame.
    assert_eq!(plans[1].capacity, 10 + 4 + 2);
    assert_eq!((plans[0].fill, plans[1].fill), (10, 10 + 4 + 1));
    let (total, what) = needs.total(&plans);
    let uhd = 3840 * 2160 * 4;
    let hd = 1280 * 720 * 4;
    assert_eq!(total, 10 * uhd + 16 * hd + (4 + 1) * hd);
    assert!(
        what.contains("10 frames of 3840x2160, 16 frames of 1280x720"),
        "{what}"
    );
    assert!(what.contains("5 effect instances"), "{what}");
}

#[test]
fn a_graph_counts_every_node_of_a_frame_and_a_branch_once() {
    // Issue #8: two sources -> a mixer -> a sink, and a leaky monitor branch at 320x180.
    let hd = info(1280, 720);
    let small = info(320, 180);
    let node = |info: VideoInfo, writes, instances, in_branch, sinks_fed| PoolNode {
        info,
        kind: MemoryKind::Cpu,
        instance_bytes: framepipe_core::limits::frame_bytes(info.width, info.height),
        gpu_bytes: 0,
        name: "n",
        writes,
        instances,
        in_branch,
        sinks_fed,
        feeds_master: sinks_fed > 0 && !in_branch,
        extra: 0,
    };
    let nodes = [
        node(hd, true, 0, false, 0),    // source a
        node(hd, true, 0, false, 0),    // source b
        node(hd, true, 2, false, 1),    // mix (parallel), feeds the master
        node(small, true, 2, true, 1),  // monitor, leaky, feeds a preview sink
        node(hd, false, 0, false, 0),   // master sink
        node(small, false, 0, true, 0), // preview sink
    ];
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: false,
        threads: 2,
        in_flight: 6,
        keep_last: false,
    };
    let (plans, _) = needs.plan();
    // 720p: three nodes' outputs per frame in flight, two mixers running, the sink's frame.
    assert_eq!(plans[0].capacity, 6 * 3 + 2 + 1);
    // The branch holds one frame at a time: its output, one running, the preview's frame.
    assert_eq!(plans[1].capacity, 1 + 2 + 1);
}

#[test]
fn pools_over_the_budget_are_refused_before_anything_is_allocated() {
    // A huge in-flight is refused by arithmetic alone: were the pools made first, this test
    // would try to allocate a billion slots.
    let infos = [info(3840, 2160), info(3840, 2160)];
    let nodes = chain(&infos, &[2]);
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: true,
        threads: 2,
        in_flight: 1_000_000_000,
        keep_last: false,
    };
    let e = frame_pools(&needs).unwrap_err().to_string();
    assert!(e.contains("1000000000 frames in flight"), "{e}");
    assert!(e.contains("over the limit of"), "{e}");
    assert!(e.contains("--max-memory"), "{e}");
}

#[test]
fn pools_are_in_shared_memory_once_asked_for() {
    // Process-wide and sticky: the other tests of this binary may then get shared pools
    // too, which behave the same.
    let infos = [info(32, 32), info(32, 32)];
    let nodes = chain(&infos, &[1]);
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: true,
        threads: 2,
        in_flight: 2,
        keep_last: false,
    };
    framepipe_core::shm::request_shared_pools();
    let pools = frame_pools(&needs).unwrap().per_node;
    assert!(pools[0].is_shared());
    let f = pools[0].acquire().unwrap();
    assert!(f.shared().is_some());
    assert_eq!(pools[0].allocated(), 1, "still lazy");
}

#[test]
fn lazy_pools_allocate_nothing_until_used_and_paced_ones_fill_up() {
    let infos = [info(32, 32), info(32, 32)];
    let nodes = chain(&infos, &[2]);
    let needs = PoolNeeds {
        nodes: &nodes,
        chain: true,
        threads: 2,
        in_flight: 4,
        keep_last: false,
    };
    let pools = frame_pools(&needs).unwrap().per_node;
    assert!(pools[0].same_pool(&pools[1]));
    assert_eq!((pools[0].capacity(), pools[0].allocated()), (4 + 2 + 1, 0));
    // A paced run's, once it starts.
    let planned = frame_pools(&needs).unwrap();
    let pools = planned.per_node.clone();
    fill_in_background(planned.distinct);
    let t0 = std::time::Instant::now();
    while pools[0].allocated() < 6 {
        assert!(
            t0.elapsed().as_secs() < 10,
            "the helper never filled the pool"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // 4 in flight + 2 being written; the seventh frame (for a sink that keeps one) is made
    // only if a sink asks for it.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!((pools[0].allocated(), pools[0].available()), (6, 6));
}
