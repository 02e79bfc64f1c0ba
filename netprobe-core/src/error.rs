//! Errors of the offset engine. Every message is one line that names the cause and the fix, because
//! the CLI prints it as is (`netprobe: error: <message>`).

use crate::capabilities::{CapSet, Capability};
use std::io;
use std::path::{Path, PathBuf};

/// Result alias for the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while finding where a probe must go.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no process with pid {pid}: it is not running (or not visible in this pid namespace); check the pid with `ps -p {pid}`")]
    NoSuchProcess { pid: u32 },

    #[error("process {pid} ({comm}) is a kernel thread: it runs no user-space code to probe; pick a user process (`netprobe ps` lists them)")]
    KernelThread { pid: u32, comm: String },

    #[error("process {pid} ({comm}) has exited: it is a zombie its parent (pid {parent}) has not reaped, with no code left to probe; trace a running process")]
    Exited { pid: u32, comm: String, parent: u32 },

    #[error("process {pid} ({comm}): its main thread has exited while {threads} other thread(s) still run, and the kernel no longer shows the process's memory map under /proc/{pid}; probe its binary in every process instead (IMAGE:PATTERN without -p, then --tid to keep its threads)")]
    MainThreadExited {
        pid: u32,
        comm: String,
        threads: usize,
    },

    /// `fix` names the capability that reading `path` needs and this process lacks
    /// ([`permission_fix`]).
    #[error("permission denied reading {}: {fix}", .path.display())]
    PermissionDenied { path: PathBuf, fix: String },

    #[error("{image} is not mapped in process {pid}{}: pass a path or file name that appears in /proc/{pid}/maps", similar_suffix(.similar))]
    ImageNotMapped {
        pid: u32,
        image: String,
        /// Mapped files whose names resemble `image`, best first.
        similar: Vec<String>,
    },

    #[error("{image} matches several mapped files in process {pid} ({}): pass the full path", .candidates.join(", "))]
    AmbiguousImage {
        pid: u32,
        image: String,
        candidates: Vec<String>,
    },

    #[error("{} has no executable mapping in process {pid}: the image is mapped but not as code (data-only or IL-only file?); probe a file that the process executes", .path.display())]
    NoExecutableMapping { pid: u32, path: PathBuf },

    #[error("{} is not an ELF or PE file: pass an executable, shared library or .NET assembly", .path.display())]
    NotAnObjectFile { path: PathBuf },

    #[error("{} is truncated or corrupt ({what}): check the file (`file`, `readelf -h`) or re-copy it", .path.display())]
    Malformed { path: PathBuf, what: String },

    #[error("no function matches '{pattern}' in {image}{}: list the names with `netprobe symbols {image}`", nearest_suffix(.nearest))]
    NoMatch {
        pattern: String,
        image: String,
        /// Names closest to the pattern, best first.
        nearest: Vec<String>,
    },

    /// The pattern selects functions, but none has a file offset to probe.
    #[error("{name} in {image} has no file offset ({why}), so it cannot be probed by name; `netprobe symbols {image}` says which functions can")]
    NoFileOffset {
        name: String,
        image: String,
        why: String,
    },

    #[error("no function matches '{pattern}' in {image}, and {note}")]
    NoMatchInBundle {
        pattern: String,
        image: String,
        /// Why methods of the bundle cannot be listed (compressed assemblies).
        note: String,
    },

    #[error("refusing to probe {name} in {image}: the PE headers put it at file offset {file_offset} but the live maps put it at {}; the image may be mapped in an unexpected layout, report this with /proc/PID/maps", .live.map_or_else(|| "no executable mapping".to_string(), |o| o.to_string()))]
    OffsetMismatch {
        name: String,
        image: String,
        file_offset: crate::addr::FileOffset,
        live: Option<crate::addr::FileOffset>,
    },

    /// The path a process's maps name for a file now opens another file (a symlink or a mount put
    /// over it since it was mapped), and the mapped file itself could not be opened.
    #[error("refusing {} for process {pid}: the process maps {} (device:inode {mapped}), but that path now opens {opened_file}; the path was replaced since it was mapped, and the mapped file itself is reachable only through /proc/{pid}/map_files, which needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: run netprobe as root, or grant it CAP_CHECKPOINT_RESTORE", .opened.display(), .mapped_path.display())]
    MappedFileReplaced {
        pid: u32,
        mapped_path: PathBuf,
        /// `MAJOR:MINOR INODE` as the maps line has it.
        mapped: String,
        opened: PathBuf,
        /// What `opened` is now: `device:inode ...`, or why it could not be opened.
        opened_file: String,
    },

    /// A probe's file is no longer the file netprobe read there ([`crate::resolve::verify_probe_file`]).
    #[error("refusing to probe {}: it is now {now}, not the file netprobe read there ({was}); it was replaced or changed since, so the offsets computed from it may point anywhere: run the command again", .path.display())]
    ProbeFileChanged {
        path: PathBuf,
        was: String,
        now: String,
    },

    #[error("invalid pattern '{pattern}': {why}")]
    BadPattern { pattern: String, why: String },

    #[error("{} is IL-only (no ReadyToRun code): its methods are JIT-compiled at run time, so uprobes cannot probe them; rebuild it with `dotnet publish -p:PublishReadyToRun=true` (or probe framework methods, which are precompiled)", .path.display())]
    IlOnly { path: PathBuf },

    /// A method that exists in an IL-only assembly (no ReadyToRun code at all).
    #[error("{method} cannot be probed: {} is IL-only (no ReadyToRun code), so the method is JIT-compiled at run time into memory no file backs and uprobes cannot reach it; rebuild the app with `dotnet publish -p:PublishReadyToRun=true` (or probe the precompiled framework methods it calls)", .path.display())]
    JitOnlyMethod { method: String, path: PathBuf },

    /// A method that exists in a ReadyToRun assembly without precompiled code of its own.
    #[error("{method} cannot be probed: {} has ReadyToRun code, but not for this method (crossgen left it to the JIT, e.g. a generic instantiation it did not pregenerate), so it is JIT-compiled at run time and uprobes cannot reach it; probe a precompiled caller or callee (`netprobe symbols {}` lists them)", .path.display(), .path.display())]
    NotPrecompiled { method: String, path: PathBuf },

    #[error("{} is a PE file without .NET metadata (no CLI header): pass a .NET assembly (.dll) instead", .path.display())]
    NotDotnet { path: PathBuf },

    #[error("{} is a component of the composite ReadyToRun image {composite}: its code lives there, and netprobe does not resolve composite images yet; publish without -p:PublishReadyToRunComposite=true to get per-assembly ReadyToRun code", .path.display())]
    CompositeComponent { path: PathBuf, composite: String },

    #[error("{} is a composite ReadyToRun image of {components} assemblies: netprobe does not resolve composite images yet; list a component assembly's methods from a non-composite build (publish without -p:PublishReadyToRunComposite=true)", .path.display())]
    CompositeImage { path: PathBuf, components: u32 },

    #[error("{} has ReadyToRun format {major}.{minor}, which netprobe does not know (it reads formats {}.x to {}.x, which .NET Core 2.1 to .NET 10 write): use a netprobe release that supports this .NET version", .path.display(), crate::dotnet::r2r::versions::MIN_MAJOR, crate::dotnet::r2r::versions::MAX_MAJOR)]
    UnsupportedR2rVersion {
        path: PathBuf,
        major: u16,
        minor: u16,
    },

    #[error("{entry} is stored compressed in the .NET single-file bundle {}: the runtime decompresses it into anonymous memory, where no file backs its code and uprobes cannot reach it; republish with `dotnet publish -p:PublishSingleFile=true -p:EnableCompressionInSingleFile=false` (then the runtime maps it from the bundle and netprobe probes it there)", .bundle.display())]
    CompressedBundleEntry { bundle: PathBuf, entry: String },

    #[error("{entry} is extracted from the .NET single-file bundle {} to disk before it is used (native libraries, and every file of .NET Core 3.x or IncludeAllContentForSelfExtract bundles): probe the extracted copy under $DOTNET_BUNDLE_EXTRACT_BASE_DIR or ~/.net/<app>/{bundle_id}/", .bundle.display())]
    ExtractedBundleEntry {
        bundle: PathBuf,
        entry: String,
        bundle_id: String,
    },

    #[error("{entry} is not in the .NET single-file bundle {}{}: list its files with `netprobe symbols {}`", .bundle.display(), similar_suffix(.similar), .bundle.display())]
    NotInBundle {
        bundle: PathBuf,
        entry: String,
        similar: Vec<String>,
    },

    #[error("{0}")]
    Unsupported(String),

    /// A path a target controls names something that is not a regular file: a FIFO would block
    /// the open or the read, a device like `/dev/zero` never ends. Nothing of it is read.
    #[error("{} is a {kind}, not a regular file: netprobe reads only regular files (a FIFO or device could block it or never end); pass the file itself", .path.display())]
    NotRegularFile { path: PathBuf, kind: &'static str },

    /// A file read whole is larger than any file of its kind netprobe expects.
    #[error("{} is larger than any {what} netprobe reads (more than {cap} bytes): the file is malformed or hostile; check it", .path.display())]
    TooLarge {
        path: PathBuf,
        what: &'static str,
        cap: u64,
    },

    /// The file was truncated (or shrunk) by someone while netprobe read it through its mapping.
    #[error("{} changed size while it was read (another process truncated or rewrote it): try again once it is no longer being written", .path.display())]
    ChangedWhileRead { path: PathBuf },

    /// The symbol names an image would produce add up past the bound of a small multiple of the
    /// file's size ([`crate::name_budget`]).
    #[error("names of {} add up to more than {limit} bytes: the file is malformed or hostile (its symbols share long names); check it", .path.display())]
    NamesTooLarge { path: PathBuf, limit: u64 },

    #[error("{} : {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn similar_suffix(similar: &[String]) -> String {
    if similar.is_empty() {
        String::new()
    } else {
        format!(" (mapped and similar: {})", similar.join(", "))
    }
}

