//! Probe specs as users type them, and their resolution to probe locations.
//!
//! ```text
//! SPEC     := [KIND ':'] LOCATION { ' ' ARG }
//! KIND     := 'p' (entry, the default) | 'r' (return: the return value is printed)
//! LOCATION := IMAGE ':' PATTERN | IMAGE ':' 0xOFFSET | PATTERN
//! ARG      := TYPE | NAME '=' TYPE | NAME '=' FETCHARG ':' KTYPE
//! TYPE     := u8..u64 | s8..s64 | x8..x64 | string | utf16 | gostring
//! ```
//! - `IMAGE` is a path, or (with `-p`) the file name of a mapped file (`libc.so.6`); `PATTERN` is
//!   a name or glob as `netprobe symbols` lists them; `0xOFFSET` is a file offset (what
//!   `uprobe_events` takes). The first single `:` separates IMAGE from PATTERN (`::` in .NET names
//!   is part of the pattern). Without IMAGE, the pattern is searched in every executable file the
//!   `-p` processes map, or in the `-c` command's executable; a `-c` command that runs a .NET app
//!   (`dotnet app.dll`, an app host) searches the app and its framework, found as the .NET host
//!   finds it, and takes assembly names (`System.Private.CoreLib.dll:...`) as IMAGE.
//! - The location ends at the first space; use `*` for spaces inside .NET names.
//! - `p:` / `r:` are bcc `trace`'s prefixes (bpftrace: `uprobe:` / `uretprobe:`). An image named
//!   `p` or `r` must be written as a path (`./r`).
//! - Entry ARGs are positional in the target's calling convention (System V: di, si, dx, cx, r8,
//!   r9; Go 1.17+: ax, bx, cx, di, si, r8..r11, a method's receiver first; Go before 1.17: stack
//!   words `+8(%sp)`, `+16(%sp)`, ...), chosen per function by `crate::lang`; `string` follows a
//!   `char *`, `utf16` a .NET `System.String` (length + first 64 chars), `gostring` a Go string
//!   (pointer + length, two words). `NAME=FETCHARG:KTYPE` is a raw kernel fetch-arg
//!   (`len=+8(%si):s32`, a Go receiver's field `base=+0(%ax):s64`); raw args take no position.
//! - For `r:` the one TYPE is the return value's type (default `x64`). Go functions get one probe
//!   per RET instruction instead of a uretprobe (`--force-uretprobe` overrides), and entry probes
//!   after their stack-check prologue; an `IMAGE:0xOFFSET` is probed exactly there.
//! - .NET ReadyToRun methods without ARGs get theirs from the signature (`this` first, strings
//!   decoded, floats and what follows a struct left out with a note), and a return TYPE from it;
//!   their returns are probed on each RET instruction too (a uretprobe crashes the runtime's
//!   stack walks), see `crate::lang::dotnet`.
//!
//! Examples: `./app:add s32 s32`, `r:./app:add s32`, `libc.so.6:puts string`,
//! `System.Private.CoreLib.dll:*String::Concat* this=x64 s=utf16`, `./app:0x1139 a=s32`.

use crate::error::{Error, Result};
use crate::plan::{ArgRequest, Role};
use netprobe_core::abi::ValueType;
use netprobe_core::addr::FileOffset;
use netprobe_core::normalize::MappedImage;
use netprobe_core::process::Process;
use netprobe_core::resolve::{resolve_file, resolve_in_process, ProbeTarget};
use netprobe_core::symbol::{Symbol, SymbolKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a location names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecTarget {
    Pattern(String),
    Offset(FileOffset),
}

/// A parsed probe spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// As typed.
    pub text: String,
    /// `p:` (entry, the default) or `r:` (return).
    pub kind: Role,
    pub image: Option<String>,
    pub target: SpecTarget,
    /// Entry arguments (empty for return specs).
    pub args: Vec<ArgRequest>,
    /// Return type (return specs).
    pub ret: Option<ValueType>,
}

fn bad(spec: &str, why: impl Into<String>) -> Error {
    Error::BadSpec {
        spec: spec.to_string(),
        why: why.into(),
    }
}

