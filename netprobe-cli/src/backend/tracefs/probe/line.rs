//! A probe definition ([`ProbeDef`]: entry or return, group, event, path, offset, fetch-args),
//! validated whole on construction, and the exact `uprobe_events` line it and its removal are
//! written as ([`ProbeLine`]).

use super::names::invalid;
use super::{EventName, GroupName, ProbePath, MAX_ARGS};
use crate::backend::tracefs::fetch::FetchArg;
use crate::error::Result;
use netprobe_core::addr::FileOffset;
use std::fmt;
use std::path::Path;

/// Entry probe (`p:`) or return probe (`r:`, a uretprobe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `p:` fires when the instruction at the offset runs.
    Entry,
    /// `r:` fires when the function whose first instruction is at the offset returns.
    Return,
}

/// A probe definition, validated on construction; `Display` gives the exact line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeDef {
    kind: ProbeKind,
    group: GroupName,
    event: EventName,
    path: ProbePath,
    offset: FileOffset,
    args: Vec<FetchArg>,
}

impl ProbeDef {
    /// Validates every part (see the module table). Errors name the refused value and why.
    pub fn new(
        kind: ProbeKind,
        group: GroupName,
        event: EventName,
        path: &Path,
        offset: FileOffset,
        args: Vec<FetchArg>,
    ) -> Result<ProbeDef> {
        let path = ProbePath::new(path)?;
        if args.len() > MAX_ARGS {
            return Err(invalid(
                "fetch-arg list",
                &format!("{} arguments", args.len()),
                format!("the kernel allows at most {MAX_ARGS}"),
            ));
        }
        for (i, a) in args.iter().enumerate() {
            a.validate()?;
            if args[..i].iter().any(|b| b.name == a.name) {
                return Err(invalid(
                    "fetch-arg name",
                    &a.name,
                    "it is used twice on one probe",
                ));
            }
        }
        Ok(ProbeDef {
            kind,
            group,
            event,
            path,
            offset,
            args,
        })
    }

    pub fn kind(&self) -> ProbeKind {
        self.kind
    }
    pub fn group(&self) -> &GroupName {
        &self.group
    }
    pub fn event(&self) -> &EventName {
        &self.event
    }
    pub fn path(&self) -> &ProbePath {
        &self.path
    }
    pub fn offset(&self) -> FileOffset {
        self.offset
    }
    pub fn args(&self) -> &[FetchArg] {
        &self.args
    }

    /// The removal line for this probe.
    pub fn removal(&self) -> ProbeLine {
        ProbeLine::Remove {
            group: self.group.clone(),
            event: self.event.clone(),
        }
    }
}

impl fmt::Display for ProbeDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            ProbeKind::Entry => 'p',
            ProbeKind::Return => 'r',
        };
        write!(
            f,
            "{k}:{}/{} {}:{:#x}",
            self.group,
            self.event,
            self.path.as_str(),
            self.offset.0
        )?;
        for a in &self.args {
            write!(f, " {}", a.render())?;
        }
        Ok(())
    }
}

/// One line for `uprobe_events`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProbeLine {
    Add(ProbeDef),
    /// `-:GROUP/EVENT`.
    Remove {
        group: GroupName,
        event: EventName,
    },
}

