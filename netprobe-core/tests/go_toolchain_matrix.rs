//! The Go toolchain matrix: the sample app built by Go 1.21 and 1.27, or by each release
//! 1.21..1.27 with `NETPROBE_GO_MATRIX=all` (`fixtures::go::matrix_versions`), that
//! `scripts/fetch-go-toolchains.sh` fetches, read by the Go readers and checked against that
//! release's `go tool nm` and `objdump` (needs the fetched toolchain, a C compiler and objdump);
//! and the same app cross-built with `GOARCH=arm64` by each of those releases, every function
//! checked against the build's own ELF symbol table (needs `aarch64-linux-gnu-gcc` for the
//! externally linked variant).

mod go_checks;

use fixtures::e2e::{self, err, Need};
use fixtures::go::{
    matrix_versions, sample_app_arm64_variants_by, sample_app_variants_by, toolchain_go,
    ARM64_MATRIX_VARIANTS, MATRIX_VARIANTS,
};
use go_checks::{
    arm64, check_against_nm_of, check_rets_and_prologues, locate_moduledata, with_binary, R,
};
use goblin::elf::Elf;
use netprobe_core::addr::VirtAddr;
use netprobe_core::golang::TextStartSource;
use netprobe_core::golang::{GoBinary, GoFunction};
use netprobe_core::symbol::SymbolSource;
use std::path::Path;
use std::process::Command;

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
    let minor = minor_of(version)?;
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
            check_text_start_source(go, minor, variant)?;
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

/// The text start comes from where release `minor` puts it: the header (or, in a PIE, its
/// relocation) before Go 1.26, the module data from 1.26 on (`runtime/symtab.go`, `pcHeader`).
fn check_text_start_source(go: &GoBinary<'_>, minor: u32, variant: &str) -> R {
    let loc = go.pclntab_location();
    let header_zero = go.pclntab().header().text_start_field == Some(0);
    match (minor >= 26, loc.text_start_source) {
        (true, TextStartSource::ModuleData { .. }) if header_zero => Ok(()),
        (false, TextStartSource::Header) if !header_zero => Ok(()),
        (false, TextStartSource::Relocation) if variant.contains("pie") => Ok(()),
        (_, other) => Err(format!(
            "text start {:#x} from {other:?} (header word {:?})",
            loc.text_start,
            go.pclntab().header().text_start_field
        )),
    }
}

/// The minor release of `version` ("1.27.3" -> 27).
fn minor_of(version: &str) -> Result<u32, String> {
    version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| format!("bad version {version}"))
}

/// The sample app cross-built for linux/arm64 by Go `version` in every arm64 variant (default,
/// PIE, stripped, external link with `aarch64-linux-gnu-gcc`):
/// - the text start comes from where that release puts it (as on amd64; 1.26+: the module data);
/// - every function netprobe lists is at the address, size and file offset of the same build's
///   `.symtab` FUNC symbol (read with goblin), the stripped build's at its unstripped twin's
///   (`go_checks::arm64`), and in unstripped builds at a text symbol of that release's
///   `go tool nm`;
/// - every offset is also the `PT_LOAD` formula over the executable segment holding it;
/// - before 1.26, the PIE's text start also comes from its `R_AARCH64_RELATIVE` relocation.
fn arm64_matrix(version: &str) -> R {
    let dir = sample_app_arm64_variants_by(version);
    let minor = minor_of(version)?;
    let twin = std::fs::read(dir.join("sampleapp-default")).map_err(err)?;
    let mut checked = Vec::new();
    for variant in ARM64_MATRIX_VARIANTS {
        let path = dir.join(variant);
        with_binary(&path, |go| {
            let want = format!("go{version}");
            if go.version().map(|v| v.raw) != Some(want.clone()) {
                return Err(format!("version {:?}, built by {want}", go.version()));
            }
            check_text_start_source(go, minor, variant)?;
            let n = if variant.contains("stripped") {
                arm64::check_every_function_against_symtab(go, &twin)?
            } else {
                check_against_nm_of(toolchain_cmd(version), &path, go)?;
                arm64::check_every_function_against_symtab(go, go.bytes())?
            };
            check_segment_formula(&path, go)?;
            if variant == "sampleapp-pie" && minor < 26 {
                check_text_start_from_arm64_relocation(&path, go)?;
            }
            checked.push(format!("{variant}: {n}"));
            Ok(())
        })?;
    }
    eprintln!("  go{version} arm64, functions at their .symtab offset: {checked:?}");
    Ok(())
}

/// A copy of an arm64 PIE whose header `textStart` word (the third word after the 8-byte
/// prefix, `runtime/symtab.go` `pcHeader`) is zeroed, as a linker that leaves the word to the
/// loader writes it (GNU ld `--no-apply-dynamic-relocs` on aarch64): the same
/// text start comes from the word's `R_AARCH64_RELATIVE` relocation.
fn check_text_start_from_arm64_relocation(path: &Path, go: &GoBinary<'_>) -> R {
    let loc = go.pclntab_location();
    let mut bytes = go.bytes().to_vec();
    let at = loc.file_offset.0 as usize + 24;
    bytes[at..at + 8].fill(0);
    let again = GoBinary::parse(path, &bytes)
        .map_err(err)?
        .ok_or("no longer Go")?;
    let got = again.pclntab_location();
    if got.text_start_source != TextStartSource::Relocation || got.text_start != loc.text_start {
        return Err(format!(
            "header word zeroed: text start {:#x} from {:?}, was {:#x}",
            got.text_start, got.text_start_source, loc.text_start
        ));
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

fn main() {
    let versions = matrix_versions();
    let amd64 = versions.iter().map(|&version| {
        e2e::trial(
            &format!("go_toolchain_matrix::{version}"),
            &[
                Need::Path(toolchain_go(version)),
                Need::CCompiler,
                Need::Program("objdump"),
            ],
            move || toolchain_matrix(version),
        )
    });
    let arm64 = versions.iter().map(|&version| {
        e2e::trial(
            &format!("go_toolchain_matrix::arm64::{version}"),
            &[
                Need::Path(toolchain_go(version)),
                Need::Program("aarch64-linux-gnu-gcc"),
            ],
            move || arm64_matrix(version),
        )
    });
    e2e::run(amd64.chain(arm64).collect());
}
