//! What the symbolizer answers: one [`Frame`] per function running at an address (inlined
//! functions first, innermost first, then the function the code belongs to).

use crate::addr::FileOffset;
use crate::dotnet::managed_name::{readable, CodeTier};
use crate::symbol::SymbolOrigin;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// Which table named a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// ELF `.symtab`.
    ElfSymtab,
    /// ELF `.dynsym`.
    ElfDynsym,
    /// Go's function table (`.gopclntab`), inlined frames from its inline trees.
    GoPclntab,
    /// DWARF: a function the compiler inlined at the address
    /// (`DW_TAG_inlined_subroutine`), named by the image's debug info.
    Dwarf,
    /// A .NET ReadyToRun method: the method whose RUNTIME_FUNCTION (main body, funclet or cold
    /// part) covers the address.
    DotnetR2r,
    /// JIT-compiled code named by the runtime's `/tmp/perf-PID.map`.
    PerfMap,
    /// No table names the address: printed as `[unknown] (image+0xOFF)`, never guessed.
    Unknown,
    /// The address is in mapped memory that is not executable, so no instruction is there: a
    /// frame-pointer walk that went through code without frame pointers reads data as a return
    /// address. Printed as `[not code] (0xADDR)`; a stack walk ends at such an address.
    NotCode,
    /// The kernel's return-probe trampoline, in the `[uprobes]` area it maps into a probed
    /// process (`xol_add_vma` in `kernel/events/uprobes.c`): a uretprobe replaced this frame's
    /// return address with the trampoline's when the call began (`prepare_uretprobe`), so the
    /// caller is not in the stack. Printed as `[uretprobe trampoline] (0xADDR)`.
    ReturnProbeTrampoline,
}

impl SourceKind {
    /// The kind for a symbol of `origin`; `None` for origins the symbolizer does not index
    /// (crossgen map files: their methods are read from the ReadyToRun header instead).
    pub fn of_origin(origin: SymbolOrigin) -> Option<SourceKind> {
        match origin {
            SymbolOrigin::ElfSymtab => Some(SourceKind::ElfSymtab),
            SymbolOrigin::ElfDynsym => Some(SourceKind::ElfDynsym),
            SymbolOrigin::GoPclntab => Some(SourceKind::GoPclntab),
            SymbolOrigin::ReadyToRun => Some(SourceKind::DotnetR2r),
            SymbolOrigin::PerfMap => Some(SourceKind::PerfMap),
            SymbolOrigin::CrossgenMap => None,
        }
    }
}

/// One frame of a symbolized address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// The address looked up: a runtime address for process lookups, the file offset for file
    /// lookups. Serialized as a `"0x..."` string, like every address of the crate.
    #[serde(serialize_with = "ser_hex")]
    pub address: u64,
    /// The file that holds the code, as the process names it (a bundled assembly as
    /// `BUNDLE/NAME.dll`); `None` for anonymous memory.
    #[serde(serialize_with = "ser_opt_path")]
    pub image: Option<PathBuf>,
    /// Where the address lies in that file; `None` for anonymous memory.
    pub file_offset: Option<FileOffset>,
    /// The function's name as its source spells it (Go: `main.(*T).M`), a .NET method as C#
    /// writes it (`System.String.Replace(string, string)`, [`crate::dotnet::managed_name`]; its
    /// tier is [`Frame::tier`]); `None` for [`SourceKind::Unknown`].
    pub function: Option<String>,
    /// Bytes from the function's first instruction; `None` for inlined frames (their code is
    /// spread through the caller) and unknown code.
    pub offset: Option<u64>,
    pub source: SourceKind,
    /// The compiler inlined this function into the next frame: no call happened at run time.
    pub inlined: bool,
    /// The source file of the frame's line, from DWARF (as `addr2line` prints it: joined with
    /// its directory and the compilation directory); absent without debug info.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based source line: for the innermost frame the line of the instruction, for
    /// every other the line of the call (or inlined call) into the frame before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The 1-based column, when the compiler records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// A .NET method's code tier: `ready_to_run` for precompiled code, the perf map's tier for
    /// JIT code (`tier0`, `tier1`, `osr`...; [`CodeTier`]); absent for other code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<CodeTier>,
}

impl Frame {
    /// `file:line` (`file` alone when the line is not known); `None` without a file.
    pub fn source_line(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match self.line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        })
    }

    /// The frame with the location `loc` (file, line, column).
    pub fn at(mut self, loc: Option<&crate::debuginfo::SourceLine>) -> Frame {
        if let Some(l) = loc {
            self.file = Some(l.file.clone());
            self.line = l.line;
            self.column = l.column;
        }
        self
    }
}

