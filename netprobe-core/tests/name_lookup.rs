//! Resolving one name without listing the whole image
//! (`netprobe_core::image::load_image_symbols_matching`) gives exactly what selecting from the
//! whole listing gives (`load_image_symbols` then `Pattern::select`): the same symbols, fields
//! and order, for exact names, short forms, globs and names that match nothing, on .NET 8 and
//! .NET Core 3.1 CoreLib (ReadyToRun), a stripped Go binary (esbuild, pclntab only), Debian's
//! dockerd (pclntab plus a `.dynsym` naming every Go function), libc (versioned `.dynsym`) and a
//! C program with `.symtab`. The listing itself is checked against readelf/nm and the runtimes
//! by the other tests of this crate; a missing input skips outside CI and fails under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::image::{load_image_symbols, load_image_symbols_matching};
use netprobe_core::matching::Pattern;
use std::path::{Path, PathBuf};

fn corelib(major: &str, version: &str) -> PathBuf {
    fixtures::cache_dir().join(format!(
        "dotnet/{major}/shared/Microsoft.NETCore.App/{version}/System.Private.CoreLib.dll"
    ))
}

fn go_binary() -> PathBuf {
    fixtures::go::third_party_go_dir().join("esbuild-0.17.19")
}

const DOCKERD: &str = "/usr/sbin/dockerd";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// Compares both ways of resolving each of `patterns` in `path`; returns how many symbols the
/// patterns selected in all (so a test can insist that something was found).
fn same_as_listing(path: &Path, patterns: &[&str]) -> Result<usize, String> {
    let all = load_image_symbols(path).map_err(err)?;
    let mut found = 0;
    for text in patterns {
        let pattern = Pattern::parse(text).map_err(err)?;
        let fast = load_image_symbols_matching(path, &pattern).map_err(err)?;
        if fast.len() != all.len() {
            return Err(format!(
                "{text}: {} groups, listing has {}",
                fast.len(),
                all.len()
            ));
        }
        for (f, a) in fast.iter().zip(&all) {
            let selected: Vec<_> = pattern.select(&a.symbols).into_iter().cloned().collect();
            if f.image != a.image || f.file_base != a.file_base || f.symbols != selected {
                return Err(format!(
                    "{} {text}: by name {:?}\nfrom the listing {:?}",
                    path.display(),
                    f.symbols,
                    selected
                ));
            }
            found += selected.len();
        }
    }
    Ok(found)
}

/// Patterns every image is asked: names of each kind of image, short forms, globs, nothing.
const COMMON: &[&str] = &["no_such_function_anywhere", "*no_such*", "x", "?"];

fn dotnet(major: &'static str, version: &'static str) -> Result<(), String> {
    let path = corelib(major, version);
    let found = same_as_listing(
        &path,
        &[
            "System.Threading.Thread::Sleep",
            "Thread::Sleep",
            "Thread::Sleep(int32)",
            "System.String::Concat",
            "String::Concat(string,string)",
            "void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)",
            "System.Collections.Generic.Dictionary`2<__Canon,__Canon>::TryInsert",
            "*::Sleep",
            "*Thread::Sle*",
            "*Dictionary*::TryGetValue",
            "List`1::.ctor",
            "System.String::.ctor(char\\[\\])",
            "Thread::Sleep(",
            "::Sleep",
            "Sleep",
        ],
    )?;
    same_as_listing(&path, COMMON)?;
    if found < 5 {
        return Err(format!(
            "only {found} methods selected in {}",
            path.display()
        ));
    }
    Ok(())
}

fn elf(path: &Path, patterns: &[&str]) -> Result<(), String> {
    let found = same_as_listing(path, patterns)?;
    same_as_listing(path, COMMON)?;
    if found == 0 {
        return Err(format!("nothing selected in {}", path.display()));
    }
    Ok(())
}