/// Byte index of the first `:` that is not part of `::`.
fn first_single_colon(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b':' {
            if b.get(i + 1) == Some(&b':') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

impl ProbeSpec {
    /// Parses a spec (grammar in the module doc).
    pub fn parse(text: &str) -> Result<ProbeSpec> {
        let trimmed = text.trim();
        let mut words = trimmed.split_whitespace();
        let Some(mut location) = words.next() else {
            return Err(bad(text, "it is empty; write IMAGE:FUNCTION or FUNCTION"));
        };
        let mut kind = Role::Entry;
        if let Some(rest) = location.strip_prefix("r:") {
            kind = Role::Return;
            location = rest;
        } else if let Some(rest) = location.strip_prefix("p:") {
            location = rest;
        }
        let (image, target_text) = match first_single_colon(location) {
            Some(i) => (Some(&location[..i]), &location[i + 1..]),
            None => (None, location),
        };
        if image == Some("") {
            return Err(bad(text, "the image before ':' is empty"));
        }
        if target_text.is_empty() {
            return Err(bad(text, "no function after ':'"));
        }
        if image.is_some_and(|i| i.starts_with('/')) && first_single_colon(target_text).is_some() {
            return Err(bad(
                text,
                "a second ':' after the image: the image ends at the first single ':', so a path holding ':' cannot be named; link the file to a path without ':'",
            ));
        }
        let target = match target_text.strip_prefix("0x") {
            Some(hex) => {
                let off = u64::from_str_radix(hex, 16)
                    .map_err(|_| bad(text, format!("'{target_text}' is not a hex offset")))?;
                if image.is_none() {
                    return Err(bad(text, "an offset needs its file: write IMAGE:0xOFFSET"));
                }
                SpecTarget::Offset(FileOffset(off))
            }
            None => SpecTarget::Pattern(target_text.to_string()),
        };
        let mut args = Vec::new();
        let mut ret = None;
        for word in words {
            match kind {
                Role::Return => {
                    if ret.is_some() {
                        return Err(bad(
                            text,
                            "a return probe takes one type (of the return value)",
                        ));
                    }
                    let t = word.rsplit('=').next().unwrap_or(word);
                    ret = Some(ValueType::parse(t).ok_or_else(|| {
                        bad(
                            text,
                            format!("unknown return type '{t}' (use s32, u64, x64, string, ...)"),
                        )
                    })?);
                }
                Role::Entry => args.push(parse_arg(text, word)?),
            }
        }
        Ok(ProbeSpec {
            text: text.to_string(),
            kind,
            image: image.map(str::to_string),
            target,
            args,
            ret,
        })
    }

    /// The location without arguments (`IMAGE:PATTERN`).
    pub fn location(&self) -> String {
        let t = match &self.target {
            SpecTarget::Pattern(p) => p.clone(),
            SpecTarget::Offset(o) => format!("{o}"),
        };
        match &self.image {
            Some(i) => format!("{i}:{t}"),
            None => t,
        }
    }
}

fn parse_arg(spec: &str, word: &str) -> Result<ArgRequest> {
    match word.split_once('=') {
        None => Ok(ArgRequest::Positional {
            name: None,
            ty: ValueType::parse(word).ok_or_else(|| {
                if word.contains('/') {
                    return bad(spec, format!("unknown argument type '{word}': a path with whitespace cannot be probed (specs and uprobe_events split on whitespace); link the file to a path without it"));
                }
                bad(spec, format!("unknown argument type '{word}' (use s32, u64, x64, string, utf16, gostring, or NAME=FETCHARG:TYPE)"))
            })?,
        }),
        Some((name, rest)) => {
            if let Some(ty) = ValueType::parse(rest) {
                return Ok(ArgRequest::Positional {
                    name: Some(name.to_string()),
                    ty,
                });
            }
            // A raw fetch-arg: its type must be one the kernel fetches (`crate::fetch_type`);
            // the expression is the backend's to place or refuse.
            crate::fetch_type::parse_raw(rest)
                .map(|_| ())
                .map_err(|why| bad(spec, format!("argument '{word}': {why}")))?;
            Ok(ArgRequest::Raw {
                name: name.to_string(),
                text: rest.to_string(),
            })
        }
    }
}

/// Whose code the probes observe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targeting {
    /// Running processes (`-p`).
    Pids(Vec<u32>),
    /// A command netprobe starts (`-c`); `exe` is its executable, resolved on PATH.
    Command { exe: PathBuf },
    /// Every process that runs the file (no pid filter).
    SystemWide,
}

/// One probe location a spec resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// Display name: the symbol, or `IMAGE+0xOFFSET`.
    pub name: String,
    pub image: PathBuf,
    pub probe_path: PathBuf,
    pub file_offset: FileOffset,
    pub symbol: Option<Symbol>,
}

