//! Symbolizes addresses read from stdin, one hex number a line, and prints one line per address:
//! its frames (inlined first), `;`-separated.
//!
//! ```text
//! symbolize pid PID  < addresses       # runtime addresses of a live process
//! symbolize file PATH < offsets        # file offsets of PATH (recorded data)
//! ```
//! With `--quiet` nothing is printed per address; the time taken for all lookups (after reading
//! the input) and the number of image indexes built go to stderr either way.

use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::Symbolizer;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quiet = args.iter().any(|a| a == "--quiet");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--quiet").collect();
    let (mode, target) = match args.as_slice() {
        [m, t] if m.as_str() == "pid" || m.as_str() == "file" => (m.as_str(), t.as_str()),
        _ => {
            eprintln!(
                "usage: symbolize [--quiet] pid PID | file PATH  (hex addresses/offsets on stdin)"
            );
            std::process::exit(2);
        }
    };
    let input: Vec<u64> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| {
            let t = l.trim();
            u64::from_str_radix(t.trim_start_matches("0x"), 16).ok()
        })
        .collect();
    let mut s = Symbolizer::new();
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let start = Instant::now();
    for a in &input {
        let frames = match mode {
            "pid" => s.symbolize(
                target.parse().unwrap_or_else(|_| {
                    eprintln!("error: PID must be a number, got {target}");
                    std::process::exit(2)
                }),
                *a,
            ),
            _ => s.symbolize_file(&PathBuf::from(target), FileOffset(*a)),
        };
        match frames {
            Ok(frames) if !quiet => {
                let line: Vec<String> = frames.iter().map(|f| f.to_string()).collect();
                let _ = writeln!(out, "{a:#x} {}", line.join(";"));
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    let _ = out.flush();
    let took = start.elapsed();
    eprintln!(
        "symbolized {} addresses in {:.3} ms ({} image indexes built)",
        input.len(),
        took.as_secs_f64() * 1e3,
        s.index_builds()
    );
    for n in s.take_notes() {
        eprintln!("note: {n}");
    }
}
