//! Finding (and if needed mounting) tracefs.
//!
//! Kernel `Documentation/trace/ftrace.rst`: since 4.1 the tracing files live in tracefs, normally
//! mounted at `/sys/kernel/tracing`; older setups reach it through debugfs at
//! `/sys/kernel/debug/tracing` (debugfs automounts tracefs there).

use crate::error::{is_root, Error, Result};
use netprobe_core::capabilities::{CapSet, Capability};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The places tracefs is looked for, in order.
pub const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A mounted tracefs that has `uprobe_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracefs {
    root: PathBuf,
}

impl Tracefs {
    /// Finds tracefs, mounting it at `/sys/kernel/tracing` when it is absent and we are root.
    ///
    /// Errors: [`Error::NotRoot`] when tracefs is unreadable or must be mounted without root,
    /// [`Error::TracefsMissing`] when mounting failed, [`Error::NoUprobeSupport`] when tracefs is
    /// there but has no `uprobe_events` (kernel without CONFIG_UPROBE_EVENTS).
    pub fn open() -> Result<Tracefs> {
        if let Some(t) = Self::find() {
            return t.check_uprobes();
        }
        if let Some(dir) = Self::unsearchable() {
            return Err(Error::NotRoot {
                what: format!("searching {dir}"),
            });
        }
        if !is_root() && !CapSet::effective().has(Capability::SysAdmin) {
            return Err(Error::TracefsMissing {
                why: "mounting it needs CAP_SYS_ADMIN, which this process lacks".into(),
            });
        }
        let why = match mount("tracefs", CANDIDATES[0]) {
            Ok(()) => String::new(),
            Err(e)
                if e.ends_with(&format!(
                    "{}",
                    std::io::Error::from_raw_os_error(libc::EPERM)
                )) =>
            {
                return Err(Error::TracefsMissing {
                    why: format!("{e}: mounting needs CAP_SYS_ADMIN, which this process lacks"),
                });
            }
            Err(e) => {
                // Old kernels: tracefs appears under debugfs once debugfs is mounted.
                let _ = mount("debugfs", "/sys/kernel/debug");
                e
            }
        };
        match Self::find() {
            Some(t) => t.check_uprobes(),
            None => Err(Error::TracefsMissing {
                why: if why.is_empty() {
                    "mounted, but no tracing files appeared".into()
                } else {
                    why
                },
            }),
        }
    }

    /// `true` when a mounted tracefs with `uprobe_events` is there now (nothing is mounted).
    pub fn uprobes_available() -> bool {
        Self::find().is_some_and(|t| t.path("uprobe_events").exists())
    }

    /// A candidate folder this process may not search (tracefs's root is mode 0700): tracefs may
    /// well be mounted there, and mounting again would not help.
    pub fn unsearchable() -> Option<&'static str> {
        CANDIDATES.into_iter().find(|d| {
            std::fs::read_dir(d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        })
    }

    /// A tracefs at a given root, unchecked (tests use it on a fake tree).
    pub fn at(root: impl Into<PathBuf>) -> Tracefs {
        Tracefs { root: root.into() }
    }

    /// The first candidate that looks like a mounted tracefs (has a `trace` file or `instances/`).
    fn find() -> Option<Tracefs> {
        CANDIDATES
            .iter()
            .map(Path::new)
            .find(|dir| dir.join("instances").is_dir() || dir.join("uprobe_events").exists())
            .map(Tracefs::at)
    }

    fn check_uprobes(self) -> Result<Tracefs> {
        let events = self.path("uprobe_events");
        match std::fs::metadata(&events) {
            Ok(_) if self.read_only() => Err(Error::TracefsReadOnly { path: self.root }),
            Ok(_) => Ok(self),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(Error::NotRoot {
                what: format!("reading {}", events.display()),
            }),
            Err(_) => Err(Error::NoUprobeSupport { path: events }),
        }
    }

    /// Whether the mount holding the root is read-only (`ST_RDONLY` from `statvfs(3)`): every
    /// write to `uprobe_events` and every `mkdir` of an instance would fail with EROFS.
    fn read_only(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Ok(path) = CString::new(self.root.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `path` is a valid NUL-terminated string and `st` a writable statvfs.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
        rc == 0 && st.f_flag & libc::ST_RDONLY != 0
    }

    /// The tracefs root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path inside tracefs.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// Reads a tracefs file as text.
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<String> {
        read_text(&self.path(rel))
    }
}

/// `mount -t FSTYPE nodev TARGET`; the error text on failure.
fn mount(fstype: &str, target: &str) -> std::result::Result<(), String> {
    let src = CString::new("nodev").expect("no NUL");
    let fs = CString::new(fstype).expect("no NUL");
    let tgt = CString::new(target).expect("no NUL");
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call; data is
    // null (no mount options).
    let rc = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "mount -t {fstype} nodev {target}: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Reads a tracefs file whole. Some tracefs files (`events/header_page` on 6.18) end the data
/// after a short first read when the buffer is small, as `read_to_string`'s first 32-byte probe
/// read is; reading with a page-sized buffer gets all of it.
pub fn read_text(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