impl From<ProbeTarget> for Location {
    fn from(t: ProbeTarget) -> Location {
        Location {
            name: t.symbol.name.clone(),
            image: t.image,
            probe_path: t.probe_path,
            file_offset: t.file_offset,
            symbol: Some(t.symbol),
        }
    }
}

impl Location {
    /// The symbol's kind, when known.
    pub fn kind(&self) -> Option<SymbolKind> {
        self.symbol.as_ref().map(|s| s.kind)
    }
}

/// Resolves a spec for a targeting mode. Locations that are the same file and offset (one file
/// reached through several pids or paths) appear once: a uprobe sits on the inode, and two
/// probes there would count every call twice.
pub fn resolve(spec: &ProbeSpec, targeting: &Targeting) -> Result<Vec<Location>> {
    let mut out: Vec<Location> = Vec::new();
    match targeting {
        Targeting::Pids(pids) => {
            for &pid in pids {
                out.extend(resolve_for_pid(spec, pid)?);
            }
        }
        Targeting::Command { exe } => {
            let file = match spec.image.as_deref() {
                None => exe.clone(),
                Some(i) if Some(std::ffi::OsStr::new(i)) == exe.file_name() => exe.clone(),
                Some(i) if i.contains('/') => absolute(i)?,
                // An assembly inside the command's single-file bundle.
                Some(i) if bundled_in(exe, i).is_some() => bundled_in(exe, i).unwrap_or_default(),
                Some(i) => {
                    return Err(bad(
                        &spec.text,
                        format!("with -c, '{i}' must be a path (the command is not running yet, so its libraries cannot be looked up by name)"),
                    ))
                }
            };
            out.extend(resolve_in_file(spec, &file)?);
        }
        Targeting::SystemWide => {
            let Some(i) = spec.image.as_deref() else {
                return Err(bad(
                    &spec.text,
                    "without -p or -c, name the file: IMAGE:FUNCTION",
                ));
            };
            // A bare name (`libc.so.6`) is not looked up anywhere host-wide: which of the
            // host's files (or a container's) it means is a process's to say.
            if !i.contains('/') && !Path::new(i).exists() {
                return Err(bad(
                    &spec.text,
                    format!("'{i}' is no file here: without -p, IMAGE is a path (e.g. /usr/lib/x86_64-linux-gnu/{i}); with -p PID, a bare name is looked up among that process's mapped files"),
                ));
            }
            out.extend(resolve_in_file(spec, &absolute(i)?)?);
        }
    }
    // The file as the kernel maps it: two containers of one image reach one file through two
    // overlay mounts, whose st_dev differ, and one uprobe there fires for both.
    let mut seen = std::collections::HashSet::new();
    out.retain(|l| {
        let key = netprobe_core::file_id::inode_as_mapped(&l.probe_path)
            .map(|(dev, ino)| ((u64::from(dev.major) << 32) | u64::from(dev.minor), ino))
            .or_else(|| {
                std::fs::metadata(&l.probe_path)
                    .ok()
                    .map(|m| (m.dev(), m.ino()))
            });
        match key {
            Some((dev, ino)) => seen.insert((dev, ino, l.file_offset.0)),
            None => true,
        }
    });
    Ok(out)
}

/// `image` made absolute with symbolic links resolved; a path naming an assembly inside a .NET
/// single-file bundle (`./app/System.Private.CoreLib.dll`) keeps its bundled part.
fn absolute(image: &str) -> Result<PathBuf> {
    std::fs::canonicalize(image).or_else(
        |e| match netprobe_core::dotnet::bundle::split_member_path(Path::new(image)) {
            Some((bundle, member)) => std::fs::canonicalize(&bundle)
                .map(|b| b.join(member))
                .map_err(|e| Error::Core(netprobe_core::Error::io(&bundle, e))),
            None => Err(Error::Core(netprobe_core::Error::io(Path::new(image), e))),
        },
    )
}