impl fmt::Display for ProbeLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeLine::Add(d) => d.fmt(f),
            ProbeLine::Remove { group, event } => write!(f, "-:{group}/{event}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tracefs::fetch::{ArrayElem, FetchType};
    use crate::backend::tracefs::probe::kernel_isspace;
    use crate::error::Error;
    use netprobe_core::abi::IntType;

    fn g() -> GroupName {
        GroupName::new("nptest_tracefs_unit").unwrap()
    }

    #[test]
    fn renders_entry_and_return_lines() {
        let d = ProbeDef::new(
            ProbeKind::Entry,
            g(),
            EventName::new("add").unwrap(),
            Path::new("/tmp/np t".trim_end_matches(" t")),
            FileOffset(0x1139),
            vec![
                FetchArg::new("a", "%di", FetchType::Int(IntType::S32)),
                FetchArg::new("s", "+0(%dx)", FetchType::String),
                FetchArg::new(
                    "chars",
                    "+12(%di)",
                    FetchType::Array {
                        elem: ArrayElem::U16,
                        len: 64,
                    },
                ),
            ],
        )
        .unwrap();
        assert_eq!(
            d.to_string(),
            "p:nptest_tracefs_unit/add /tmp/np:0x1139 a=%di:s32 s=+0(%dx):string chars=+12(%di):u16[64]"
        );
        let r = ProbeDef::new(
            ProbeKind::Return,
            g(),
            EventName::new("add_ret").unwrap(),
            Path::new("/bin/x"),
            FileOffset(16),
            vec![FetchArg::new(
                "ret",
                "$retval",
                FetchType::Int(IntType::X64),
            )],
        )
        .unwrap();
        assert_eq!(
            r.to_string(),
            "r:nptest_tracefs_unit/add_ret /bin/x:0x10 ret=$retval:x64"
        );
        assert_eq!(r.removal().to_string(), "-:nptest_tracefs_unit/add_ret");
    }

    #[test]
    fn refuses_line_injection_and_word_shifts() {
        for bad in [
            "/tmp/a\n-:other/ev",
            "/tmp/a b",
            "/tmp/a\tb",
            "relative/path",
            "/tmp/a\x07",
            "/tmp/a#b/app",
        ] {
            let e = ProbePath::new(Path::new(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidProbe { .. }), "{bad:?}: {e}");
        }
        for bad in ["a b", "a\n-:x/y", "a/b", "9abc", "", "ä", &"e".repeat(64)] {
            assert!(EventName::new(bad).is_err(), "{bad:?}");
            assert!(GroupName::new(bad).is_err(), "{bad:?}");
        }
        assert!(EventName::new(&"e".repeat(63)).is_ok());
        let arg = |n: &str, e: &str| {
            ProbeDef::new(
                ProbeKind::Entry,
                g(),
                EventName::new("x").unwrap(),
                Path::new("/bin/x"),
                FileOffset(0),
                vec![FetchArg::new(n, e, FetchType::Int(IntType::U64))],
            )
        };
        assert!(arg("a", "%di x=%si").is_err());
        assert!(arg("a", "%di\n-:g/e").is_err());
        assert!(arg("a b", "%di").is_err());
        assert!(arg("common_pid", "%di").is_err());
        assert!(arg(&"a".repeat(33), "%di").is_err());
        assert!(arg(&"a".repeat(32), "%di").is_ok());
        // 59 + ":u64" = 63 bytes is the longest body the kernel takes.
        assert!(arg("a", &format!("+{}(%di)", "0".repeat(53))).is_ok());
        assert!(arg("a", &format!("+{}(%di)", "0".repeat(54))).is_err());
    }

    proptest::proptest! {
        #[test]
        fn no_validated_line_contains_a_newline(path in ".*", ev in ".*", expr in ".*") {
            let Ok(group) = GroupName::new("g") else { unreachable!() };
            if let Ok(event) = EventName::new(&ev) {
                if let Ok(d) = ProbeDef::new(ProbeKind::Entry, group, event, Path::new(&path), FileOffset(1), vec![FetchArg::new("a", expr, FetchType::Int(IntType::U64))]) {
                    let line = d.to_string();
                    proptest::prop_assert!(!line.contains('\n') && !line.contains('\r'));
                    // The kernel sees exactly 3 words: head, location, one argument.
                    let words = line.as_bytes().split(|&b| kernel_isspace(b)).filter(|w| !w.is_empty());
                    proptest::prop_assert_eq!(words.count(), 3);
                }
            }
        }
    }
}