impl Frame {
    /// The frame of a .NET method named as C# reads it (`System.String.Replace(string,
    /// string)`, [`crate::dotnet::managed_name`]) with its tier apart: ReadyToRun code from the
    /// assembly, JIT code from the perf map's suffix. Other frames are returned as they are.
    pub fn managed(mut self) -> Frame {
        if !matches!(self.source, SourceKind::DotnetR2r | SourceKind::PerfMap) {
            return self;
        }
        if let Some(raw) = self.function.take() {
            let (name, tier) = readable(&raw);
            self.function = Some(name);
            self.tier = match self.source {
                SourceKind::DotnetR2r => Some(CodeTier::ReadyToRun),
                _ => tier,
            };
        }
        self
    }

    /// A frame no table names: `[unknown] (image+0xOFF)`, or `[unknown] (0xADDR)` without an
    /// image.
    pub fn unknown(address: u64, image: Option<PathBuf>, file_offset: Option<FileOffset>) -> Frame {
        Frame {
            address,
            image,
            file_offset,
            function: None,
            offset: None,
            source: SourceKind::Unknown,
            inlined: false,
            file: None,
            line: None,
            column: None,
            tier: None,
        }
    }
}

fn ser_hex<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#x}"))
}

fn ser_opt_path<S: serde::Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_some(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}

impl fmt::Display for Frame {
    /// `function+0xOFF`, `function (inlined)`, or `[unknown] (image+0xOFF)` with the file
    /// offset (`[unknown] (0xADDR)` in anonymous memory); a named frame with a source line
    /// ends in ` (file:line)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_name(f)?;
        match self.source_line() {
            Some(at) if self.function.is_some() => write!(f, " ({at})"),
            _ => Ok(()),
        }
    }
}

impl Frame {
    fn fmt_name(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.function, self.inlined, self.offset) {
            (Some(name), true, _) => write!(f, "{name} (inlined)"),
            (Some(name), false, Some(off)) => write!(f, "{name}+{off:#x}"),
            (Some(name), false, None) => f.write_str(name),
            (None, _, _) if self.source == SourceKind::NotCode => {
                write!(f, "[not code] ({:#x})", self.address)
            }
            (None, _, _) if self.source == SourceKind::ReturnProbeTrampoline => {
                write!(f, "[uretprobe trampoline] ({:#x})", self.address)
            }
            (None, _, _) => match (&self.image, self.file_offset) {
                (Some(img), Some(off)) => {
                    let name = img
                        .file_name()
                        .map_or_else(|| img.to_string_lossy(), |n| n.to_string_lossy());
                    write!(f, "[unknown] ({name}+{off:#x})")
                }
                _ => write!(f, "[unknown] ({:#x})", self.address),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: Option<&str>, offset: Option<u64>, inlined: bool) -> Frame {
        Frame {
            address: 0x7f00_0012_3456,
            image: Some(PathBuf::from("/usr/lib/app/System.Private.CoreLib.dll")),
            file_offset: Some(FileOffset(0x2_3456)),
            function: function.map(str::to_string),
            offset,
            source: if function.is_some() {
                SourceKind::DotnetR2r
            } else {
                SourceKind::Unknown
            },
            inlined,
            file: None,
            line: None,
            column: None,
            tier: None,
        }
    }

    #[test]
    fn frames_print_as_name_offset_inlined_or_unknown_image_offset() {
        let anon = Frame {
            image: None,
            file_offset: None,
            ..frame(None, None, false)
        };
        let frames = [
            frame(
                Some("void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)"),
                Some(0x1c),
                false,
            ),
            Frame {
                source: SourceKind::GoPclntab,
                ..frame(Some("main.add"), None, true)
            },
            frame(None, None, false),
            anon.clone(),
        ];
        let text: Vec<String> = frames.iter().map(ToString::to_string).collect();
        insta::assert_snapshot!(text.join("\n"));
        insta::assert_snapshot!(serde_json::to_string_pretty(&frames[..2]).unwrap());
    }

    #[test]
    fn a_source_line_follows_the_name_in_text_and_is_its_own_fields_in_json() {
        let loc = crate::debuginfo::SourceLine {
            file: "/src/app.c".into(),
            line: Some(42),
            column: Some(7),
        };
        let outer = Frame {
            source: SourceKind::ElfSymtab,
            ..frame(Some("parse"), Some(0x1c), false)
        }
        .at(Some(&loc));
        let inlined = Frame {
            source: SourceKind::Dwarf,
            ..frame(Some("get"), None, true)
        }
        .at(Some(&crate::debuginfo::SourceLine {
            line: None,
            ..loc.clone()
        }));
        assert_eq!(outer.to_string(), "parse+0x1c (/src/app.c:42)");
        assert_eq!(inlined.to_string(), "get (inlined) (/src/app.c)");
        let json = serde_json::to_value(&outer).unwrap();
        assert_eq!(json["file"], "/src/app.c");
        assert_eq!(
            (json["line"].as_u64(), json["column"].as_u64()),
            (Some(42), Some(7))
        );
        // An unknown frame prints no line even if one were set.
        let unknown = frame(None, None, false).at(Some(&loc));
        assert_eq!(
            unknown.to_string(),
            "[unknown] (System.Private.CoreLib.dll+0x23456)"
        );
    }
}
