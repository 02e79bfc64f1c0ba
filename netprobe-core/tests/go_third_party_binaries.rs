//! The Go readers on stripped third-party binaries, against `go tool nm`/`objdump`: Debian's
//! dockerd, containerd and runc, and esbuild built by Go 1.15/1.16/1.17/1.20/1.26
//! (`scripts/fetch-go-binaries.sh`: every pclntab layout, and the zero header textStart of Go
//! 1.26+). Needs Go, objcopy, objdump and those files.

mod go_checks;

use fixtures::e2e::{self, err, Need};
use fixtures::go::{third_party_go_dir, THIRD_PARTY_GO};
use go_checks::{
    check_against_addr2line, check_file_offsets, check_rets_and_prologues, compare_with_elf_funcs,
    elf_funcs, locate_moduledata, run, sample, with_binary, DEBIAN_GO, R,
};
use goblin::elf::Elf;
use netprobe_core::golang::{GSource, GoAbi, GoBinary, PclntabVersion};
use netprobe_core::symbol::SymbolKind;
use std::path::Path;
use std::process::Command;

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

fn main() {
    let mut debian = vec![Need::Go, Need::Program("objcopy"), Need::Program("objdump")];
    debian.extend(DEBIAN_GO.iter().map(|p| Need::Path(p.into())));
    let mut esbuild = vec![Need::Go, Need::Program("objdump")];
    esbuild.extend(
        THIRD_PARTY_GO
            .iter()
            .map(|(f, _)| Need::Path(third_party_go_dir().join(f))),
    );
    e2e::run(vec![
        e2e::trial("debian_stripped_go_binaries", &debian, debian_binaries),
        e2e::trial("esbuild_every_pclntab_layout", &esbuild, esbuild_layouts),
    ]);
}
