//! Separate debug files found as distributions ship them, checked before use.
//!
//! `.gnu_debuglink`: a C program's DWARF split off with binutils is found in the program's
//! `.debug/` folder; the same file with one byte changed (its CRC-32 no longer what the link
//! says) and another build's debug file (its CRC right, its build-id another) are refused.
//!
//! The debuginfod client against elfutils' own server: a C program built with `-g`, its DWARF
//! split off (`objcopy --only-keep-debug`, `strip -g`, `objcopy --add-gnu-debuglink`) into a folder only a
//! `debuginfod -F` on loopback serves. A live process of the stripped program is symbolized with
//! `DEBUGINFOD_URLS` naming that server and a fresh cache folder: the frame gets the file and line
//! binutils' `addr2line` reads from the debug file, and the file lands in the cache as elfutils
//! lays it out (`HEX/debuginfo`). With the server gone and an empty cache: no line, and one note
//! naming the build-id and the fix.

use fixtures::e2e::{self, err, Need};
use netprobe_core::symbolize::Symbolizer;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SOURCE: &str = r#"
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int leaf(int x)
{
	return x * 3 + 1;
}

int main(void)
{
	volatile int v = 0;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		v = leaf(v);
		sleep(1);
	}
}
"#;

/// Kills and reaps the child when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sh(prog: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(prog).args(args).output().map_err(err)?;
    let out = e2e::succeeded(out, prog)?;
    Ok(e2e::text(&out.stdout))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(err)?;
    Ok(l.local_addr().map_err(err)?.port())
}

/// The runtime address of `vaddr` of `bin` in process `pid`, through the `PT_LOAD` that holds
/// it (`readelf -lW`) and the mapping of that file offset (`/proc/PID/maps`).
fn runtime_address(pid: u32, bin: &Path, vaddr: u64) -> Result<u64, String> {
    let segs = sh("readelf", &["-lW", &bin.to_string_lossy()])?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(err);
    let mut off = None;
    for l in segs.lines().filter(|l| l.trim_start().starts_with("LOAD")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (o, v, sz) = (hex(f[1])?, hex(f[2])?, hex(f[4])?);
        if vaddr >= v && vaddr < v + sz {
            off = Some(vaddr - v + o);
        }
    }
    let off = off.ok_or("no PT_LOAD holds the function")?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(err)?;
    let name = bin.to_string_lossy();
    for l in maps.lines().filter(|l| l.ends_with(name.as_ref())) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (range, map_off) = (f[0], hex(f[2])?);
        let (start, end) = range.split_once('-').ok_or("maps line")?;
        let (start, end) = (hex(start)?, hex(end)?);
        if off >= map_off && off < map_off + (end - start) {
            return Ok(start + off - map_off);
        }
    }
    Err("the program does not map that offset".into())
}

fn stripped_binary_gets_lines_from_a_local_debuginfod() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let served = dir.path().join("served");
    std::fs::create_dir(&served).map_err(err)?;
    let src = dir.path().join("app.c");
    let bin = dir.path().join("app");
    let debug = served.join("app.debug");
    std::fs::write(&src, SOURCE).map_err(err)?;
    let s = |p: &Path| p.to_string_lossy().into_owned();
    sh("cc", &["-g", "-O1", "-o", &s(&bin), &s(&src)])?;
    sh("objcopy", &["--only-keep-debug", &s(&bin), &s(&debug)])?;
    sh("strip", &["-g", &s(&bin)])?;
    let link = format!("--add-gnu-debuglink={}", s(&debug));
    sh("objcopy", &[&link, &s(&bin)])?;
    let id = {
        let bytes = std::fs::read(&bin).map_err(err)?;
        let view = netprobe_core::elf::parser::ElfView::parse(&bin, &bytes).map_err(err)?;
        let id = netprobe_core::debuginfo::build_id(&view).ok_or("no build-id")?;
        id.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let sections =
        netprobe_core::debuginfo::DebugSections::parse(&bin, &std::fs::read(&bin).map_err(err)?)
            .map_err(err)?;
    if sections.has_debug_info() {
        return Err("strip -g left .debug_info in the program".into());
    }

    // elfutils' server on a free loopback port, its database in the temporary folder.
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let server = Reaped(
        Command::new("debuginfod")
            .args(["-F", &s(&served), "-p", &port.to_string(), "-d"])
            .arg(dir.path().join("db.sqlite"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(err)?,
    );
    // Indexed when elfutils' own client gets the file (a fresh cache each time: it remembers
    // a miss for `cache_miss_s`, 10 minutes, in an empty file).
    let deadline = Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        let found = Command::new("debuginfod-find")
            .args(["debuginfo", &id])
            .env("DEBUGINFOD_URLS", &url)
            .env(
                "DEBUGINFOD_CACHE_PATH",
                dir.path().join(format!("find-cache-{attempt}")),
            )
            .output()
            .map_err(err)?;
        if found.status.success() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "debuginfod did not serve build-id {id} within 60 s: {}",
                e2e::text(&found.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    let mut child = Command::new(&bin)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let child = Reaped(child);
    let mut ready = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut ready)
        .map_err(err)?;
    let pid = child.0.id();
    let leaf = sh("nm", &[&s(&bin)])?
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == "leaf").then(|| u64::from_str_radix(f[0], 16).ok())?
        })
        .ok_or("nm lists no leaf")?;
    let vaddr = leaf + 4;
    let addr = runtime_address(pid, &bin, vaddr)?;
    let want = sh("addr2line", &["-e", &s(&debug), &format!("{vaddr:#x}")])?;
    let want = want.trim().split(" (discriminator").next().unwrap_or("");

    // With the server: name and line; the debug file in elfutils' cache layout.
    let cache = dir.path().join("cache");
    std::env::set_var("DEBUGINFOD_URLS", &url);
    std::env::set_var("DEBUGINFOD_CACHE_PATH", &cache);
    let mut sym = Symbolizer::new();
    let frames = sym.symbolize(pid, addr).map_err(err)?;
    let outer = frames.last().ok_or("no frame")?;
    let got = outer.source_line().unwrap_or_default();
    if outer.function.as_deref() != Some("leaf") || got != want {
        return Err(format!("frames {frames:?}: want leaf at {want}"));
    }
    if !cache.join(&id).join("debuginfo").is_file() {
        return Err(format!("no {}/{id}/debuginfo", cache.display()));
    }
    let notes = sym.take_notes();
    if !notes.is_empty() {
        return Err(format!("notes with the server up: {notes:?}"));
    }

    // Without it: no line, one note naming the build-id and the fix.
    drop(server);
    std::env::set_var("DEBUGINFOD_CACHE_PATH", dir.path().join("empty-cache"));
    let mut sym = Symbolizer::new();
    let frames = sym.symbolize(pid, addr).map_err(err)?;
    let again = sym.symbolize(pid, addr + 1).map_err(err)?;
    std::env::remove_var("DEBUGINFOD_URLS");
    std::env::remove_var("DEBUGINFOD_CACHE_PATH");
    let outer = frames.last().ok_or("no frame")?;
    if outer.function.as_deref() != Some("leaf") || outer.file.is_some() || again[0].file.is_some()
    {
        return Err(format!("frames without the server: {frames:?} {again:?}"));
    }
    let notes = sym.take_notes();
    match &notes[..] {
        [one] if one.contains(&id) && one.contains("DEBUGINFOD_URLS") && one.contains(&url) => {
            Ok(())
        }
        _ => Err(format!(
            "want one note naming build-id {id}, the fix and the server: {notes:?}"
        )),
    }
}

