//! The names of a Go program's wait reasons: why `runtime.gopark` parked a goroutine.
//!
//! `gopark`'s third argument is a `waitReason`, a `uint8` whose names the runtime keeps in
//! `runtime.waitReasonStrings`, a `[N]string` in the binary's data (Go's
//! `src/runtime/runtime2.go`: `waitReasonStrings`, and `waitReason.String`). Each element is a
//! Go string header, (pointer, length), 16 bytes on amd64. The values and their order change
//! between releases (Go 1.21 inserted several), so the names are read from the binary itself
//! rather than from a table: any release whose symbol table has the array (Go 1.15 on, and
//! earlier) is named right, and a stripped binary falls back to `waitReason N`.
//!
//! The file is the target's, so every read is bounds-checked: the array's size must be whole
//! string headers and at most 256 of them (the `uint8`'s range), each pointer must land in a
//! file-backed load segment, and each name must be at most [`MAX_NAME`] bytes of UTF-8; a
//! header that fails any check leaves that reason unnamed. In a position-independent
//! executable the pointers are `R_X86_64_RELATIVE` relocations, whose addends are the values.

use netprobe_core::bytes::{slice, u64_at, FileBytes};
use netprobe_core::elf::parser::ElfView;
use netprobe_core::elf::segments::LoadSegments;
use std::path::Path;

/// The symbol of the names array.
pub const WAIT_REASON_STRINGS: &str = "runtime.waitReasonStrings";

/// The longest name read (the longest in Go 1.27 is 34 bytes).
pub const MAX_NAME: u64 = 128;

/// The wait reasons of one Go binary, by value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitReasons {
    names: Vec<Option<String>>,
}

impl WaitReasons {
    /// The names in the Go binary at `path`; none (every reason shown by number) when the file
    /// does not open, is not ELF, or has no readable `runtime.waitReasonStrings`.
    pub fn of_file(path: &Path) -> WaitReasons {
        let Ok(bytes) = FileBytes::open(path) else {
            return WaitReasons::default();
        };
        WaitReasons::of_elf(path, &bytes)
    }

    /// The names in the ELF image `bytes` (see [`WaitReasons::of_file`]).
    pub fn of_elf(path: &Path, bytes: &[u8]) -> WaitReasons {
        let Ok(view) = ElfView::parse(path, bytes) else {
            return WaitReasons::default();
        };
        let Some((base, size)) = view.symbol_extent(WAIT_REASON_STRINGS) else {
            return WaitReasons::default();
        };
        if size % 16 != 0 || size / 16 > 256 {
            return WaitReasons::default();
        }
        let segments = LoadSegments::from_program_headers(&view.program_headers);
        let relocated = view.relative_relocations();
        let word = |vaddr: u64| -> Option<u64> {
            if let Some(&v) = relocated.get(&vaddr) {
                return Some(v);
            }
            let off = segments.file_offset(netprobe_core::addr::VirtAddr(vaddr))?;
            u64_at(bytes, off.0)
        };
        let names = (0..size / 16)
            .map(|i| {
                let header = base.checked_add(i * 16)?;
                let ptr = word(header)?;
                let len = word(header.checked_add(8)?)?;
                if len > MAX_NAME {
                    return None;
                }
                if len == 0 {
                    return Some(String::new());
                }
                // The whole name inside one file-backed stretch of a segment.
                let start = segments.file_offset(netprobe_core::addr::VirtAddr(ptr))?;
                let last = segments.file_offset(netprobe_core::addr::VirtAddr(ptr + len - 1))?;
                if last.0.checked_sub(start.0)? != len - 1 {
                    return None;
                }
                let text = slice(bytes, start.0, len)?;
                String::from_utf8(text.to_vec()).ok()
            })
            .collect();
        WaitReasons { names }
    }

    /// The name of reason `value` as the runtime prints it (`sleep`, `chan receive`), or
    /// `waitReason N` when the binary does not name it.
    pub fn name(&self, value: u8) -> String {
        match self.names.get(usize::from(value)) {
            Some(Some(n)) if !n.is_empty() => n.clone(),
            _ => format!("waitReason {value}"),
        }
    }