/// The member path of the assembly `name` (`System.Private.CoreLib.dll`, or without `.dll`)
/// inside `exe` when `exe` is a .NET single-file bundle that holds it.
fn bundled_in(exe: &Path, name: &str) -> Option<PathBuf> {
    let bundle = netprobe_core::dotnet::bundle::Bundle::open(exe).ok()??;
    let m = bundle.manifest();
    let entry = m.entry(name).or_else(|| m.entry(&format!("{name}.dll")))?;
    Some(bundle.member_path(entry))
}

fn offset_location(image: &Path, probe_path: &Path, off: FileOffset) -> Location {
    Location {
        name: format!(
            "{}+{off}",
            image.file_name().unwrap_or_default().to_string_lossy()
        ),
        image: image.to_path_buf(),
        probe_path: probe_path.to_path_buf(),
        file_offset: off,
        symbol: None,
    }
}

fn resolve_in_file(spec: &ProbeSpec, file: &Path) -> Result<Vec<Location>> {
    match &spec.target {
        SpecTarget::Offset(off) => Ok(vec![offset_location(file, file, *off)]),
        SpecTarget::Pattern(p) => Ok(resolve_file(file, p)?
            .into_iter()
            .map(Location::from)
            .collect()),
    }
}

fn resolve_for_pid(spec: &ProbeSpec, pid: u32) -> Result<Vec<Location>> {
    match &spec.target {
        SpecTarget::Pattern(p) => Ok(resolve_in_process(pid, spec.image.as_deref(), p)?
            .into_iter()
            .map(Location::from)
            .collect()),
        SpecTarget::Offset(off) => {
            let image = spec.image.as_deref().unwrap_or_default();
            let process = Process::open(pid)?;
            let images = MappedImage::group(&process.maps()?);
            let img = images
                .iter()
                .find(|i| {
                    i.path == Path::new(image)
                        || i.path.file_name().and_then(|n| n.to_str()) == Some(image)
                })
                .ok_or_else(|| netprobe_core::Error::ImageNotMapped {
                    pid,
                    image: image.to_string(),
                    similar: vec![],
                })?;
            Ok(vec![offset_location(
                &img.path,
                &netprobe_core::resolve::open_path(&process, img)?,
                *off,
            )])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let s = ProbeSpec::parse("./app:add s32 b=x64 s=string len=+8(%si):s32").unwrap();
        assert_eq!(s.kind, Role::Entry);
        assert_eq!(s.image.as_deref(), Some("./app"));
        assert_eq!(s.target, SpecTarget::Pattern("add".into()));
        assert_eq!(s.args.len(), 4);
        assert_eq!(
            s.args[3],
            ArgRequest::Raw {
                name: "len".into(),
                text: "+8(%si):s32".into(),
            }
        );
        let r = ProbeSpec::parse("r:./app:add s32").unwrap();
        assert_eq!(r.kind, Role::Return);
        assert_eq!(
            r.ret,
            Some(ValueType::Int(netprobe_core::abi::IntType::S32))
        );
        let o = ProbeSpec::parse("/bin/x:0x1139").unwrap();
        assert_eq!(o.target, SpecTarget::Offset(FileOffset(0x1139)));
        let n = ProbeSpec::parse("System.String::Concat").unwrap();
        assert_eq!(n.image, None);
        assert_eq!(
            n.target,
            SpecTarget::Pattern("System.String::Concat".into())
        );
        let d =
            ProbeSpec::parse("System.Private.CoreLib.dll:System.String::Concat this=x64").unwrap();
        assert_eq!(d.image.as_deref(), Some("System.Private.CoreLib.dll"));
        assert_eq!(
            d.target,
            SpecTarget::Pattern("System.String::Concat".into())
        );
        let g = ProbeSpec::parse("main.(*T).Get").unwrap();
        assert_eq!(g.target, SpecTarget::Pattern("main.(*T).Get".into()));
    }

    #[test]
    fn rejects_bad_specs() {
        for s in [
            "",
            ":add",
            "app:",
            "0x10",
            "app:add bogus",
            "r:app:add s32 s32",
            "app:0xzz",
            "app:f a=%di:zz",
            "/tmp/a:b/app:add",
            "/tmp/a b/app:add",
        ] {
            assert!(ProbeSpec::parse(s).is_err(), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in ".*") {
            let _ = ProbeSpec::parse(&s);
        }
    }
}
