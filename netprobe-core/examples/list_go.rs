//! Lists every function of a Go binary from its pclntab (works on stripped binaries).
//!
//!     cargo run --release -p netprobe-core --example list_go -- /usr/sbin/dockerd [--probes]
//!
//! Prints `ENTRY SIZE FILE_OFFSET NAME` per function (hex), preceded by a `#` header line with
//! the Go version, module, table layout and where the table was found. With `--probes` each line
//! also gets the post-prologue entry probe and the RET addresses.

use netprobe_core::bytes::FileBytes;
use netprobe_core::golang::GoBinary;
use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: list_go BINARY [--probes]");
        std::process::exit(2);
    };
    let probes = args.any(|a| a == "--probes");
    let bytes = match FileBytes::open(std::path::Path::new(&path)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("list_go: {e}");
            std::process::exit(1);
        }
    };
    let bin = match GoBinary::parse(&path, &bytes) {
        Ok(Some(b)) => b,
        Ok(None) => {
            eprintln!("list_go: {path} is not a Go binary (no pclntab)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("list_go: {e}");
            std::process::exit(1);
        }
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let loc = bin.pclntab_location();
    let _ = writeln!(
        out,
        "# {} version={} module={} pclntab={} at={} section={} text_start={:#x} abi={}",
        path,
        bin.version().map_or("?".into(), |v| v.raw),
        bin.module_path().unwrap_or("?"),
        bin.pclntab().version(),
        loc.file_offset,
        loc.section.as_deref().unwrap_or("(found by magic)"),
        loc.text_start,
        bin.abi(),
    );
    for f in bin.functions() {
        let off = bin
            .segments()
            .code_file_offset(f.entry)
            .map_or("-".to_string(), |o| format!("{:x}", o.0));
        let _ = write!(out, "{:x} {:x} {} {}", f.entry.0, f.size(), off, f.name);
        if probes {
            if let Some(p) = bin.probe_points(&f) {
                let rets: Vec<String> = p.rets.iter().map(|r| format!("{:x}", r.vaddr.0)).collect();
                let _ = write!(
                    out,
                    " entry_probe={:x} rets={}",
                    p.entry_probe.vaddr.0,
                    rets.join(",")
                );
            }
        }
        let _ = writeln!(out);
    }
}
