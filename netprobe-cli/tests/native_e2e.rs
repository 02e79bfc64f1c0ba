//! Live tracing of native ELF code on real uprobes (root, tracefs, a C compiler): a shared
//! library probed through a process that maps it, IFUNCs resolved to their implementation, a
//! binary in another mount namespace, arguments past the six registers of the System V ABI, a
//! NativeAOT-like `__managedcode` section (the segment formula hits; a `.text` formula could not
//! even be enabled), and a real NativeAOT library (its symbols as `nm -D` lists them, and hits).

use fixtures::e2e::{self, err, json_lines, succeeded, text, Need};
use fixtures::live::Waiting;
use fixtures::netprobe;
use fixtures::session::TRACEFS;
use netprobe_core::addr::FileOffset;
use serde_json::Value as Json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Group of the probes these tests write by hand (never netprobe's own `netprobe_*`).
const GROUP: &str = "nptest_golive";

type R = Result<(), String>;

/// The file offset of `name`'s first byte in `bin` (netprobe's resolver; the offsets themselves
/// are checked against objdump/addr2line/nm by the core's tests).
fn entry_offset(bin: &Path, name: &str) -> Result<FileOffset, String> {
    let t = netprobe_core::resolve::resolve_file(bin, name).map_err(err)?;
    match t.as_slice() {
        [one] => Ok(one.file_offset),
        _ => Err(format!("{name}: {} matches", t.len())),
    }
}

/// Appends one line to `uprobe_events` (never truncating it).
fn append_probe(line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(format!("{TRACEFS}/uprobe_events"))?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// `events/GROUP/EVENT/enable` ← 1, then 0 again; the error of the first write.
fn try_enable(event: &str) -> std::io::Result<()> {
    let path = format!("{TRACEFS}/events/{GROUP}/{event}/enable");
    std::fs::write(&path, "1")?;
    std::fs::write(&path, "0")
}

fn native_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        fixtures::CProgram::new("golive_native")
            .flags(&["-O2", "-pie", "-fPIE"])
            .build()
    })
    .clone()
}

const NATIVE_CALLS: i64 = 37;

fn start_native() -> Result<Waiting, String> {
    Waiting::start(Command::new(native_bin()).args(["stdin", &NATIVE_CALLS.to_string()]))
}

/// The runtime address the program printed for `key` on its ready line.
fn printed_addr(ready: &str, key: &str) -> Result<u64, String> {
    let v = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .ok_or(format!("no {key} in {ready:?}"))?;
    u64::from_str_radix(v.trim_start_matches("0x"), 16).map_err(err)
}

/// The file offset of runtime address `addr` in process `pid`, from its maps (by hand:
/// `addr - start + offset` of the mapping holding it), and that mapping's file name.
fn offset_in_maps(pid: u32, addr: u64) -> Result<(String, u64), String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(err)?;
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (s, e) = f[0].split_once('-').ok_or("bad maps")?;
        let (s, e) = (
            u64::from_str_radix(s, 16).map_err(err)?,
            u64::from_str_radix(e, 16).map_err(err)?,
        );
        if addr >= s && addr < e {
            let off = u64::from_str_radix(f[2], 16).map_err(err)?;
            let name = f.get(5).map(|p| p.rsplit('/').next().unwrap_or(p));
            return Ok((name.unwrap_or("").to_string(), addr - s + off));
        }
    }
    Err(format!("{addr:#x} is not mapped in {pid}"))
}

/// libc's malloc probed through the process (`libc.so.6:malloc`, and bare `malloc`, which
/// searches everything the process maps): the uprobe sits on libc's inode, the pid filter keeps
/// this process, the count equals its calls, sizes are exact.
fn shared_library_through_pid() -> R {
    for spec in ["libc.so.6:malloc", "malloc"] {
        let mut w = start_native()?;
        let pid = w.pid().to_string();
        let np = netprobe::Running::start(&[
            "trace",
            "--json",
            "-p",
            &pid,
            &format!("{spec} size=u64"),
        ])?;
        let done = w.go()?;
        if done.trim() != "done" {
            return Err(format!("program said {done:?}"));
        }
        w.finish();
        let (stdout, stderr) = np.wait()?;
        let hits = json_lines(stdout.as_bytes());
        let sizes: Vec<i64> = hits
            .iter()
            .map(|h| h["args"]["size"].as_i64().unwrap_or(-1))
            .collect();
        let want: Vec<i64> = (1..=NATIVE_CALLS).map(|i| 4000 + i).collect();
        if sizes != want {
            return Err(format!(
                "{spec}: sizes {sizes:?}, expected {want:?}: {stderr}"
            ));
        }
        if hits.iter().any(|h| h["pid"] != w_pid(&pid)) {
            return Err(format!("{spec}: hits of another process"));
        }
    }
    Ok(())
}