fn debuglink_files_are_found_and_checked() -> Result<(), String> {
    use netprobe_core::debuginfo::{locate, DebugOrigin, DebugSearch};
    let dir = tempfile::tempdir().map_err(err)?;
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let build = |name: &str, source: &str| -> Result<std::path::PathBuf, String> {
        let src = dir.path().join(format!("{name}.c"));
        let bin = dir.path().join(name);
        std::fs::write(&src, source).map_err(err)?;
        sh("cc", &["-g", "-O1", "-o", &s(&bin), &s(&src)])?;
        Ok(bin)
    };
    let bin = build("app", SOURCE)?;
    let other = build("other", &SOURCE.replace("x * 3 + 1", "x * 5 + 2"))?;
    let dot_debug = dir.path().join(".debug");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&dot_debug).map_err(err)?;
    std::fs::create_dir(&elsewhere).map_err(err)?;
    let debug = dot_debug.join("app.debug");
    sh("objcopy", &["--only-keep-debug", &s(&bin), &s(&debug)])?;
    sh("strip", &["-g", &s(&bin)])?;
    let mut linked = dir.path().join("linked");
    std::fs::copy(&bin, &linked).map_err(err)?;
    sh(
        "objcopy",
        &[&format!("--add-gnu-debuglink={}", s(&debug)), &s(&linked)],
    )?;
    let found = |image: &Path| {
        let bytes = std::fs::read(image).unwrap_or_default();
        locate(&bytes, image, &DebugSearch::host(image))
    };
    match found(&linked).found {
        Some((_, DebugOrigin::DebugLink(p))) if p == debug => {}
        other => return Err(format!("want {} by debuglink: {other:?}", debug.display())),
    }
    // One byte changed: the CRC-32 no longer matches.
    let good = std::fs::read(&debug).map_err(err)?;
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(&debug, &bad).map_err(err)?;
    let l = found(&linked);
    // No note: no debuginfod server was asked (a system's many images without debug files
    // would each get one).
    if l.found.is_some() || l.note.is_some() {
        return Err(format!("a debug file with the wrong CRC was used: {l:?}"));
    }
    // Another build's debug file, linked with its own CRC: the build-id differs.
    let other_debug = elsewhere.join("app.debug");
    sh(
        "objcopy",
        &["--only-keep-debug", &s(&other), &s(&other_debug)],
    )?;
    linked = dir.path().join("linked-other");
    std::fs::copy(&bin, &linked).map_err(err)?;
    sh(
        "objcopy",
        &[
            &format!("--add-gnu-debuglink={}", s(&other_debug)),
            &s(&linked),
        ],
    )?;
    std::fs::copy(&other_debug, &debug).map_err(err)?;
    let l = found(&linked);
    if l.found.is_some() {
        return Err(format!("another build's debug file was used: {l:?}"));
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "debuglink_files_are_found_and_checked",
            &[
                Need::CCompiler,
                Need::Program("objcopy"),
                Need::Program("strip"),
            ],
            debuglink_files_are_found_and_checked,
        ),
        e2e::trial(
            "stripped_binary_gets_lines_from_a_local_debuginfod",
            &[
                Need::CCompiler,
                Need::Program("debuginfod"),
                Need::Program("debuginfod-find"),
                Need::Program("objcopy"),
                Need::Program("strip"),
                Need::Program("addr2line"),
            ],
            stripped_binary_gets_lines_from_a_local_debuginfod,
        ),
    ])
}
