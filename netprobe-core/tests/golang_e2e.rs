//! End-to-end checks of the Go readers on real binaries, against tools we did not write:
//! `.symtab` (read with goblin), `go tool nm`, `go tool addr2line` (Go's own pclntab reader),
//! `go version -m`, `objdump -d`, and the `.text` section formula.
//!
//! Binaries: the sample app in all six variants (built by `sample-app/go/build.sh`), Debian's
//! stripped dockerd/containerd/runc, esbuild builds by Go 1.15/1.16/1.17/1.20/1.26 fetched by
//! `scripts/fetch-go-binaries.sh` (every pclntab layout, and the zero header textStart of Go
//! 1.26+; all stripped), and the Go toolchain matrix: the sample app built by each Go release
//! 1.21..1.27 that `scripts/fetch-go-toolchains.sh` fetches, checked against that release's
//! `go tool nm`.

use fixtures::e2e::{self, err, Need};
use fixtures::go::{
    matrix_versions, sample_app_variants, sample_app_variants_by, third_party_go_dir, toolchain_go,
    MATRIX_VARIANTS, SAMPLE_VARIANTS, THIRD_PARTY_GO,
};
use goblin::elf::sym::STT_FUNC;
use goblin::elf::Elf;
use netprobe_core::addr::VirtAddr;
use netprobe_core::golang::moduledata::{find_moduledata, LinkImage, TableFacts};
use netprobe_core::golang::TextStartSource;
use netprobe_core::golang::{GSource, GoAbi, GoBinary, GoFunction, PclntabVersion};
use netprobe_core::symbol::{Address, SymbolKind, SymbolOrigin, SymbolSource};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

type R = Result<(), String>;

const DEBIAN_GO: [&str; 3] = ["/usr/sbin/dockerd", "/usr/bin/containerd", "/usr/sbin/runc"];

fn main() {
    let build = || vec![Need::Go, Need::CCompiler];
    let with = |extra: &[Need]| {
        let mut v = build();
        v.extend_from_slice(extra);
        v
    };
    let mut debian = vec![Need::Go, Need::Program("objcopy"), Need::Program("objdump")];
    debian.extend(DEBIAN_GO.iter().map(|p| Need::Path(p.into())));
    let mut esbuild = vec![Need::Go, Need::Program("objdump")];
    esbuild.extend(
        THIRD_PARTY_GO
            .iter()
            .map(|(f, _)| Need::Path(third_party_go_dir().join(f))),
    );
    e2e::run(
        vec![
            e2e::trial("sample_variants_agree_with_symtab", &build(), || {
                each_variant(check_against_symtab)
            }),
            e2e::trial("sample_variants_agree_with_go_tool_nm", &build(), || {
                each_variant(check_against_go_tool_nm)
            }),
            e2e::trial(
                "sample_variants_agree_with_go_tool_addr2line",
                &with(&[Need::Program("objcopy")]),
                || each_variant(|p, b| check_against_addr2line(p, b, 7)),
            ),
            e2e::trial(
                "extlink_pie_table_found_by_magic",
                &build(),
                extlink_pie_found_by_magic,
            ),
            e2e::trial("sample_version_and_module", &build(), || {
                each_variant(check_version_and_module)
            }),
            e2e::trial("sample_file_offsets_match_text_section", &build(), || {
                each_variant(|p, b| check_file_offsets(p, b, 1))
            }),
            e2e::trial(
                "sample_rets_and_prologues_match_objdump",
                &with(&[Need::Program("objdump")]),
                sample_rets_and_prologues,
            ),
            e2e::trial(
                "sample_main_functions_snapshot",
                &build(),
                sample_main_snapshot,
            ),
            e2e::trial("sample_module_data_agrees_with_header", &build(), || {
                each_variant(|path, go| {
                    if path.to_string_lossy().contains("pie") {
                        return Ok(()); // the locator over relocations runs in GoBinary itself
                    }
                    let md = locate_moduledata(path, go)?;
                    if md != Some(go.pclntab_location().text_start) {
                        return Err(format!(
                            "module data text {md:x?}: {:?}",
                            go.pclntab_location()
                        ));
                    }
                    Ok(())
                })
            }),
            e2e::trial("mutated_sample_never_panics", &build(), mutated_sample),
            e2e::trial("debian_stripped_go_binaries", &debian, debian_binaries),
            e2e::trial("esbuild_every_pclntab_layout", &esbuild, esbuild_layouts),
            e2e::trial("gate_passes_every_planned_probe::sample", &build(), || {
                let dir = sample_app_variants();
                SAMPLE_VARIANTS
                    .iter()
                    .try_for_each(|v| gate_passes_planned(&dir.join(v)))
            }),
            e2e::trial("gate_passes_every_planned_probe::esbuild", &esbuild, || {
                THIRD_PARTY_GO
                    .iter()
                    .try_for_each(|(f, _)| gate_passes_planned(&third_party_go_dir().join(f)))
            }),
            e2e::trial("gate_passes_every_planned_probe::debian", &debian, || {
                DEBIAN_GO
                    .iter()
                    .try_for_each(|p| gate_passes_planned(Path::new(p)))
            }),
            e2e::trial("gate_refuses_mutated_entries::sample", &build(), || {
                let dir = sample_app_variants();
                SAMPLE_VARIANTS
                    .iter()
                    .try_for_each(|v| gate_refuses_mutated_entries(&dir.join(v)))
            }),
            e2e::trial("gate_refuses_shifted_text_start::sample", &build(), || {
                let dir = sample_app_variants();
                ["sampleapp-default", "sampleapp-stripped"]
                    .iter()
                    .try_for_each(|v| gate_refuses_shifted_text_start(&dir.join(v)))
            }),
            e2e::trial("gate_refuses_mutated_entries::esbuild", &esbuild, || {
                THIRD_PARTY_GO.iter().try_for_each(|(f, _)| {
                    gate_refuses_mutated_entries(&third_party_go_dir().join(f))
                })
            }),
        ]
        .into_iter()
        .chain(matrix_versions().into_iter().map(|version| {
            e2e::trial(
                &format!("go_toolchain_matrix::{version}"),
                &[
                    Need::Path(toolchain_go(version)),
                    Need::CCompiler,
                    Need::Program("objdump"),
                ],
                move || toolchain_matrix(version),
            )
        }))
        .collect(),
    );
}

