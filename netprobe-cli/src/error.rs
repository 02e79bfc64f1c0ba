//! Errors of the tracing half. Like the core's, every message is one line naming the cause and the
//! fix, because `main` prints it as is (`netprobe: error: <message>`) and exits non-zero.

use netprobe_core::capabilities::{CapSet, Capability};
use std::io;
use std::path::PathBuf;

/// Result alias for netprobe-cli.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while placing probes, recording and reading hits, or cleaning up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// tracefs's folders are root's with mode 0700 and `uprobe_events` 0640: another uid
    /// reaches them only with CAP_DAC_OVERRIDE (capabilities(7)); uprobes themselves need no
    /// capability beyond that.
    #[error("{what} needs root or CAP_DAC_OVERRIDE (tracefs's files are root's, mode 0700/0640), which this process lacks: run netprobe with sudo, or grant it CAP_DAC_OVERRIDE")]
    NotRoot { what: String },

    #[error("tracefs is not mounted and could not be mounted ({why}): run `mount -t tracefs nodev /sys/kernel/tracing` as root")]
    TracefsMissing { why: String },

    #[error("tracefs at {} is mounted read-only, so no probe can be placed or removed: remount it read-write (`mount -o remount,rw {}`) as root", .path.display(), .path.display())]
    TracefsReadOnly { path: PathBuf },

    #[error("this kernel has no uprobe support ({} is missing): use a kernel built with CONFIG_UPROBE_EVENTS=y", .path.display())]
    NoUprobeSupport { path: PathBuf },

    /// A value refused before it reaches `uprobe_events` (see `tracefs::probe` for each rule).
    #[error("refusing {what} {value:?}: {why}")]
    InvalidProbe {
        what: &'static str,
        value: String,
        why: String,
    },

    /// The kernel refused a line written to `uprobe_events`.
    #[error("the kernel refused probe `{line}`: {reason}")]
    ProbeRejected { line: String, reason: String },

    /// Enabling a created probe failed (the offset is accepted at creation and checked here).
    #[error("enabling probe {event} ({location}) failed: {reason}")]
    EnableFailed {
        event: String,
        location: String,
        reason: String,
    },

    #[error("{} is busy ({why}): {fix}", .path.display())]
    Busy {
        path: PathBuf,
        why: String,
        fix: String,
    },

    /// The probe-safety gate (`crate::gate`) refused a probe: nothing of the plan is placed.
    #[error("refusing the probe {probe}: {reason}; {fix}")]
    Refused {
        probe: String,
        reason: String,
        fix: String,
    },

    #[error("invalid probe spec '{spec}': {why}")]
    BadSpec { spec: String, why: String },

    #[error("{0}")]
    Usage(String),

    #[error("ring buffer page is malformed ({0}): this is a netprobe bug or an unsupported kernel; please report it")]
    BadPage(String),

    #[error("{} : {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(transparent)]
    Core(#[from] netprobe_core::Error),
}

impl Error {
    /// An I/O error on `path`; `EACCES`/`EPERM` become [`Error::NotRoot`] when neither root nor
    /// holding CAP_DAC_OVERRIDE.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        if matches!(
            source.raw_os_error(),
            Some(libc::EACCES) | Some(libc::EPERM)
        ) && !is_root()
            && !CapSet::effective().has(Capability::DacOverride)
        {
            return Error::NotRoot {
                what: format!("writing {}", path.display()),
            };
        }
        Error::Io { path, source }
    }

    /// A usage error (bad combination of options).
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
