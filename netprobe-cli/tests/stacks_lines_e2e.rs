//! `trace --stack` on real hits of a C program built `-g -O2 -fno-omit-frame-pointer`
//! (`fixtures/c/lines.c`): every frame of the program carries the file and line, and the frames
//! inlined at each address, that binutils' `addr2line -a -i -f` gives for that address (the
//! probed instruction itself, each return address minus one: the call); the text output prints
//! them as `function+0xOFF (file:line)`.

use fixtures::e2e::{self, err, Need};
use fixtures::{netprobe, CProgram};
use serde_json::Value as Json;
use std::path::Path;
use std::process::Command;

fn run(prog: &str, args: &[&str], input: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(err)?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.as_bytes())
        .map_err(err)?;
    let out = e2e::succeeded(child.wait_with_output().map_err(err)?, prog)?;
    Ok(e2e::text(&out.stdout))
}

/// The virtual address of file offset `off` of `bin`, by its `PT_LOAD` headers (`readelf -lW`).
fn vaddr(bin: &Path, off: u64) -> Result<u64, String> {
    let segs = run("readelf", &["-lW", &bin.to_string_lossy()], "")?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(err);
    for l in segs.lines().filter(|l| l.trim_start().starts_with("LOAD")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (o, v, sz) = (hex(f[1])?, hex(f[2])?, hex(f[4])?);
        if off >= o && off < o + sz {
            return Ok(off - o + v);
        }
    }
    Err(format!("no PT_LOAD holds offset {off:#x}"))
}

fn frames_carry_addr2lines_lines() -> Result<(), String> {
    let bin = CProgram::new("lines")
        .flags(&["-g", "-O2", "-fno-omit-frame-pointer"])
        .build();
    let image = bin.to_string_lossy().into_owned();
    let spec = format!("{image}:checksum");
    // Few calls: each hit copies 8 KiB of stack for unwinding, and a burst of thousands would
    // fill the ring before the limit is reached (exit status 3, hits lost).
    let command = format!("{image} 20");
    let json = netprobe::stdout_ok(&[
        "trace",
        "--stack",
        "--json",
        "--max-events",
        "3",
        "-c",
        &command,
        &spec,
    ])?;
    let text = netprobe::stdout_ok(&[
        "trace",
        "--stack",
        "--max-events",
        "1",
        "-c",
        &command,
        &spec,
    ])?;
    let hits = e2e::json_lines_strict(json.as_bytes())?;
    if hits.is_empty() {
        return Err(format!("no hits: {json}"));
    }
    for hit in &hits {
        let frames = hit["stack"].as_array().ok_or("no stack")?;
        // The program's frames, grouped by address (inlined frames share their caller's).
        let mut groups: Vec<(u64, Vec<&Json>)> = Vec::new();
        for f in frames
            .iter()
            .filter(|f| f["image"].as_str() == Some(&image))
        {
            let off = f["file_offset"]
                .as_str()
                .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                .ok_or("a frame without a file offset")?;
            match groups.last_mut() {
                Some((o, g)) if *o == off => g.push(f),
                _ => groups.push((off, vec![f])),
            }
        }
        if groups.len() < 3 {
            return Err(format!("want checksum, round_of and main: {frames:?}"));
        }
        let mut input = String::new();
        for (i, (off, _)) in groups.iter().enumerate() {
            let v = vaddr(&bin, *off)? - u64::from(i > 0);
            input.push_str(&format!("{v:#x}\n"));
        }
        let out = run("addr2line", &["-a", "-i", "-f", "-e", &image], &input)?;
        let mut want: Vec<Vec<String>> = Vec::new();
        let mut lines = out.lines();
        while let Some(l) = lines.next() {
            if l.starts_with("0x") {
                want.push(Vec::new());
            } else {
                let at = lines.next().unwrap_or("");
                let at = at.split(" (discriminator").next().unwrap_or(at);
                want.last_mut().ok_or("addr2line")?.push(at.to_string());
            }
        }
        for ((_, got), want) in groups.iter().zip(&want) {
            let got: Vec<String> = got
                .iter()
                // addr2line prints `??:?` where DWARF has no line (`_start`, now reached by
                // unwinding through libc's call-frame information).
                .map(|f| {
                    let line = f["line"]
                        .as_u64()
                        .map_or("?".to_string(), |l| l.to_string());
                    format!("{}:{line}", f["file"].as_str().unwrap_or("??"))
                })
                .collect();
            if &got != want {
                return Err(format!("frames {got:?}, addr2line {want:?}"));
            }
        }
    }
    let src = fixtures::workspace_root().join("fixtures/c/lines.c");
    let shown = "checksum+0x";
    if !text
        .lines()
        .any(|l| l.trim_start().starts_with(shown) && l.contains(&format!("({}:", src.display())))
    {
        return Err(format!(
            "no `checksum+0xOFF ({}:LINE)` line: {text}",
            src.display()
        ));
    }
    Ok(())
}

fn main() {
    e2e::run(vec![e2e::trial(
        "trace_stack_frames_carry_addr2lines_lines",
        &e2e::live(&[
            Need::CCompiler,
            Need::Program("addr2line"),
            Need::Program("readelf"),
        ]),
        frames_carry_addr2lines_lines,
    )])
}