fn nearest_suffix(nearest: &[String]) -> String {
    if nearest.is_empty() {
        String::new()
    } else {
        format!(" (nearest: {})", nearest.join(", "))
    }
}

/// What reading `path` needs that a process with capabilities `have` lacks (capabilities(7);
/// proc(5): `/proc/PID/map_files` needs CAP_SYS_ADMIN or, since Linux 5.9,
/// CAP_CHECKPOINT_RESTORE; another user's `/proc/PID/maps`, `exe` and `root` need ptrace read
/// access, which CAP_SYS_PTRACE gives).
pub fn permission_fix(path: &Path, have: CapSet) -> String {
    let in_proc = path.starts_with("/proc");
    let map_files = in_proc && path.components().any(|c| c.as_os_str() == "map_files");
    if map_files && !have.has(Capability::SysAdmin) && !have.has(Capability::CheckpointRestore) {
        return "map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, which this process lacks: run netprobe as root, or grant it CAP_CHECKPOINT_RESTORE".into();
    }
    if in_proc && !have.has(Capability::SysPtrace) {
        return "another user's process needs CAP_SYS_PTRACE, which this process lacks: run netprobe as root, or grant it CAP_SYS_PTRACE".into();
    }
    if !in_proc && !have.has(Capability::DacReadSearch) && !have.has(Capability::DacOverride) {
        return "reading another user's file needs CAP_DAC_READ_SEARCH, which this process lacks: run netprobe as root, or grant it CAP_DAC_READ_SEARCH".into();
    }
    "check its owner and mode (ls -l), and for a process whether it is in another user namespace"
        .into()
}

