//! Feeds arbitrary bytes to the YUV4MPEG2 reader: the header line to `Y4mHeader::parse`, and,
//! when that accepts it, the whole input as a file to `y4msrc` (`Y4mSrc::open`, then frames
//! through `Source::fill` until it ends or fails).
//!
//! Checked beyond "no panic":
//! * an accepted header has sides in 1..=16384 and a usable rate (positive, at least one frame
//!   a day), and the header as `y4msink` writes it parses back to the same header;
//! * a header is accepted by `y4msrc` only if one frame of its size fits the memory budget (set
//!   small here, as `--max-memory 128M` would): no allocation proportional to a number in the
//!   header (scripts/fuzz also runs this with `-malloc_limit_mb`, so any larger single allocation
//!   is reported as a crash);
//! * every frame delivered was wholly in the input (frames x frame bytes <= input length) and is
//!   opaque.
#![no_main]

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use framepipe_core::{FrameCtx, FramePool, Limits, Source};
use framepipe_io::y4m::{Chroma, Y4mHeader, Y4mSrc};
use libfuzzer_sys::fuzz_target;

/// The budget set for the whole run: one frame may take 1/8 of it (16 MiB of RGBA).
const MAX_MEMORY: u64 = 128 << 20;

/// Streams whose RGBA frames are larger than this are checked up to `Y4mSrc::open` only: a
/// frame needs that many bytes of input, which a fuzz input (4 KiB by default) does not hold,
/// and writing a large pool for every input would slow the run down for nothing.
const MAX_STREAM_FRAME: u64 = 64 << 10;

/// Where each input is written for `y4msrc` to open (tmpfs when there is one). The first call
/// also sets the memory budget, before any `y4msrc` exists.
fn input_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        Limits {
            max_memory: MAX_MEMORY,
        }
        .set();
        let dir = std::path::Path::new("/dev/shm");
        let dir = if dir.is_dir() {
            dir.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("framepipe-fuzz-y4m-{}.y4m", std::process::id()))
    })
}

fn header_text(h: &Y4mHeader) -> String {
    let c = match h.chroma {
        Chroma::C420 => "C420jpeg",
        Chroma::C444 => "C444",
    };
    let range = if h.full_range { "FULL" } else { "LIMITED" };
    format!(
        "YUV4MPEG2 W{} H{} F{}:{} Ip A1:1 {c} XCOLORRANGE={range}",
        h.width, h.height, h.rate.num, h.rate.den
    )
}

fuzz_target!(|data: &[u8]| {
    let path = input_path();
    let line_end = data.iter().position(|&b| b == b'\n');
    let Ok(h) = Y4mHeader::parse(&data[..line_end.unwrap_or(data.len())], "fuzz") else {
        return;
    };
    assert!((1..=16384).contains(&h.width) && (1..=16384).contains(&h.height));
    assert!(h.rate.is_usable(), "rate {}", h.rate);
    let printed = header_text(&h);
    assert_eq!(
        Y4mHeader::parse(printed.as_bytes(), "fuzz").ok(),
        Some(h),
        "{printed}"
    );
    if line_end.is_none() {
        return;
    }

    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(data))
        .expect("writing the fuzz input to a file");
    let Ok(mut src) = Y4mSrc::open(path.to_str().unwrap(), 0) else {
        return;
    };
    let rgba = u64::from(h.width) * u64::from(h.height) * 4;
    assert!(
        rgba <= Limits::current().max_frame_bytes(),
        "y4msrc accepted a {}x{} frame ({rgba} bytes), over the budget's {} a frame",
        h.width,
        h.height,
        Limits::current().max_frame_bytes()
    );
    if rgba > MAX_STREAM_FRAME {
        return;
    }
    let info = src.info();
    assert_eq!((info.width, info.height), (h.width, h.height));
    let pool = FramePool::new(info.width, info.height, 1);
    let per_frame = h.chroma.frame_bytes(h.width, h.height) as u64;
    for seq in 0.. {
        let mut frame = pool.acquire().expect("one frame, returned each time");
        let ctx = FrameCtx::new(seq, h.rate.frame_time_ns(seq));
        match src.fill(&ctx, &mut frame) {
            Ok(true) => {
                assert!(
                    (seq + 1) * per_frame <= data.len() as u64,
                    "frame {seq} not in the input"
                );
                assert!(frame.data().chunks_exact(4).all(|px| px[3] == 255));
            }
            Ok(false) | Err(_) => break,
        }
    }
});