// ---------------------------------------------------------------------------------------------
// helpers

fn each_variant(check: impl Fn(&Path, &GoBinary<'_>) -> R) -> R {
    let dir = sample_app_variants();
    for v in SAMPLE_VARIANTS {
        let path = dir.join(v);
        let bytes = std::fs::read(&path).map_err(err)?;
        let bin = GoBinary::parse(&path, &bytes)
            .map_err(err)?
            .ok_or_else(|| format!("{v}: not recognised as a Go binary"))?;
        check(&path, &bin).map_err(|e| format!("{v}: {e}"))?;
    }
    Ok(())
}

fn with_binary(path: &Path, check: impl FnOnce(&GoBinary<'_>) -> R) -> R {
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
fn same_go_name(pcln: &str, sym: &str) -> bool {
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

fn run(cmd: &mut Command) -> Result<String, String> {
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
fn addr2line(bin: &Path, addrs: &[u64]) -> Result<Vec<String>, String> {
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
fn go_readable_copy(bin: &Path, go: &GoBinary<'_>, dir: &Path) -> Result<PathBuf, String> {
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
fn sample<'a>(go: &GoBinary<'a>, step: usize) -> Vec<GoFunction<'a>> {
    go.functions()
        .enumerate()
        .filter(|(i, f)| (i % step == 0 || f.name.starts_with("main.")) && f.size() > 0)
        .map(|(_, f)| f)
        .collect()
}

/// `(address, instruction text)` of `objdump -d -M intel` over `[start, stop)`.
fn objdump(bin: &Path, start: u64, stop: u64) -> Result<Vec<(u64, String)>, String> {
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
fn objdump_prologue_end(lines: &[(u64, String)], entry: u64) -> u64 {
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

// ---------------------------------------------------------------------------------------------
// checks

/// Every pclntab function is a `.symtab` FUNC symbol with the same entry, the same size, and the
/// same name; every FUNC symbol inside the Go text range is a pclntab function. Stripped variants
/// have no `.symtab`: nothing to compare (the addr2line check covers them).
fn check_against_symtab(path: &Path, go: &GoBinary<'_>) -> R {
    let bytes = std::fs::read(path).map_err(err)?;
    let elf = Elf::parse(&bytes).map_err(err)?;
    if elf.syms.is_empty() {
        return Ok(());
    }
    let table = elf_funcs(elf.syms.iter(), &elf.strtab);
    let matched = compare_with_elf_funcs(go, &table, "symtab")?;
    let n = go.functions().count();
    if matched != n || n < 1000 {
        return Err(format!("{matched} of {n} functions have a symtab symbol"));
    }
    Ok(())
}

/// FUNC symbols by address: `(name, size)` for each.
fn elf_funcs<'a>(
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
fn compare_with_elf_funcs(
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

/// On builds with a symbol table, `go tool nm`'s text symbols name every pclntab entry.
fn check_against_go_tool_nm(path: &Path, go: &GoBinary<'_>) -> R {
    check_against_nm_of(Command::new("go"), path, go)
}

/// [`check_against_go_tool_nm`] with the `go` command `go_cmd` (a fetched toolchain's).
fn check_against_nm_of(mut go_cmd: Command, path: &Path, go: &GoBinary<'_>) -> R {
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
fn check_against_addr2line(path: &Path, go: &GoBinary<'_>, step: usize) -> R {
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

/// The externally linked PIE has no pclntab section; the table is found by its magic inside
/// `.data.rel.ro`, and its textStart is `runtime.text`, not the start of `.text`.
fn extlink_pie_found_by_magic() -> R {
    let path = sample_app_variants().join("sampleapp-extlink-pie");
    let bytes = std::fs::read(&path).map_err(err)?;
    let elf = Elf::parse(&bytes).map_err(err)?;
    let section = |name: &str| {
        elf.section_headers
            .iter()
            .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
    };
    if section(".gopclntab").is_some() || section(".data.rel.ro.gopclntab").is_some() {
        return Err(
            "the externally linked PIE has a pclntab section; the test lost its point".into(),
        );
    }
    let relro = section(".data.rel.ro").ok_or("no .data.rel.ro")?;
    let text = section(".text").ok_or("no .text")?;
    let runtime_text = elf
        .syms
        .iter()
        .find(|s| elf.strtab.get_at(s.st_name) == Some("runtime.text"))
        .ok_or("no runtime.text symbol")?
        .st_value;
    let go = GoBinary::parse(&path, &bytes)
        .map_err(err)?
        .ok_or("not found")?;
    let loc = go.pclntab_location();
    if loc.section.is_some() {
        return Err(format!("found in a section? {loc:?}"));
    }
    let at = loc.file_offset.0;
    if !(relro.sh_offset..relro.sh_offset + relro.sh_size).contains(&at) {
        return Err(format!("table at {at:#x} is outside .data.rel.ro"));
    }
    if loc.text_start != runtime_text || loc.text_start == text.sh_addr {
        return Err(format!(
            "textStart {:#x}: runtime.text is {runtime_text:#x}, .text starts at {:#x}",
            loc.text_start, text.sh_addr
        ));
    }
    if go.functions_named("main.(*Calc).Add").len() != 1 {
        return Err("main.(*Calc).Add not found".into());
    }
    Ok(())
}

/// Version and module from `.go.buildinfo` equal what `go version -m` prints.
fn check_version_and_module(path: &Path, go: &GoBinary<'_>) -> R {
    let text = run(Command::new("go").args(["version", "-m"]).arg(path))?;
    let mut lines = text.lines();
    let first = lines.next().ok_or("empty go version output")?;
    let version = first.rsplit(' ').next().ok_or("no version")?;
    let got = go.version().ok_or("no version found")?;
    if got.raw != version {
        return Err(format!("version {got} vs go version's {version}"));
    }
    let module = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("mod\t"))
        .and_then(|l| l.split('\t').next());
    if go.module_path() != module || module != Some("netprobe.example/sampleapp") {
        return Err(format!(
            "module {:?} vs go version -m's {module:?}",
            go.module_path()
        ));
    }
    if go.abi() != GoAbi::Register {
        return Err("Go 1.19 must use the register ABI".into());
    }
    Ok(())
}

/// For code in `.text`, every file offset equals the section formula
/// `entry - sh_addr + sh_offset` (an independent route: section headers, not `PT_LOAD`), and the
/// Symbol the source yields carries it.
fn check_file_offsets(path: &Path, go: &GoBinary<'_>, step: usize) -> R {
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

/// RET addresses and the post-prologue point of every `main.` function and a sample of others
/// equal what objdump's disassembly shows, in every variant; plus the facts the sample app was
/// written for.
fn sample_rets_and_prologues() -> R {
    each_variant(|path, go| {
        check_rets_and_prologues(path, go, &sample(go, 61))?;
        let one = |name: &str| {
            go.functions_named(name)
                .into_iter()
                .next()
                .ok_or_else(|| format!("{name} missing"))
        };
        let classify = go.probe_points(&one("main.Classify")?).ok_or("no code")?;
        if classify.rets.len() != 4 {
            return Err(format!(
                "main.Classify has {} RETs, wanted 4",
                classify.rets.len()
            ));
        }
        for (name, with_check) in [
            ("main.BigFrame", true),
            ("main.Recurse", true),
            ("main.workload", true),
            ("main.Add3", false),
            ("main.(*Calc).Add", false),
        ] {
            let p = go.probe_points(&one(name)?).ok_or("no code")?;
            if p.stack_check.is_some() != with_check {
                return Err(format!("{name}: stack check {:?}", p.stack_check));
            }
            if let Some(c) = p.stack_check {
                if c.g_source != GSource::R14 || p.entry_probe.vaddr == p.entry.vaddr {
                    return Err(format!("{name}: {c:?}"));
                }
            }
        }
        Ok(())
    })
}

fn check_rets_and_prologues(path: &Path, go: &GoBinary<'_>, funcs: &[GoFunction<'_>]) -> R {
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

/// The sample app's own functions in the default variant: entry, size, file offset, the probe
/// point after the prologue, RETs. Stable for one Go release (the build is reproducible).
fn sample_main_snapshot() -> R {
    let path = sample_app_variants().join("sampleapp-default");
    with_binary(&path, |go| {
        let version = go.version().ok_or("no version")?;
        let rows: Vec<serde_json::Value> = go
            .functions()
            .filter(|f| f.name.starts_with("main."))
            .map(|f| {
                let p = go.probe_points(&f);
                serde_json::json!({
                    "name": f.name,
                    "entry": f.entry,
                    "size": f.size(),
                    "file_offset": go.segments().code_file_offset(f.entry),
                    "entry_probe": p.as_ref().map(|p| p.entry_probe.vaddr),
                    "stack_check": p.as_ref().and_then(|p| p.stack_check.map(|c| c.g_source)),
                    "rets": p.as_ref().map(|p| p.rets.iter().map(|r| r.vaddr).collect::<Vec<_>>()),
                })
            })
            .collect();
        let snapshot = format!("sample_main_functions_{}", version.raw.replace('.', "_"));
        let result = std::panic::catch_unwind(|| {
            insta::assert_json_snapshot!(snapshot, rows);
        });
        result.map_err(|_| {
            "snapshot differs (see the diff above; review with cargo insta review)".to_string()
        })
    })
}

/// Random byte flips inside the table and the ELF headers of a real binary never panic the
/// reader, the function iterator or probe-point decoding (deterministic xorshift, 300 rounds).
fn mutated_sample() -> R {
    let path = sample_app_variants().join("sampleapp-stripped");
    let original = std::fs::read(&path).map_err(err)?;
    let loc = GoBinary::parse(&path, &original)
        .map_err(err)?
        .ok_or("not Go")?
        .pclntab_location()
        .clone();
    let table_at = loc.file_offset.0 as usize;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut parsed = 0;
    for _ in 0..300 {
        let mut bytes = original.clone();
        for _ in 0..(1 + next() % 16) {
            let r = next();
            let at = match r % 4 {
                0 => (next() % 4096) as usize,               // ELF/program headers
                1 => table_at + (next() % 128) as usize,     // table header
                _ => table_at + (next() % 0x40000) as usize, // functab, records, names
            };
            if let Some(b) = bytes.get_mut(at) {
                *b = next() as u8;
            }
        }
        if let Ok(Some(go)) = GoBinary::parse(&path, &bytes) {
            parsed += 1;
            for (i, f) in go.functions().enumerate() {
                if i % 50 == 0 {
                    let _ = go.probe_points(&f);
                }
            }
            let _ = go.functions_named("main.main");
            let _ = go.function_at(VirtAddr(0x40_1000));
            let _ = go.abi();
        }
    }
    if parsed == 0 {
        return Err("no mutated binary parsed at all; the test checked nothing".into());
    }
    Ok(())
}

/// Debian's stripped dockerd, containerd and runc: functions listed from the pclntab (dockerd's is
/// found by magic: externally linked PIE), names and extents as Go's addr2line reads them, file
/// offsets by the .text formula, RETs and prologues as objdump shows them.
fn debian_binaries() -> R {
    for bin in DEBIAN_GO {
        let path = Path::new(bin);
        with_binary(path, |go| {
            let text = run(Command::new("go").arg("version").arg(path))?;
            let version = go.version().ok_or("no version")?;
            if !text.trim().ends_with(&version.raw) {
                return Err(format!("version {version} vs `go version`: {text}"));
            }
            let n = go.functions().count();
            if n < 5000 {
                return Err(format!("only {n} functions"));
            }
            let serves_http = bin.ends_with("dockerd") || bin.ends_with("containerd");
            if serves_http && go.functions_named("net/http.(*conn).serve").len() != 1 {
                return Err("net/http.(*conn).serve not listed".into());
            }
            if bin.ends_with("dockerd") && go.pclntab_location().section.is_some() {
                return Err("dockerd's table should have been found by magic".into());
            }
            let bytes = std::fs::read(path).map_err(err)?;
            if bin.ends_with("dockerd") {
                table_named_by_moduledata_is_the_first_found(&bytes, go)?;
            }
            // Debian links dockerd and containerd with every Go symbol exported: their .dynsym
            // is a second, independent listing (runc exports only a few Go functions).
            let elf = Elf::parse(&bytes).map_err(err)?;
            let dynsym = elf_funcs(elf.dynsyms.iter(), &elf.dynstrtab);
            let matched = compare_with_elf_funcs(go, &dynsym, "dynsym")?;
            let wanted = if bin.ends_with("runc") { 1 } else { n * 9 / 10 };
            if matched < wanted {
                return Err(format!("only {matched} of {n} functions are in .dynsym"));
            }
            if serves_http {
                elf_only_functions_as_readelf_lists_them(path, go)?;
            }
            listed_the_same_without_section_headers(path)?;
            check_against_addr2line(path, go, 97)?;
            check_file_offsets(path, go, 13)?;
            check_rets_and_prologues(path, go, &sample(go, 1499))
        })?;
    }
    Ok(())
}

/// dockerd exports `runtime.firstmoduledata`: the table its first word points at (which netprobe
/// tries before searching) is the one netprobe lists, and the first magic in `.data.rel.ro`
/// (goblin's section headers) at which a table parses, as a search from the start finds it.
fn table_named_by_moduledata_is_the_first_found(bytes: &[u8], go: &GoBinary<'_>) -> R {
    let view =
        netprobe_core::elf::parser::ElfView::parse(Path::new("dockerd"), bytes).map_err(err)?;
    let segments = netprobe_core::elf::LoadSegments::from_program_headers(&view.program_headers);
    let named =
        netprobe_core::golang::moduledata::table_named_by_dynamic_symbol(&view, bytes, &segments);
    let elf = Elf::parse(bytes).map_err(err)?;
    let rel_ro = elf
        .section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(".data.rel.ro"))
        .ok_or("no .data.rel.ro")?;
    let (lo, hi) = (
        rel_ro.sh_offset as usize,
        (rel_ro.sh_offset + rel_ro.sh_size) as usize,
    );
    let searched = netprobe_core::golang::pclntab::parser::magic_candidates(&bytes[lo..hi])
        .into_iter()
        .find(|&at| netprobe_core::golang::Pclntab::parse(&bytes[lo + at..hi]).is_ok())
        .map(|at| (lo + at) as u64);
    let listed = go.pclntab_location().file_offset.0;
    if named != Some(listed) || searched != Some(listed) {
        return Err(format!(
            "table listed at {listed:#x}, named by the module data at {named:x?}, found first by \
             search at {searched:x?}"
        ));
    }
    Ok(())
}

/// The listing of a Go binary (`image::load_symbols`) adds each function of its `.dynsym` at an
/// address the Go table does not name (cgo's C code: `_cgo_*`, `x_cgo_*`, `crosscall2`), with
/// the address, size and name `readelf --dyn-syms` gives, and no other ELF function (those at
/// Go entries are the Go table's, and listed once).
fn elf_only_functions_as_readelf_lists_them(path: &Path, go: &GoBinary<'_>) -> R {
    let entries: std::collections::HashSet<u64> = go.functions().map(|f| f.entry.0).collect();
    let mut want = std::collections::BTreeSet::new();
    for line in run(Command::new("readelf").args(["--dyn-syms", "-W"]).arg(path))?.lines() {
        // `Num: Value Size Type Bind Vis Ndx Name`
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || f[3] != "FUNC" || f[6] == "UND" {
            continue;
        }
        let addr = u64::from_str_radix(f[1], 16).map_err(err)?;
        let size = match f[2].strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => f[2].parse(),
        }
        .map_err(err)?;
        if addr != 0 && !entries.contains(&addr) {
            want.insert((addr, size, f[7].to_string()));
        }
    }
    let got: std::collections::BTreeSet<(u64, u64, String)> =
        netprobe_core::image::load_symbols(path)
            .map_err(err)?
            .into_iter()
            .filter(|s| s.kind != SymbolKind::GoFunction)
            .map(|s| (s.address.value(), s.size.unwrap_or(0), s.name))
            .collect();
    if want.is_empty() || got != want {
        return Err(format!(
            "{}: ELF functions outside the Go table: listed {} (first {:?}), readelf {} (first {:?})",
            path.display(),
            got.len(),
            got.iter().next(),
            want.len(),
            want.iter().next()
        ));
    }
    Ok(())
}

/// A copy of `path` without section headers (`e_shoff`, `e_shnum`, `e_shstrndx` zeroed, as
/// `strip --remove-section-headers`-style tools leave a file; the ELF tables are then read from
/// the dynamic segment) lists the same symbols: in particular no `.dynsym` copy of a Go function.
fn listed_the_same_without_section_headers(path: &Path) -> R {
    let mut bytes = std::fs::read(path).map_err(err)?;
    bytes[0x28..0x30].fill(0);
    bytes[0x3c..0x40].fill(0);
    let dir = tempfile::tempdir().map_err(err)?;
    let copy = dir.path().join("no-section-headers");
    std::fs::write(&copy, &bytes).map_err(err)?;
    let want = netprobe_core::image::load_symbols(path).map_err(err)?;
    let got = netprobe_core::image::load_symbols(&copy).map_err(err)?;
    if got != want {
        return Err(format!(
            "{}: {} symbols without section headers, {} with them",
            path.display(),
            got.len(),
            want.len()
        ));
    }
    Ok(())
}

/// esbuild by Go 1.15 (1.2 layout), 1.16 and 1.17 (1.16 layout; stack vs register ABI), 1.20
/// (1.20 layout) and 1.26 (1.20 layout, header textStart zero): version, layout, ABI,
/// names/extents vs addr2line, RETs/prologues vs objdump (each sampled function's morestack
/// block jumps back to the entry we report, which a wrong text start would not give).
fn esbuild_layouts() -> R {
    let expected = [
        (PclntabVersion::Go12, GoAbi::Stack, GSource::Tls),
        (PclntabVersion::Go116, GoAbi::Stack, GSource::Tls),
        (PclntabVersion::Go116, GoAbi::Register, GSource::R14),
        (PclntabVersion::Go120, GoAbi::Register, GSource::R14),
        (PclntabVersion::Go120, GoAbi::Register, GSource::R14),
    ];
    for ((file, go_version), (layout, abi, g)) in THIRD_PARTY_GO.iter().zip(expected) {
        let path = third_party_go_dir().join(file);
        with_binary(&path, |go| {
            match go.version() {
                Some(version) if version.raw != *go_version => {
                    return Err(format!("version {version}, expected {go_version}"));
                }
                Some(_) => {}
                // No build info (esbuild 0.28): the runtime's version string must be there.
                None => {
                    let bytes = std::fs::read(&path).map_err(err)?;
                    let at = memchr::memmem::find(&bytes, go_version.as_bytes());
                    if at.is_none() || go.build_info().is_some() {
                        return Err(format!("no build info and no {go_version} string"));
                    }
                }
            }
            if go.pclntab().version() != layout || go.abi() != abi {
                return Err(format!(
                    "layout {} abi {}",
                    go.pclntab().version(),
                    go.abi()
                ));
            }
            if go.build_info().is_some() && go.module_path() != Some("github.com/evanw/esbuild") {
                return Err(format!("module {:?}", go.module_path()));
            }
            let main = go
                .functions_named("main.main")
                .into_iter()
                .next()
                .ok_or("no main.main")?;
            let check = go
                .probe_points(&main)
                .and_then(|p| p.stack_check)
                .ok_or("main.main has no stack check")?;
            if check.g_source != g {
                return Err(format!("main.main reads g from {:?}", check.g_source));
            }
            if abi == GoAbi::Stack {
                // `func Getenv(key string) string`: two words in, two out. Its body (objdump)
                // reads the key at 8/16(SP) and stores the result at 24/32(SP), both as at
                // entry: a 32-byte in/out area.
                let getenv = go
                    .functions_named("os.Getenv")
                    .into_iter()
                    .next()
                    .ok_or("no os.Getenv")?;
                if getenv.args_size != Some(32) {
                    return Err(format!("os.Getenv args size {:?}", getenv.args_size));
                }
            }
            // 1.18+ layouts: the module data found without symbols holds the same text start
            // (from the header for Go 1.20, the text start itself for Go 1.26).
            if layout >= PclntabVersion::Go118 {
                let md = locate_moduledata(&path, go)?;
                if md != Some(go.pclntab_location().text_start) {
                    return Err(format!(
                        "module data text {md:x?}, text start {:?}",
                        go.pclntab_location()
                    ));
                }
            }
            check_against_addr2line(&path, go, 23)?;
            check_rets_and_prologues(&path, go, &sample(go, 211))
        })?;
        // Without build info the ABI still follows: from the layout, and for the 1.16 layout
        // (Go 1.16 stack, 1.17 registers) from where the stack checks read g.
        let mut bytes = std::fs::read(&path).map_err(err)?;
        if let Some(at) = memchr::memmem::find(&bytes, b"\xff Go buildinf:") {
            bytes[at] = 0;
        }
        let go = GoBinary::parse(&path, &bytes)
            .map_err(err)?
            .ok_or("not Go")?;
        if go.version().is_some()
            || go.abi() != abi
            || go.version_lower_bound().minor != layout.oldest_go().1
        {
            return Err(format!(
                "{file} without build info: version {:?}, abi {}",
                go.version(),
                go.abi()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The probe-safety gate on real Go binaries

/// Every probe netprobe plans for every function of `path` (first byte, after the stack-check
/// prologue, each RET) passes the gate.
fn gate_passes_planned(path: &Path) -> R {
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest};
    let bytes = std::fs::read(path).map_err(err)?;
    let go = GoBinary::parse(path, &bytes)
        .map_err(err)?
        .ok_or_else(|| format!("{}: not Go", path.display()))?;
    let mut requests = Vec::new();
    for f in go.functions() {
        let Some(points) = go.probe_points(&f) else {
            continue;
        };
        let Some(entry) = points.entry.file_offset else {
            continue;
        };
        let planned = |o| ProbeRequest {
            offset: o,
            planned_entry: Some(entry),
            uretprobe: false,
        };
        requests.push(planned(entry));
        requests.extend(points.entry_probe.file_offset.map(planned));
        requests.extend(
            points
                .rets
                .iter()
                .filter_map(|r| r.file_offset)
                .map(planned),
        );
    }
    if requests.len() < 1000 {
        return Err(format!(
            "{}: only {} probe points",
            path.display(),
            requests.len()
        ));
    }
    let file = CodeFile::open(path).map_err(err)?;
    let refused: Vec<String> = requests
        .iter()
        .zip(file.check(&requests))
        .filter_map(|(q, r)| r.err().map(|e| format!("{}: {e}", q.offset)))
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "{}: {} of {} planned probes refused, e.g. {:?}",
            path.display(),
            refused.len(),
            requests.len(),
            &refused[..refused.len().min(3)]
        ));
    }
    Ok(())
}

/// Moves function `i`'s entry by `delta` bytes in both places the table states it
/// ([`netprobe_core::golang::Pclntab::entry_fields`]), so the table still parses.
fn move_entry(bytes: &mut [u8], go: &GoBinary<'_>, i: u64, delta: u64) -> R {
    let table = go.pclntab_location().file_offset.0;
    let (fields, size) = go.pclntab().entry_fields(i).ok_or("no entry fields")?;
    for f in fields {
        let at = (table + f) as usize;
        let word = bytes.get_mut(at..at + size).ok_or("out of bounds")?;
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(word);
        let moved = u64::from_le_bytes(v) + delta;
        word.copy_from_slice(&moved.to_le_bytes()[..size]);
    }
    Ok(())
}

/// A mutated image whose table puts a function's entry one byte into its first instruction
/// (every 97th function whose first instruction is longer than a byte, up to 25): the table
/// still parses, and the gate refuses every probe netprobe would plan from it (first byte,
/// post-prologue, RETs), never lets one through.
fn gate_refuses_mutated_entries(path: &Path) -> R {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let original = std::fs::read(path).map_err(err)?;
    let go = GoBinary::parse(path, &original)
        .map_err(err)?
        .ok_or("not Go")?;
    let mut tried = 0;
    for (i, f) in go.functions().enumerate().skip(1).step_by(97) {
        let Some(code) = go.code(&f) else { continue };
        let first = netprobe_core::x86::instructions(code, f.entry).next();
        if first.is_none_or(|ins| ins.len() < 2) {
            continue;
        }
        let mut bytes = original.clone();
        move_entry(&mut bytes, &go, i as u64, 1)?;
        let Some(mutated) = GoBinary::parse(path, &bytes).ok().flatten() else {
            continue; // refused at parse: nothing would be probed
        };
        let Some(g) = mutated.function_at(VirtAddr(f.entry.0 + 1)) else {
            return Err(format!("{}: mutated function not found", f.name));
        };
        if g.entry.0 != f.entry.0 + 1 || g.name != f.name {
            return Err(format!("{}: mutation did not move the entry", f.name));
        }
        let Some(points) = mutated.probe_points(&g) else {
            continue;
        };
        let entry = points.entry.file_offset.ok_or("no offset")?;
        let requests: Vec<ProbeRequest> = [Some(points.entry), Some(points.entry_probe)]
            .into_iter()
            .flatten()
            .chain(points.rets.iter().copied())
            .filter_map(|p| p.file_offset)
            .map(|o| ProbeRequest {
                offset: o,
                planned_entry: Some(entry),
                uretprobe: false,
            })
            .collect();
        drop(mutated);
        let file = CodeFile::from_bytes(path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            match r {
                Ok(_) => {
                    return Err(format!(
                        "{}: probe at {} of {} (entry moved to {entry}) passed the gate",
                        path.display(),
                        q.offset,
                        f.name
                    ))
                }
                // Refused for what the mutation broke, not because the file went unreadable.
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
        return Err(format!(
            "{}: only {tried} functions mutated",
            path.display()
        ));
    }
    Ok(())
}

/// A table read with a wrong text start (the header's `textStart` moved by 16 bytes and by a
/// page, as a misread of Go 1.26's zero field would): every function's entry misses its code,
/// and the gate refuses every probe planned from it, even for functions whose shifted entry
/// happens to look like code. A shift that moves an entry out of the executable segments is
/// already rejected by the text-start rule (which then takes the right value from the module
/// data); at least one shift must get past it to the gate.
fn gate_refuses_shifted_text_start(path: &Path) -> R {
    use netprobe_core::bytes::FileBytes;
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let original = std::fs::read(path).map_err(err)?;
    let (field, start) = {
        let go = GoBinary::parse(path, &original)
            .map_err(err)?
            .ok_or("not Go")?;
        let h = go.pclntab().header();
        if !h.version.entries_are_text_offsets() || go.pclntab().text_start() == 0 {
            return Err(format!(
                "{}: not a 1.18+ table with a text start",
                path.display()
            ));
        }
        // `runtime/symtab.go` pcHeader: magic u32, pad1, pad2, minLC, ptrSize u8, nfunc int,
        // nfiles uint, textStart uintptr.
        let at = go.pclntab_location().file_offset.0 as usize + 8 + 2 * usize::from(h.ptr_size);
        (at, go.pclntab().text_start())
    };
    let (mut caught_by_rule, mut reached_gate) = (0, 0);
    for shift in [0x10u64, 0x1000] {
        let mut bytes = original.clone();
        bytes[field..field + 8].copy_from_slice(&(start + shift).to_le_bytes());
        let go = GoBinary::parse(path, &bytes)
            .map_err(err)?
            .ok_or("not Go")?;
        if go.pclntab().text_start() != start + shift {
            // The text-start rule itself rejected the shifted header word (a function entry
            // left the executable segments) and took the value from another source: nothing
            // wrong can be planned from it.
            if go.pclntab().text_start() != start {
                return Err(format!(
                    "shift {shift:#x}: text start {:#x}, neither the shifted {:#x} nor the right {start:#x}",
                    go.pclntab().text_start(),
                    start + shift
                ));
            }
            caught_by_rule += 1;
            continue;
        }
        reached_gate += 1;
        let mut requests = Vec::new();
        for f in go.functions().filter(|f| f.name.starts_with("main.")) {
            let Some(p) = go.probe_points(&f) else {
                continue;
            };
            let Some(entry) = p.entry.file_offset else {
                continue;
            };
            requests.extend(
                [p.entry, p.entry_probe]
                    .iter()
                    .chain(&p.rets)
                    .filter_map(|q| q.file_offset)
                    .map(|o| ProbeRequest {
                        offset: o,
                        planned_entry: Some(entry),
                        uretprobe: false,
                    }),
            );
        }
        if requests.len() < 10 {
            return Err(format!(
                "shift {shift:#x}: only {} probes planned",
                requests.len()
            ));
        }
        drop(go);
        let file = CodeFile::from_bytes(path, FileBytes::Owned(bytes));
        for (q, r) in requests.iter().zip(file.check(&requests)) {
            if !matches!(r, Err(Refusal::PclntabMisaligned { .. })) {
                return Err(format!(
                    "{} shifted by {shift:#x}: probe at {} not refused as misaligned: {r:?}",
                    path.display(),
                    q.offset
                ));
            }
        }
    }
    // The small shift keeps every entry inside the code, so the rule takes it and only the
    // gate's alignment check can tell.
    if reached_gate == 0 {
        return Err(format!(
            "{}: every shift was caught by the text-start rule ({caught_by_rule}); the gate's check was not exercised",
            path.display()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Go toolchain matrix

/// `go` of the fetched toolchain `version`, ready to run (`GOROOT`, `GOTOOLCHAIN=local`).
fn toolchain_cmd(version: &str) -> Command {
    let go = toolchain_go(version);
    let mut cmd = Command::new(&go);
    if let Some(root) = go.parent().and_then(Path::parent) {
        cmd.env("GOROOT", root).env("GOTOOLCHAIN", "local");
    }
    cmd
}

/// The sample app built by Go `version` in every matrix variant:
/// - the text start comes from where that release puts it: the header (or, in the PIE, its
///   relocation) before Go 1.26, the module data from 1.26 on (`runtime/symtab.go`, `pcHeader`);
/// - where the header has it, the module data found without symbols says the same;
/// - unstripped builds: every function is a text symbol of that release's `go tool nm` at the same
///   address; the stripped build lists exactly the default build's functions (the same link);
/// - every function's file offset is the `PT_LOAD` formula over the executable segment holding
///   it (computed here from the program headers, as `readelf -l` shows them);
/// - `main.` functions: RETs and post-prologue points as objdump shows them, the morestack block
///   jumping back to the entry.
fn toolchain_matrix(version: &str) -> R {
    let dir = sample_app_variants_by(version);
    let minor: u32 = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .ok_or("bad version")?;
    let default_bytes = std::fs::read(dir.join("sampleapp-default")).map_err(err)?;
    let default = GoBinary::parse("sampleapp-default", &default_bytes)
        .map_err(err)?
        .ok_or("default: not Go")?;
    let default_funcs: Vec<(String, u64, u64)> = default
        .functions()
        .map(|f| (f.name.to_string(), f.entry.0, f.size()))
        .collect();
    for variant in MATRIX_VARIANTS {
        let path = dir.join(variant);
        with_binary(&path, |go| {
            let want = format!("go{version}");
            if go.version().map(|v| v.raw) != Some(want.clone()) {
                return Err(format!("version {:?}, built by {want}", go.version()));
            }
            let loc = go.pclntab_location();
            let header_zero = go.pclntab().header().text_start_field == Some(0);
            match (minor >= 26, loc.text_start_source) {
                (true, TextStartSource::ModuleData { .. }) if header_zero => {}
                (false, TextStartSource::Header) if !header_zero => {}
                (false, TextStartSource::Relocation) if variant.contains("pie") => {}
                (_, other) => {
                    return Err(format!(
                        "text start {:#x} from {other:?} (header word {:?})",
                        loc.text_start,
                        go.pclntab().header().text_start_field
                    ))
                }
            }
            if !variant.contains("pie") && loc.text_start_source == TextStartSource::Header {
                let md = locate_moduledata(&path, go)?;
                if md != Some(loc.text_start) {
                    return Err(format!(
                        "module data says text {md:x?}, the header {:#x}",
                        loc.text_start
                    ));
                }
            }
            if variant.contains("stripped") {
                let funcs: Vec<(String, u64, u64)> = go
                    .functions()
                    .map(|f| (f.name.to_string(), f.entry.0, f.size()))
                    .collect();
                if funcs != default_funcs {
                    return Err("functions differ from the unstripped build's".into());
                }
            } else {
                check_against_nm_of(toolchain_cmd(version), &path, go)?;
            }
            check_segment_formula(&path, go)?;
            let mains: Vec<GoFunction<'_>> = go
                .functions()
                .filter(|f| f.name.starts_with("main."))
                .collect();
            if mains.len() < 10 {
                return Err(format!("only {} main. functions", mains.len()));
            }
            check_rets_and_prologues(&path, go, &mains)?;
            // (In a PIE the relocation, not the file's word, carries the pointer.)
            if let TextStartSource::ModuleData { moduledata_vaddr } = loc.text_start_source {
                if !variant.contains("pie") {
                    check_without_moduledata(&path, go, moduledata_vaddr)?;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// With the module data's pointer to the table zeroed in a copy: a build with a symbol table
/// takes the same text start from `runtime.text`; a stripped one lists no function at all and
/// says why (never offsets posing as addresses).
fn check_without_moduledata(path: &Path, go: &GoBinary<'_>, moduledata_vaddr: u64) -> R {
    let mut bytes = std::fs::read(path).map_err(err)?;
    let at = go
        .segments()
        .file_offset(VirtAddr(moduledata_vaddr))
        .ok_or("module data not in the file")?
        .0 as usize;
    bytes[at..at + 8].fill(0);
    let stripped = path.to_string_lossy().contains("stripped");
    match GoBinary::parse(path, &bytes) {
        Ok(Some(again)) if !stripped => {
            let loc = again.pclntab_location();
            if loc.text_start_source != TextStartSource::RuntimeTextSymbol
                || loc.text_start != go.pclntab_location().text_start
            {
                return Err(format!("without module data: {loc:?}"));
            }
            Ok(())
        }
        Err(e) if stripped && e.to_string().contains("text start") => {
            let dir = tempfile::tempdir().map_err(err)?;
            let copy = dir.path().join("no-moduledata");
            std::fs::write(&copy, &bytes).map_err(err)?;
            let listed = netprobe_core::image::load_symbols(&copy);
            match listed {
                Err(e) if e.to_string().contains("text start") => Ok(()),
                other => Err(format!("load_symbols without module data: {other:?}")),
            }
        }
        other => Err(format!(
            "without module data (stripped: {stripped}): {:?}",
            other.map(|o| o.map(|g| g.pclntab_location().clone()))
        )),
    }
}

/// The module data's `text` of a non-PIE build, found with the public locator over the file's
/// loadable segments (no relocations in an executable).
fn locate_moduledata(path: &Path, go: &GoBinary<'_>) -> Result<Option<u64>, String> {
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

/// Every function's file offset is `vaddr - p_vaddr + p_offset` over the executable `PT_LOAD`
/// holding it.
fn check_segment_formula(path: &Path, go: &GoBinary<'_>) -> R {
    let bytes = std::fs::read(path).map_err(err)?;
    let elf = Elf::parse(&bytes).map_err(err)?;
    let exec: Vec<_> = elf
        .program_headers
        .iter()
        .filter(|ph| ph.p_type == goblin::elf::program_header::PT_LOAD && ph.is_executable())
        .collect();
    let symbols = go.symbols().map_err(err)?;
    for s in &symbols {
        let a = s.address.value();
        let ph = exec
            .iter()
            .find(|ph| (ph.p_vaddr..ph.p_vaddr + ph.p_filesz).contains(&a))
            .ok_or_else(|| format!("{} at {a:#x} is in no executable PT_LOAD", s.name))?;
        let want = a - ph.p_vaddr + ph.p_offset;
        if s.file_offset.map(|o| o.0) != Some(want) {
            return Err(format!(
                "{} at {a:#x}: file offset {:?}, PT_LOAD formula {want:#x}",
                s.name, s.file_offset
            ));
        }
    }
    Ok(())
}