    /// How many reasons the binary names (the array's length; 0 when it was not read).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no names were read.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The value whose name is `name`, if the binary names it.
    pub fn value_of(&self, name: &str) -> Option<u8> {
        let i = self.names.iter().position(|n| n.as_deref() == Some(name))?;
        u8::try_from(i).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_names_nothing() {
        let r = WaitReasons::of_elf(Path::new("junk"), b"\x7fELF not really an ELF file");
        assert!(r.is_empty());
        assert_eq!(r.name(19), "waitReason 19");
    }

    /// The names against the toolchain's own source: `runtime2.go`'s `waitReason` constants
    /// (their `iota` order) and `waitReasonStrings`, for the Go on PATH and every fetched
    /// toolchain present; a toolchain that is absent is said on stderr.
    #[test]
    fn names_match_the_go_source_of_each_toolchain() {
        let mut checked = 0;
        for (go, name) in toolchains() {
            let Some((bin, source)) = build_and_source(&go, &name) else {
                continue;
            };
            let r = WaitReasons::of_file(&bin);
            assert_eq!(r.len(), source.len(), "{name}: array length");
            for (i, s) in source.iter().enumerate() {
                if !s.is_empty() {
                    assert_eq!(&r.name(i as u8), s, "{name}: reason {i}");
                }
            }
            assert!(r.value_of("sleep").is_some() && r.value_of("chan receive").is_some());
            checked += 1;
        }
        assert!(checked > 0, "no Go toolchain could build the check program");
    }

    fn toolchains() -> Vec<(std::path::PathBuf, String)> {
        let mut out = vec![("go".into(), "PATH go".to_string())];
        for v in fixtures::go::GO_TOOLCHAINS {
            let go = fixtures::go::toolchain_go(v);
            if go.exists() {
                out.push((go, v.to_string()));
            } else {
                eprintln!("SKIP Go {v}: toolchain not fetched (scripts/fetch-go-toolchains.sh)");
            }
        }
        out
    }

    /// A tiny program built by `go`, and the wait reason names of that toolchain's source in
    /// value order.
    fn build_and_source(go: &Path, name: &str) -> Option<(std::path::PathBuf, Vec<String>)> {
        let goroot = go
            .parent()
            .and_then(Path::parent)
            .filter(|_| go.is_absolute());
        let mut env = std::process::Command::new(go);
        if let Some(r) = goroot {
            env.env("GOROOT", r);
        }
        let root = env.args(["env", "GOROOT"]).output().ok()?;
        let root = String::from_utf8_lossy(&root.stdout).trim().to_string();
        let src = std::fs::read_to_string(Path::new(&root).join("src/runtime/runtime2.go"))
            .or_else(|_| {
                // Go 1.23 moved the wait reasons to their own file.
                std::fs::read_to_string(Path::new(&root).join("src/runtime/waitreason.go"))
            })
            .ok()?;
        let names = source_names(&src)?;
        let dir = std::env::temp_dir().join(format!(
            "netprobe-waitreason-{}-{}",
            std::process::id(),
            name.replace(' ', "_")
        ));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("main.go"), "package main\nfunc main() {}\n").ok()?;
        std::fs::write(dir.join("go.mod"), "module w\n\ngo 1.19\n").ok()?;
        let mut build = std::process::Command::new(go);
        if let Some(r) = goroot {
            build.env("GOROOT", r);
        }
        let ok = build
            .args(["build", "-o", "w"])
            .current_dir(&dir)
            .env("CGO_ENABLED", "0")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .status()
            .ok()?
            .success();
        if !ok {
            eprintln!("SKIP {name}: go build failed");
            return None;
        }
        Some((dir.join("w"), names))
    }

    /// `waitReason` constants in order (from `waitReasonZero waitReason = iota`), and each one's
    /// string from the `waitReasonStrings` literal.
    fn source_names(src: &str) -> Option<Vec<String>> {
        let consts = src.split("waitReasonZero ").nth(1)?.split("\n)").next()?;
        let order: Vec<&str> = std::iter::once("waitReasonZero")
            .chain(consts.lines().skip(1).filter_map(|l| {
                let w = l.split("//").next()?.trim();
                (w.starts_with("waitReason")).then_some(w)
            }))
            .collect();
        let table = src
            .split("waitReasonStrings = [...]string{")
            .nth(1)?
            .split('}')
            .next()?;
        let named: HashMap<&str, String> = table
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((
                    k.trim(),
                    v.trim().trim_end_matches(',').trim_matches('"').to_string(),
                ))
            })
            .collect();
        Some(
            order
                .iter()
                .map(|k| named.get(k).cloned().unwrap_or_default())
                .collect(),
        )
    }

    use std::collections::HashMap;
}