fn w_pid(pid: &str) -> Json {
    Json::from(pid.parse::<u64>().unwrap_or(0))
}

/// IFUNCs: libc's strlen and the program's own np_ifunc. netprobe says the probe would land on
/// the resolver and names the implementation the process bound, at the file offset the
/// program's own function pointer gives; a probe there counts every call.
fn ifunc_resolved_implementation() -> R {
    let mut w = start_native()?;
    let pid = w.pid();
    let bin = native_bin();
    let file = bin.file_name().unwrap().to_string_lossy().into_owned();
    let mut suggestions = Vec::new();
    for (spec, key, impl_name) in [
        ("libc.so.6:strlen", "strlen", None),
        (
            &*format!("{file}:np_ifunc"),
            "np_ifunc",
            Some("np_ifunc_wide"),
        ),
    ] {
        let out = succeeded(
            netprobe::output(&["count", "--dry-run", "-p", &pid.to_string(), spec])?,
            spec,
        )?;
        let stderr = text(&out.stderr);
        if !stderr.contains("is an IFUNC: the probe lands on its resolver") {
            return Err(format!("{spec}: no IFUNC warning: {stderr}"));
        }
        let (map_file, off) = offset_in_maps(pid, printed_addr(&w.ready, key)?)?;
        let want = format!("{map_file} at file offset {off:#x}");
        if !stderr.contains(&want) {
            return Err(format!("{spec}: expected {want:?} in: {stderr}"));
        }
        if let Some(n) = impl_name {
            if !stderr.contains(&format!("resolved to {n} (")) {
                return Err(format!("{spec}: implementation not named {n}: {stderr}"));
            }
        }
        suggestions.push(format!("{map_file}:{off:#x}"));
    }
    let np = netprobe::Running::start(&[
        "count",
        "--json",
        "-p",
        &pid.to_string(),
        &suggestions[0],
        &suggestions[1],
    ])?;
    w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let last = json_lines(stdout.as_bytes()).pop().ok_or("no output")?;
    let counts: Vec<i64> = last["counts"]
        .as_object()
        .ok_or("no counts")?
        .values()
        .map(|v| v.as_i64().unwrap_or(-1))
        .collect();
    // strlen's implementation may also be called by libc itself; the program calls it N times.
    if counts.len() != 2
        || counts.iter().any(|&c| c < NATIVE_CALLS)
        || !counts.contains(&NATIVE_CALLS)
    {
        return Err(format!("{last}: {stderr}"));
    }
    Ok(())
}

/// A native binary in another mount namespace, probed by file name through -p: counts exact.
fn native_in_other_mount_namespace() -> R {
    let bin = native_bin();
    let dir = tempfile::tempdir().map_err(err)?;
    let d = dir.path().display();
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs nptest_golive {d} && cp {} {d}/hidden-native && exec {d}/hidden-native stdin {NATIVE_CALLS}",
            bin.display()
        ));
    let mut w = Waiting::start(&mut cmd)?;
    let pid = w.pid().to_string();
    let np = netprobe::Running::start(&[
        "trace",
        "--json",
        "-p",
        &pid,
        "hidden-native:np_work i=s64",
        "r:hidden-native:np_work s64",
    ])?;
    w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let hits = json_lines(stdout.as_bytes());
    let args: Vec<i64> = hits
        .iter()
        .filter(|h| h["event"] == "entry")
        .map(|h| h["args"]["i"].as_i64().unwrap_or(-1))
        .collect();
    let rets: Vec<i64> = hits
        .iter()
        .filter(|h| h["event"] == "return")
        .map(|h| h["retval"].as_i64().unwrap_or(-1))
        .collect();
    let want: Vec<i64> = (1..=NATIVE_CALLS).collect();
    if args != want || rets != want.iter().map(|i| i * 7 + 1).collect::<Vec<_>>() {
        return Err(format!("args {args:?} rets {rets:?}: {stderr}"));
    }
    if !hits
        .first()
        .and_then(|h| h["image"].as_str())
        .is_some_and(|i| i.ends_with("/hidden-native"))
    {
        return Err(format!("image {:?}", hits.first()));
    }
    Ok(())
}

