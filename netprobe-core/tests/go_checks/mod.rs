//! What the Go end-to-end tests share (`go_readers`, `go_third_party_binaries`,
//! `go_toolchain_matrix`, `go_probe_safety`): the Go readers' functions, lines, offsets, RETs
//! and prologues compared with tools we did not write (`.symtab` read with goblin, `go tool nm`,
//! `go tool addr2line`, `objdump -d`). A module of each of those test targets; each uses part
//! of it.
#![allow(dead_code)]

use fixtures::e2e::err;
use goblin::elf::sym::STT_FUNC;
use goblin::elf::Elf;
use netprobe_core::golang::moduledata::{find_moduledata, LinkImage, TableFacts};
use netprobe_core::golang::{GoBinary, GoFunction, PclntabVersion};
use netprobe_core::symbol::{Address, SymbolKind, SymbolOrigin, SymbolSource};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub mod arm64;

pub type R = Result<(), String>;

pub const DEBIAN_GO: [&str; 3] = ["/usr/sbin/dockerd", "/usr/bin/containerd", "/usr/sbin/runc"];

pub fn with_binary(path: &Path, check: impl FnOnce(&GoBinary<'_>) -> R) -> R {
    let bytes = std::fs::read(path).map_err(err)?;
    let bin = GoBinary::parse(path, &bytes)
        .map_err(err)?
        .ok_or_else(|| format!("{}: not recognised as a Go binary", path.display()))?;
    check(&bin).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether a `.symtab`/`go tool nm` name is the pclntab's name for the same function: equal, or
/// the ELF symbol of an assembly function (`NAME.abi0`), or equal once every bracketed group is
/// written `[...]`, as the pclntab writes type parameters and array lengths
/// (`(*nistCurve[go.shape.*uint8_0]).Params`, `type..eq.[5]internal/cpu.option`).
pub fn same_go_name(pcln: &str, sym: &str) -> bool {
    if pcln == sym || sym.strip_suffix(".abi0") == Some(pcln) {
        return true;
    }
    // Every bracketed group written `[...]`, on both sides: the pclntab writes some instantiations
    // in full (`type:.eq.net.result[int]·1`, Go 1.21+ under external linking).
    let brackets = |name: &str| {
        let mut normalized = String::with_capacity(name.len());
        let mut depth = 0usize;
        for c in name.chars() {
            match c {
                '[' => {
                    if depth == 0 {
                        normalized.push_str("[...]");
                    }
                    depth += 1;
                }
                ']' if depth > 0 => depth -= 1,
                _ if depth > 0 => {}
                _ => normalized.push(c),
            }
        }
        normalized
    };
    let normalized = brackets(sym);
    // The ELF symbol table writes the middle dot of compiler-generated names as `.`
    // (`type..eq.net.dialResult·1` in the pclntab is `type..eq.net.dialResult.1` there).
    let pcln = brackets(&pcln.replace('·', "."));
    normalized == pcln || normalized.strip_suffix(".abi0") == Some(pcln.as_str())
}

pub fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Function names `go tool addr2line` gives for `addrs`, in order.
pub fn addr2line(bin: &Path, addrs: &[u64]) -> Result<Vec<String>, String> {
    let mut child = Command::new("go")
        .args(["tool", "addr2line"])
        .arg(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(err)?;
    let _ = writer.join();
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<String> = text.lines().step_by(2).map(str::to_string).collect();
    if names.len() != addrs.len() {
        return Err(format!(
            "go tool addr2line answered {} of {} addresses: {}",
            names.len(),
            addrs.len(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(names)
}

/// A copy of `bin` in `dir` that Go 1.19's `go tool addr2line` reads right. It finds the table
/// only in a section named `.gopclntab` (it reads nothing from internally linked PIEs, whose
/// section is `.data.rel.ro.gopclntab`, nor from externally linked PIEs, which have none), it
/// takes 1.18+ entries relative to the `runtime.text` symbol or else to the start of `.text`
/// (wrong by the C code in front under external linking: it names dockerd's first function
/// `internal/cpu.processOptions`), and it does not know the 1.20 magic. So the copy gets a
/// `.gopclntab` section with the bytes we located, a `runtime.text` symbol at the header's
/// textStart when it has none, and the 1.20 magic rewritten to 1.18's (`debug/gosym` reads
/// `ver118` and `ver120` alike for names, entries and lines). Entries and textStart themselves
/// are checked without Go's reader: against `.symtab`, and by objdump showing each sampled
/// function's morestack block jump back to the entry we report.
pub fn go_readable_copy(bin: &Path, go: &GoBinary<'_>, dir: &Path) -> Result<PathBuf, String> {
    let loc = go.pclntab_location();
    let needs_section = loc.section.as_deref() != Some(".gopclntab");
    let needs_magic = go.pclntab().version() == PclntabVersion::Go120;
    let mut bytes = std::fs::read(bin).map_err(err)?;
    let needs_text_symbol = go.pclntab().version().entries_are_text_offsets() && {
        let elf = Elf::parse(&bytes).map_err(err)?;
        !elf.syms
            .iter()
            .any(|s| elf.strtab.get_at(s.st_name) == Some("runtime.text"))
    };
    if !needs_section && !needs_magic && !needs_text_symbol {
        return Ok(bin.to_path_buf());
    }
    let start = loc.file_offset.0 as usize;
    let table_len = go.pclntab().data().len();
    if needs_magic {
        bytes[start..start + 4].copy_from_slice(&PclntabVersion::Go118.magic().to_le_bytes());
    }
    let name = bin.file_name().ok_or("no file name")?;
    let out = dir.join(name);
    let src = dir.join("src.bin");
    std::fs::write(&src, &bytes).map_err(err)?;
    let mut objcopy = Command::new("objcopy");
    if needs_section {
        let table = dir.join("pclntab.bin");
        std::fs::write(&table, &bytes[start..start + table_len]).map_err(err)?;
        objcopy.arg(format!("--add-section=.gopclntab={}", table.display()));
    }
    if needs_text_symbol {
        objcopy.arg(format!("--add-symbol=runtime.text={:#x}", loc.text_start));
    }
    run(objcopy.arg(&src).arg(&out))?;
    Ok(out)
}

/// Every `step`-th function plus every `main.` one, with a non-empty body.
pub fn sample<'a>(go: &GoBinary<'a>, step: usize) -> Vec<GoFunction<'a>> {
    go.functions()
        .enumerate()
        .filter(|(i, f)| (i % step == 0 || f.name.starts_with("main.")) && f.size() > 0)
        .map(|(_, f)| f)
        .collect()
}

/// `(address, instruction text)` of `objdump -d -M intel` over `[start, stop)`.
pub fn objdump(bin: &Path, start: u64, stop: u64) -> Result<Vec<(u64, String)>, String> {
    let text = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "intel", "-w"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={stop:#x}"))
        .arg(bin))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim_start().split_once(":\t")?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            Some((addr, rest.trim().to_string()))
        })
        .collect())
}

/// The post-prologue point as objdump's decoding shows it: after the first `jbe` that follows an
/// access to the stack guard `[G+0x10]` (G = r14, or a register loaded through `fs:`), before
/// anything moves RSP, calls or returns; the entry when there is none.
pub fn objdump_prologue_end(lines: &[(u64, String)], entry: u64) -> u64 {
    let mut g_regs = vec!["r14".to_string()];
    let mut guard = false;
    for (i, (_, text)) in lines.iter().take(10).enumerate() {
        let mnemonic = text.split_whitespace().next().unwrap_or("");
        let operands = text.split_whitespace().nth(1).unwrap_or("");
        if mnemonic == "push"
            || mnemonic == "call"
            || mnemonic == "ret"
            || mnemonic == "jmp"
            || (mnemonic == "sub" && operands.starts_with("rsp,"))
        {
            break;
        }
        if text.contains("fs:") && mnemonic == "mov" {
            if let Some(dst) = operands.split(',').next() {
                g_regs.push(dst.to_string());
            }
        }
        if g_regs
            .iter()
            .any(|g| text.contains(&format!("[{g}+0x10]")) || text.contains(&format!("[{g}+0x18]")))
        {
            guard = true;
        }
        if mnemonic == "jbe" && guard {
            return lines.get(i + 1).map_or(entry, |(a, _)| *a);
        }
    }
    entry
}

/// FUNC symbols by address: `(name, size)` for each.
pub fn elf_funcs<'a>(
    syms: impl Iterator<Item = goblin::elf::Sym>,
    strtab: &goblin::strtab::Strtab<'a>,
) -> HashMap<u64, Vec<(String, u64)>> {
    let mut by_addr: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    for s in syms.filter(|s| s.st_type() == STT_FUNC) {
        let name = strtab.get_at(s.st_name).unwrap_or("").to_string();
        by_addr
            .entry(s.st_value)
            .or_default()
            .push((name, s.st_size));
    }
    by_addr
}

/// Each pclntab function that has a FUNC symbol at its entry agrees with it on name and size, and
/// every sized FUNC symbol inside the Go text range is a pclntab function. Returns how many
/// pclntab functions had a symbol.
pub fn compare_with_elf_funcs(
    go: &GoBinary<'_>,
    by_addr: &HashMap<u64, Vec<(String, u64)>>,
    table: &str,
) -> Result<usize, String> {
    let mut matched = 0;
    for f in go.functions() {
        let Some(syms) = by_addr.get(&f.entry.0) else {
            continue;
        };
        matched += 1;
        // The dynamic symbol table names compiler-generated type functions by a hash
        // (`type..eq.internal/cpu.option` is `type..TcEUsQoV` in dockerd's .dynsym).
        let hashed_type = |name: &str| {
            table == "dynsym" && f.name.starts_with("type..") && name.starts_with("type..")
        };
        if !syms
            .iter()
            .any(|(name, _)| same_go_name(&f.name, name) || hashed_type(name))
        {
            return Err(format!(
                "{} at {:#x}: {table} names it {syms:?}",
                f.name, f.entry.0
            ));
        }
        if !syms.iter().any(|(_, size)| *size == f.size()) {
            return Err(format!(
                "{} at {:#x}: size {:#x}, {table} says {syms:?}",
                f.name,
                f.entry.0,
                f.size()
            ));
        }
    }
    let first = go.pclntab().entry(0).ok_or("no first entry")?.0;
    let end = go.pclntab().end_of_text().ok_or("no end")?.0;
    let entries: std::collections::HashSet<u64> = go.functions().map(|f| f.entry.0).collect();
    for (addr, syms) in by_addr {
        if (first..end).contains(addr)
            && syms.iter().any(|(_, s)| *s > 0)
            && !entries.contains(addr)
        {
            return Err(format!(
                "{table} FUNC {syms:?} at {addr:#x} is not in the pclntab"
            ));
        }
    }
    Ok(matched)
}

/// [`check_against_go_tool_nm`] with the `go` command `go_cmd` (a fetched toolchain's).
pub fn check_against_nm_of(mut go_cmd: Command, path: &Path, go: &GoBinary<'_>) -> R {
    let out = go_cmd
        .args(["tool", "nm"])
        .arg(path)
        .output()
        .map_err(err)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || stdout.trim().is_empty() {
        // Stripped: go tool nm says "no symbols"; that is what the variant tests.
        let stderr = String::from_utf8_lossy(&out.stderr);
        return if path.to_string_lossy().contains("stripped") && stderr.contains("no symbols") {
            Ok(())
        } else {
            Err(format!("go tool nm failed: {stderr}"))
        };
    }
    let mut by_addr: HashMap<u64, Vec<String>> = HashMap::new();
    for line in stdout.lines() {
        let mut parts = line.trim_start().splitn(3, ' ');
        let (Some(addr), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if kind == "T" || kind == "t" {
            if let Ok(a) = u64::from_str_radix(addr, 16) {
                by_addr.entry(a).or_default().push(name.to_string());
            }
        }
    }
    for f in go.functions() {
        let names = by_addr.get(&f.entry.0).ok_or_else(|| {
            format!(
                "{} at {:#x}: go tool nm has no text symbol there",
                f.name, f.entry.0
            )
        })?;
        if !names.iter().any(|n| same_go_name(&f.name, n)) {
            return Err(format!(
                "{} at {:#x}: go tool nm says {names:?}",
                f.name, f.entry.0
            ));
        }
    }
    Ok(())
}

/// Go's own reader maps each sampled function's entry and last code byte to the same name.
pub fn check_against_addr2line(path: &Path, go: &GoBinary<'_>, step: usize) -> R {
    let dir = tempfile::tempdir().map_err(err)?;
    let readable = go_readable_copy(path, go, dir.path())?;
    let funcs = sample(go, step);
    let mut addrs = Vec::new();
    for f in &funcs {
        addrs.push(f.entry.0);
        addrs.push(f.code_end().0 - 1);
    }
    let names = addr2line(&readable, &addrs)?;
    for (i, f) in funcs.iter().enumerate() {
        for (what, got) in [("entry", &names[2 * i]), ("last byte", &names[2 * i + 1])] {
            if got != &f.name {
                return Err(format!(
                    "{} ({what} of {:#x}..{:#x}): go tool addr2line says {got}",
                    f.name,
                    f.entry.0,
                    f.code_end().0
                ));
            }
        }
    }
    Ok(())
}

/// For code in `.text`, every file offset equals the section formula
/// `entry - sh_addr + sh_offset` (an independent route: section headers, not `PT_LOAD`), and the
/// Symbol the source yields carries it.
pub fn check_file_offsets(path: &Path, go: &GoBinary<'_>, step: usize) -> R {
    let bytes = std::fs::read(path).map_err(err)?;
    let elf = Elf::parse(&bytes).map_err(err)?;
    let text = elf
        .section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(".text"))
        .ok_or("no .text")?;
    let symbols = go.symbols().map_err(err)?;
    let mut checked = 0;
    for (i, (f, s)) in go.functions().zip(&symbols).enumerate() {
        if i % step != 0 {
            continue;
        }
        if s.kind != SymbolKind::GoFunction
            || s.origin != SymbolOrigin::GoPclntab
            || s.address != Address::Virt(f.entry)
            || s.name != f.name
        {
            return Err(format!("symbol {s:?} does not describe {f:?}"));
        }
        if !(text.sh_addr..text.sh_addr + text.sh_size).contains(&f.entry.0) {
            continue;
        }
        let expected = f.entry.0 - text.sh_addr + text.sh_offset;
        if s.file_offset.map(|o| o.0) != Some(expected) {
            return Err(format!(
                "{} at {:#x}: file offset {:?}, .text formula says {expected:#x}",
                f.name, f.entry.0, s.file_offset
            ));
        }
        checked += 1;
    }
    if checked == 0 {
        return Err("no function checked".into());
    }
    Ok(())
}

pub fn check_rets_and_prologues(path: &Path, go: &GoBinary<'_>, funcs: &[GoFunction<'_>]) -> R {
    for f in funcs {
        let lines = objdump(path, f.entry.0, f.code_end().0)?;
        let p = go
            .probe_points(f)
            .ok_or_else(|| format!("{}: no code", f.name))?;
        let ours: Vec<u64> = p.rets.iter().map(|r| r.vaddr.0).collect();
        let theirs: Vec<u64> = lines
            .iter()
            .filter(|(_, t)| t.split_whitespace().next() == Some("ret"))
            .map(|(a, _)| *a)
            .collect();
        if ours != theirs {
            return Err(format!(
                "{}: RETs {ours:x?}, objdump shows {theirs:x?}",
                f.name
            ));
        }
        let expected = objdump_prologue_end(&lines, f.entry.0);
        if p.entry_probe.vaddr.0 != expected {
            return Err(format!(
                "{}: entry probe {:#x}, objdump's prologue ends at {expected:#x}: {:?}",
                f.name,
                p.entry_probe.vaddr.0,
                &lines[..lines.len().min(8)]
            ));
        }
        if let Some(check) = p.stack_check {
            // `jmp 4632a0 <runtime.call2097152.abi0>`, or `jmp 0x401000` without symbols.
            let entry = format!("{:x}", f.entry.0);
            let jumps_back = lines.iter().any(|(a, t)| {
                let mut words = t.split_whitespace();
                *a >= check.morestack_block.0
                    && words.next() == Some("jmp")
                    && words.next().map(|w| w.trim_start_matches("0x")) == Some(entry.as_str())
            });
            if !jumps_back {
                return Err(format!(
                    "{}: morestack block does not jump back to the entry",
                    f.name
                ));
            }
        }
        if p.entry_probe.file_offset.is_none() || p.rets.iter().any(|r| r.file_offset.is_none()) {
            return Err(format!("{}: a probe point has no file offset", f.name));
        }
    }
    Ok(())
}

/// The module data's `text` of a non-PIE build, found with the public locator over the file's
/// loadable segments (no relocations in an executable).
pub fn locate_moduledata(path: &Path, go: &GoBinary<'_>) -> Result<Option<u64>, String> {
    let bytes = std::fs::read(path).map_err(err)?;
    let elf = Elf::parse(&bytes).map_err(err)?;
    let segments = elf
        .program_headers
        .iter()
        .filter(|ph| ph.p_type == goblin::elf::program_header::PT_LOAD)
        .filter_map(|ph| {
            let data = bytes.get(ph.p_offset as usize..(ph.p_offset + ph.p_filesz) as usize)?;
            Some((ph.p_vaddr, data))
        })
        .collect();
    let h = go.pclntab().header();
    let facts = TableFacts {
        vaddr: go.pclntab_location().vaddr.ok_or("table has no address")?.0,
        ptr_size: h.ptr_size,
        nfunc: h.nfunc,
        funcname_offset: h.funcname_offset,
        pctab_offset: h.pctab_offset,
        functab_offset: h.functab_offset,
    };
    let image = LinkImage {
        segments,
        relative: HashMap::new(),
    };
    Ok(find_moduledata(&image, &facts).map(|md| md.text))
}
