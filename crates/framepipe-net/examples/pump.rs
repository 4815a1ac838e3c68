//! The benchmark's reference: a plain TCP socket pump with no framing and no pipeline.
//!
//! ```text
//! pump recv ADDR CHUNK            # accepts one connection, reads until EOF
//! pump send ADDR CHUNK COUNT      # writes COUNT chunks of CHUNK bytes
//! ```
//! The receiver prints `bytes seconds` measured from the first byte to the end of the stream.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: pump recv ADDR CHUNK | pump send ADDR CHUNK COUNT";
    let (mode, addr) = (args.get(1).expect(usage), args.get(2).expect(usage));
    let chunk: usize = args.get(3).expect(usage).parse().expect("CHUNK");
    let mut buf = vec![0x5au8; chunk];
    match mode.as_str() {
        "recv" => {
            let l = TcpListener::bind(addr).expect("bind");
            let (mut s, _) = l.accept().expect("accept");
            let mut total = 0u64;
            let mut start = None;
            loop {
                let n = s.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                start.get_or_insert_with(Instant::now);
                total += n as u64;
            }
            let secs = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
            println!("{total} {secs:.6}");
        }
        "send" => {
            let count: u64 = args.get(4).expect(usage).parse().expect("COUNT");
            let mut s = loop {
                match TcpStream::connect(addr) {
                    Ok(s) => break s,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            };
            for i in 0..count {
                buf[0] = i as u8;
                s.write_all(&buf).expect("write");
            }
        }
        _ => panic!("{usage}"),
    }
}