fn aot_lib() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        fixtures::CProgram::new("libnpaot")
            .flags(&[
                "-O2",
                "-shared",
                "-fPIC",
                "-Wl,--section-start=__managedcode=0x200000",
            ])
            .suffix(".so")
            .build()
    })
    .clone()
}

fn aot_host() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let lib = aot_lib();
        fixtures::CProgram::new("aothost")
            .with(&lib.display().to_string())
            .flags(&[
                "-O2",
                &format!("-Wl,-rpath,{}", lib.parent().unwrap().display()),
            ])
            .build()
    })
    .clone()
}

/// NativeAOT-like: exported entry points in `__managedcode` (its own PT_LOAD). netprobe's
/// offsets (segment formula) hit for real with exact arguments; the seed's `.text` formula's
/// offset is accepted by the kernel but cannot be enabled (EINVAL: past the end of the file).
fn nativeaot_managedcode_section() -> R {
    let lib = aot_lib();
    let bytes = std::fs::read(&lib).map_err(err)?;
    let elf = goblin::elf::Elf::parse(&bytes).map_err(err)?;
    let name = |sh: &goblin::elf::SectionHeader| elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("");
    let text_sh = elf
        .section_headers
        .iter()
        .find(|s| name(s) == ".text")
        .ok_or("no .text")?;
    let managed = elf
        .section_headers
        .iter()
        .find(|s| name(s) == "__managedcode")
        .ok_or("no __managedcode")?;
    let add = elf
        .dynsyms
        .iter()
        .find(|s| elf.dynstrtab.get_at(s.st_name) == Some("np_aot_add"))
        .ok_or("np_aot_add not exported in .dynsym")?;
    if add.st_value < managed.sh_addr || add.st_value >= managed.sh_addr + managed.sh_size {
        return Err("np_aot_add is not in __managedcode".into());
    }
    // The `.text` section formula, and the segment formula over the PT_LOAD holding the symbol.
    let seed = add.st_value - text_sh.sh_addr + text_sh.sh_offset;
    let seg = elf
        .program_headers
        .iter()
        .find(|p| {
            p.p_type == goblin::elf::program_header::PT_LOAD
                && add.st_value >= p.p_vaddr
                && add.st_value < p.p_vaddr + p.p_filesz
        })
        .ok_or("no PT_LOAD holds np_aot_add")?;
    let segment = add.st_value - seg.p_vaddr + seg.p_offset;
    let ours = entry_offset(&lib, "np_aot_add")?;
    if ours.0 != segment || seed == segment {
        return Err(format!(
            "netprobe {ours}, segment formula {segment:#x}, seed formula {seed:#x}"
        ));
    }
    // The seed's offset: the kernel takes the probe, enabling it fails with EINVAL.
    let line = format!("p:{GROUP}/aot_seed_text {}:{seed:#x}", lib.display());
    append_probe(&line).map_err(|e| format!("creating {line}: {e}"))?;
    let enabled = try_enable("aot_seed_text");
    let _ = append_probe(&format!("-:{GROUP}/aot_seed_text"));
    match enabled {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        other => {
            return Err(format!(
                "enabling the seed-formula probe at {seed:#x}: expected EINVAL, got {other:?}"
            ))
        }
    }
    // netprobe's offset: real hits with exact arguments, through the host process.
    let mut w = Waiting::start(Command::new(aot_host()).arg(NATIVE_CALLS.to_string()))?;
    let pid = w.pid().to_string();
    // The library by its file name, as the process maps it.
    let lib_name = lib.file_name().unwrap().to_string_lossy().into_owned();
    let np = netprobe::Running::start(&[
        "trace",
        "--json",
        "-p",
        &pid,
        &format!("{lib_name}:np_aot_add a=s32 b=s32"),
        &format!("r:{lib_name}:np_aot_scale s64"),
    ])?;
    w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let hits = json_lines(stdout.as_bytes());
    let adds: Vec<(i64, i64)> = hits
        .iter()
        .filter(|h| h["function"] == "np_aot_add")
        .map(|h| {
            (
                h["args"]["a"].as_i64().unwrap_or(-1),
                h["args"]["b"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let scales: Vec<i64> = hits
        .iter()
        .filter(|h| h["function"] == "np_aot_scale")
        .map(|h| h["retval"].as_i64().unwrap_or(-1))
        .collect();
    let want_adds: Vec<(i64, i64)> = (1..=NATIVE_CALLS).map(|i| (i, 100 * i)).collect();
    let want_scales: Vec<i64> = (1..=NATIVE_CALLS).map(|i| 3 * i).collect();
    if adds != want_adds || scales != want_scales {
        return Err(format!("adds {adds:?} scales {scales:?}: {stderr}"));
    }
    Ok(())
}

/// A C function with eight integer arguments (`fixtures/c/stackargs.c`): the 7th and 8th are
/// on the stack at entry (System V AMD64 ABI 3.2.3) and come out equal to the values passed, for
/// every call; a probe inside the function (not at its first byte, where the stack offset is
/// unknown) with stack arguments is refused with the reason.
fn c_arguments_past_six_registers() -> R {
    const CALLS: i64 = 29;
    let bin = fixtures::CProgram::new("stackargs").flags(&["-O2"]).build();
    let spec = format!(
        "{}:np_eight a=s64 b=s64 c=s64 d=s64 e=s64 f=s64 g=s64 h=s64",
        bin.display()
    );
    let mut w = Waiting::start(Command::new(&bin).arg(CALLS.to_string()))?;
    let pid = w.pid().to_string();
    let np = netprobe::Running::start(&["trace", "--json", "-p", &pid, &spec])?;
    w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let got: Vec<Vec<i64>> = json_lines(stdout.as_bytes())
        .iter()
        .filter(|h| h["event"] == "entry")
        .map(|h| {
            ["a", "b", "c", "d", "e", "f", "g", "h"]
                .iter()
                .map(|k| h["args"][*k].as_i64().unwrap_or(i64::MIN))
                .collect()
        })
        .collect();
    let want: Vec<Vec<i64>> = (1..=CALLS)
        .map(|i| vec![i, -i, 2 * i, -2 * i, 3 * i, -3 * i, 1000 + i, -1000 - i])
        .collect();
    if got != want {
        return Err(format!("got {got:?}; {stderr}"));
    }
    // Inside the function (after its first byte the stack pointer may have moved): refused
    // with the reason, exit status 1.
    let inside = entry_offset(&bin, "np_eight")?.0 + 4;
    let out = netprobe::output(&[
        "trace",
        "--dry-run",
        &format!(
            "{}:{inside:#x} a=s64 b=s64 c=s64 d=s64 e=s64 f=s64 g=s64",
            bin.display()
        ),
    ])?;
    if out.status.code() != Some(1) || !text(&out.stderr).contains("first byte") {
        return Err(format!("inside: {:?} {}", out.status, text(&out.stderr)));
    }
    Ok(())
}

/// ExcelReader.Native.so (PyPI excelreader-native 7.3.0, a .NET 10 NativeAOT library, fetched by
/// `sample-app/dotnet/fetch-net9-nativeaot.sh`).
fn real_nativeaot_lib() -> PathBuf {
    fixtures::cache_dir().join("nativeaot/ExcelReader.Native.so")
}

/// `symbols` on a real NativeAOT library: recognised by its module header (the note names the
/// `RTR` header and what can be probed), and every export `nm -D` lists is there at nm's
/// address, with the file offset of the PT_LOAD formula (program headers read by goblin).
fn nativeaot_real_library_symbols() -> R {
    let lib = real_nativeaot_lib();
    let out = netprobe::output(&["symbols", "--json", &lib.display().to_string()])?;
    let stderr = text(&out.stderr);
    if !out.status.success()
        || !stderr.contains(".NET NativeAOT image (module header 'RTR' 16.0")
        || !stderr.contains("managed method")
    {
        return Err(format!("{:?}: {stderr}", out.status));
    }
    let ours: std::collections::HashMap<String, (u64, u64)> = json_lines(&out.stdout)
        .iter()
        .filter_map(|s| {
            let hex = |v: &Json| u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok();
            Some((
                s["name"].as_str()?.split('@').next()?.to_string(),
                (hex(&s["address"]["value"])?, hex(&s["file_offset"])?),
            ))
        })
        .collect();
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .map_err(err)?;
    let bytes = std::fs::read(&lib).map_err(err)?;
    let elf = goblin::elf::Elf::parse(&bytes).map_err(err)?;
    let mut checked = 0;
    for line in text(&nm.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [addr, "T", name] = f.as_slice() else {
            continue;
        };
        let addr = u64::from_str_radix(addr, 16).map_err(err)?;
        let name = name.split('@').next().unwrap_or(name);
        let seg = elf
            .program_headers
            .iter()
            .find(|p| {
                p.p_type == goblin::elf::program_header::PT_LOAD
                    && addr >= p.p_vaddr
                    && addr < p.p_vaddr + p.p_filesz
            })
            .ok_or_else(|| format!("no PT_LOAD holds {name}"))?;
        let want = (addr, addr - seg.p_vaddr + seg.p_offset);
        if ours.get(name) != Some(&want) {
            return Err(format!(
                "{name}: nm/PT_LOAD say {want:x?}, netprobe {:x?}",
                ours.get(name)
            ));
        }
        checked += 1;
    }
    if checked < 50 {
        return Err(format!("only {checked} exports compared"));
    }
    Ok(())
}

/// A C host dlopens the real NativeAOT library and calls its export `xl_abi_version` 25 times:
/// 25 entry hits by name, 25 hits of a probe by offset inside the method (its `mov %ebx,%eax`
/// at 0x14908c, objdump), and 25 returns whose value is what the host got back.
fn nativeaot_real_library_hits() -> R {
    const CALLS: usize = 25;
    let lib = real_nativeaot_lib();
    let host = fixtures::CProgram::new("nativeaot_dlhost")
        .flags(&["-O2", "-ldl"])
        .build();
    let mut w = Waiting::start(
        Command::new(host)
            .arg(&lib)
            .args(["xl_abi_version", &CALLS.to_string()]),
    )?;
    let pid = w.pid().to_string();
    let l = lib.display().to_string();
    let np = netprobe::Running::start(&[
        "trace",
        "--json",
        "-p",
        &pid,
        &format!("{l}:xl_abi_version"),
        &format!("r:{l}:xl_abi_version s32"),
        &format!("{l}:0x14908c"),
    ])?;
    let done = w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let value: i64 = done
        .trim()
        .strip_prefix(&format!("done calls={CALLS} value="))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("host said {done:?}"))?;
    let hits = json_lines(stdout.as_bytes());
    let n = |event: &str, f: &str| {
        hits.iter()
            .filter(|h| h["event"] == event && h["function"] == f)
            .count()
    };
    let returns: Vec<&Json> = hits.iter().filter(|h| h["event"] == "return").collect();
    if n("entry", "xl_abi_version@@V1.0") != CALLS
        || n("entry", "ExcelReader.Native.so+0x14908c") != CALLS
        || returns.len() != CALLS
        || returns.iter().any(|h| h["retval"] != value)
    {
        return Err(format!("hits {hits:?}: {stderr}"));
    }
    Ok(())
}

fn main() {
    let cc = e2e::live(&[Need::CCompiler]);
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        native_bin();
        aot_host();
    }
    e2e::run(vec![
        e2e::trial(
            "shared_library_through_pid",
            &cc,
            shared_library_through_pid,
        ),
        e2e::trial(
            "ifunc_resolved_implementation",
            &cc,
            ifunc_resolved_implementation,
        ),
        e2e::trial(
            "native_in_other_mount_namespace",
            &e2e::live(&[Need::CCompiler, Need::Program("unshare")]),
            native_in_other_mount_namespace,
        ),
        e2e::trial(
            "nativeaot_managedcode_section",
            &cc,
            nativeaot_managedcode_section,
        ),
        e2e::trial(
            "c_arguments_past_six_registers",
            &cc,
            c_arguments_past_six_registers,
        ),
        e2e::trial(
            "nativeaot_real_library_symbols",
            &[Need::Program("nm"), Need::Path(real_nativeaot_lib())],
            nativeaot_real_library_symbols,
        ),
        e2e::trial(
            "nativeaot_real_library_hits",
            &e2e::live(&[Need::CCompiler, Need::Path(real_nativeaot_lib())]),
            nativeaot_real_library_hits,
        ),
    ]);
}