impl Error {
    /// Classifies an I/O error on `path`: permission problems and missing `/proc/PID` entries get
    /// their own variants (with their own fixes); everything else stays an [`Error::Io`].
    pub fn io(path: impl AsRef<Path>, source: io::Error) -> Error {
        let path = path.as_ref().to_path_buf();
        match source.kind() {
            io::ErrorKind::PermissionDenied => Error::PermissionDenied {
                fix: permission_fix(&path, CapSet::effective()),
                path,
            },
            _ => Error::Io { path, source },
        }
    }

    /// A malformed-input error for `path`.
    pub fn malformed(path: impl AsRef<Path>, what: impl Into<String>) -> Error {
        Error::Malformed {
            path: path.as_ref().to_path_buf(),
            what: what.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[Capability]) -> CapSet {
        CapSet(list.iter().fold(0, |m, c| m | 1 << c.bit()))
    }

    #[test]
    fn a_permission_error_names_the_capability_missing_for_that_path() {
        let none = caps(&[]);
        let maps = Path::new("/proc/12/maps");
        let map_files = Path::new("/proc/12/map_files/5000-6000");
        let file = Path::new("/srv/app/lib.so");
        assert!(permission_fix(maps, none).contains("needs CAP_SYS_PTRACE"));
        assert!(permission_fix(map_files, none)
            .contains("needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE"));
        assert!(permission_fix(file, none).contains("needs CAP_DAC_READ_SEARCH"));
        // With what each needs, none is named.
        let all = caps(&[
            Capability::SysPtrace,
            Capability::CheckpointRestore,
            Capability::DacReadSearch,
        ]);
        for p in [maps, map_files, file] {
            assert!(!permission_fix(p, all).contains("CAP_"), "{p:?}");
        }
    }
}
