//! The per-frame control path allocates nothing: pacing a frame, recording its lateness,
//! advancing the oscillator clock, evaluating oscillators, reading (empty and non-empty)
//! command queues, retiring commands, and the transport decision.
//!
//! A counting global allocator counts allocations made by this thread during the loop.

use framepipe_clock::{LatenessStats, Pacer};
use framepipe_control::{command_queue, Command, OscClock, Oscillator, Outcome, Shape, Transport};
use framepipe_core::Rational;

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

/// Allocations made so far by this thread.
fn allocs() -> u64 {
    framepipe_testkit::this_thread()
}

#[test]
fn the_per_frame_path_does_not_allocate() {
    // Set-up may allocate.
    let mut pacer = Pacer::new(Rational::new(1000, 1))
        .unwrap()
        .with_stats(LatenessStats::default());
    let (tx, mut rx) = command_queue(64);
    let oscs = [
        Oscillator::new(Shape::Sine).with_freq(3.0),
        Oscillator::new(Shape::Random).with_seed(5),
        Oscillator::new(Shape::RandomRamp).with_seed(5),
        Oscillator::new(Shape::Pulse).with_width(0.2),
    ];
    let mut clock = OscClock::new();
    let mut transport = Transport::new();
    let period = Rational::new(1000, 1);
    // Commands are made (allocated) by the sender before the loop.
    let posted: Vec<Command> = (0..20)
        .map(|i| Command::parse(&format!("set {}.blur 0.{i}", i % 3)).unwrap())
        .collect();
    for c in posted {
        tx.post(c).unwrap();
    }

    let before = allocs();
    let mut sum = 0.0;
    for n in 0..100u64 {
        // One frame boundary: commands, transport, oscillator time, parameters, deadline.
        rx.drain(|p| {
            let c = p.command;
            transport.apply(&c);
            // The runtime would apply the parameter here, then hand the command back.
            sum += c.target().is_some() as u8 as f64;
        });
        if let Some(p) = rx.pop() {
            rx.reply(p, Outcome::Applied { frame: n });
        }
        let _ = transport.at_boundary();
        let t = clock.advance(period.frame_time_ns(n));
        for o in &oscs {
            sum += o.value_at(t);
        }
        let tick = pacer.wait_next();
        sum += tick.lateness_ns as f64;
    }
    let during = allocs() - before;
    std::hint::black_box(sum);
    assert_eq!(during, 0, "{during} allocations in 100 frames");
    assert_eq!(pacer.stats().count(), 100);
    // The applied commands were dropped in `drain` here (the test's closure); replied ones
    // reach the sender.
    assert!(tx.replies().take().is_none());
}
