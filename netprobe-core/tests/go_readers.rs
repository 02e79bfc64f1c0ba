//! The Go readers on the Go sample app (`sample-app/go`, all six variants built by its
//! `build.sh`; needs Go and a C compiler, objcopy and objdump), checked against tools we did not
//! write: `.symtab` (read with goblin), `go tool nm`, `go tool addr2line` (Go's own pclntab
//! reader), `go version -m`, `objdump -d`, and the `.text` section formula; the module data
//! against the table header; a mutated binary never panics the reader.

mod go_checks;

use fixtures::e2e::{self, err, Need};
use fixtures::go::{sample_app_variants, SAMPLE_VARIANTS};
use go_checks::{
    check_against_addr2line, check_against_nm_of, check_file_offsets, check_rets_and_prologues,
    compare_with_elf_funcs, elf_funcs, locate_moduledata, run, sample, with_binary, R,
};
use goblin::elf::Elf;
use netprobe_core::addr::VirtAddr;
use netprobe_core::golang::{GSource, GoAbi, GoBinary};
use std::path::Path;
use std::process::Command;

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

/// On builds with a symbol table, `go tool nm`'s text symbols name every pclntab entry.
fn check_against_go_tool_nm(path: &Path, go: &GoBinary<'_>) -> R {
    check_against_nm_of(Command::new("go"), path, go)
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

fn main() {
    let build = || vec![Need::Go, Need::CCompiler];
    let with = |extra: &[Need]| {
        let mut v = build();
        v.extend_from_slice(extra);
        v
    };
    e2e::run(vec![
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
    ]);
}
