//! Lists every precompiled (ReadyToRun) method of a .NET assembly: RVA, size, file offset, name.
//!
//! `cargo run --release -p netprobe-core --example list_r2r -- PATH.dll [--summary] [--siblings] [--il]`
//!
//! The benchmark in `benchmarks/r2r.md` times this against `benchmarks/list_r2r.py`.

use netprobe_core::dotnet::{r2r::SiblingAssemblies, Assembly};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: list_r2r PATH.dll [--summary] [--siblings]");
        std::process::exit(2);
    };
    let summary = args.iter().any(|a| a == "--summary");
    let siblings = args.iter().any(|a| a == "--siblings");
    let asm = match Assembly::open(path) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let sib;
    let resolver;
    let methods = if siblings {
        sib = SiblingAssemblies::open(&asm, SiblingAssemblies::referenced_modules(&asm));
        resolver = &sib;
        asm.methods_with(Some(&resolver))
    } else {
        asm.methods()
    };
    let methods = match methods {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if summary {
        let r2r = asm
            .r2r()
            .expect("methods() succeeded, so the image is ReadyToRun");
        let _ = writeln!(
            out,
            "{} R2R {}.{} flags {:#x} compiler {:?} runtime_functions {} methods {}",
            asm.name().unwrap_or("?"),
            r2r.header.major_version,
            r2r.header.minor_version,
            r2r.header.flags,
            r2r.compiler,
            r2r.runtime_functions.len(),
            methods.len()
        );
        return;
    }
    let il = args.iter().any(|a| a == "--il");
    for m in &methods {
        if il {
            let _ = write!(out, "il={} ", asm.il_code_size(m.token).unwrap_or(0));
        }
        let _ = writeln!(
            out,
            "{:08x} {:x} {:x} {}",
            m.rva.0,
            m.total_size,
            m.file_offset.map_or(0, |o| o.0),
            m.name
        );
    }
}