fn c_program() -> Result<(), String> {
    let bin = fixtures::build::CProgram::new("offsets").build();
    elf(&bin, &["main", "np_*", "*", "mai?"])?;
    // A library whose `.dynsym` copies its `.symtab` names with versions: each name, versioned
    // or not, or cut short, must find (and hide) the same copies as the listing does.
    let lib = fixtures::build::versioned_library();
    elf(
        &lib,
        &[
            "np_lib_hello",
            "np_lib_hello@@NPVER_2",
            "np_lib_hello@NPVER_1",
            "np_lib_hello@",
            "np_lib",
            "np_lib_*",
        ],
    )
}

/// netprobe's `.gnu.hash` reader leads every name goblin lists in the `.dynsym` of `path` (from
/// the table's first hashed entry on, as the linker sorted them) to that entry, and to no entry
/// of another hash bucket: what resolving one name through the table relies on.
fn gnu_hash_finds_every_name(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(err)?;
    let view = netprobe_core::elf::parser::ElfView::parse(path, &bytes).map_err(err)?;
    let hash = view
        .dynsym_hash()
        .ok_or_else(|| format!("{}: no usable .gnu.hash", path.display()))?;
    let elf = goblin::elf::Elf::parse(&bytes).map_err(err)?;
    let mut checked = 0;
    for (index, sym) in elf.dynsyms.iter().enumerate().skip(hash.first_hashed()) {
        let name = elf.dynstrtab.get_at(sym.st_name).unwrap_or("");
        if !hash.candidates(name.as_bytes()).contains(&index) {
            return Err(format!(
                "{}: {name} (entry {index}) not found",
                path.display()
            ));
        }
        checked += 1;
    }
    if checked < 100 {
        return Err(format!("{}: only {checked} hashed names", path.display()));
    }
    Ok(())
}

fn main() {
    let go_patterns: &'static [&'static str] = &[
        "main.main",
        "runtime.mallocgc",
        "(*Transport).RoundTrip",
        "net/http.(*Transport).RoundTrip",
        "runtime.*",
        "*.(*conn).*",
        "type..eq.*",
        "type..eq.[2]interface {}",
    ];
    e2e::run(vec![
        e2e::trial(
            "lookup_by_name_equals_listing_corelib_net8",
            &[Need::Path(corelib("8", "8.0.4"))],
            || dotnet("8", "8.0.4"),
        ),
        e2e::trial(
            "lookup_by_name_equals_listing_corelib_netcore31",
            &[Need::Path(corelib("3.1", "3.1.23"))],
            || dotnet("3.1", "3.1.23"),
        ),
        e2e::trial(
            "lookup_by_name_equals_listing_stripped_go",
            &[Need::Path(go_binary())],
            move || elf(&go_binary(), go_patterns),
        ),
        e2e::trial(
            "lookup_by_name_equals_listing_dockerd",
            &[Need::Path(DOCKERD.into())],
            move || {
                elf(Path::new(DOCKERD), go_patterns)?;
                // cgo's C functions: in `.dynsym` only, at addresses the Go table does not name.
                elf(
                    Path::new(DOCKERD),
                    &[
                        "x_cgo_init",
                        "x_cgo_*",
                        "crosscall2",
                        "_cgo_*Cfunc_gai_strerror",
                    ],
                )
            },
        ),
        e2e::trial(
            "gnu_hash_finds_every_dynsym_name_libc_dockerd",
            &[Need::Path(LIBC.into()), Need::Path(DOCKERD.into())],
            || {
                gnu_hash_finds_every_name(Path::new(LIBC))?;
                gnu_hash_finds_every_name(Path::new(DOCKERD))
            },
        ),
        e2e::trial(
            "lookup_by_name_equals_listing_libc",
            &[Need::Path(LIBC.into())],
            || {
                elf(
                    Path::new(LIBC),
                    &[
                        "malloc",
                        "memcpy",
                        "memcpy@GLIBC_2.2.5",
                        "memcpy@@GLIBC_2.14",
                        "str*",
                        "*@GLIBC_2.2.5",
                    ],
                )
            },
        ),
        e2e::trial(
            "lookup_by_name_equals_listing_c_symtab",
            &[Need::CCompiler],
            c_program,
        ),
    ]);
}
