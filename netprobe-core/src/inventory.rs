//! What runs on this machine, for `netprobe ps`: per process its container, its kind (.NET, Go,
//! native) and whether netprobe can probe it. Cheap by design, so that hundreds of processes list
//! in well under a second: per process it reads `/proc/PID/stat`, `cgroup` and `maps`
//! (`proc(5)`), and of its executable only the ELF headers and the `.go.buildinfo` section
//! (memory-mapped: untouched pages are never read). No symbol table is parsed.
//!
//! The .NET runtime version and tiering settings come from a caller-supplied function
//! ([`DotnetFacts`]): they depend on the runtime-settings rules of the engine.

use crate::abi::go::{abi_for, GoAbi};
use crate::capabilities::{CapSet, Capability};
use crate::containers::Catalog;
pub use crate::containers::{container_of_cgroup, Container};
use crate::elf::parser::ElfView;
use crate::file_id::FileId;
use crate::golang::buildinfo::BuildInfo;
use crate::maps::MapsEntry;
use crate::normalize::MappedImage;
use crate::process::Process;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

use crate::process::PF_KTHREAD;

/// One process as `netprobe ps` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessEntry {
    pub pid: u32,
    pub comm: String,
    /// The container the process runs in, from its cgroup; `None` on the host.
    pub container: Option<Container>,
    /// Serialized in place: `"kind": "dotnet"` beside the kind's own fields.
    #[serde(flatten)]
    pub kind: Kind,
    /// Whether netprobe can place uprobes on this process's code, and if not, why.
    pub probe: Probeable,
}

/// What kind of program a process runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Kind {
    /// CoreCLR is mapped (`libcoreclr.so`), or the W^X double mapping of .NET 7+
    /// (`/memfd:doublemapper`) of a single-file app.
    Dotnet(DotnetProcess),
    /// The executable carries a Go function table or build info.
    Go(GoProcess),
    /// Anything else (C, C++, Rust, scripts' interpreters...).
    Native,
}

/// A .NET process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DotnetProcess {
    /// Version and tiering, from the [`DotnetFacts`] function; `None` when it could not tell.
    pub runtime: Option<DotnetRuntime>,
    /// ReadyToRun images mapped: `.dll`/`.exe` files with an executable mapping (the runtime maps
    /// an IL-only assembly without execute permission; R2R code runs from its mapped sections).
    pub r2r_images: usize,
}

/// The runtime of a .NET process and whether tiered compilation will replace its ReadyToRun code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DotnetRuntime {
    /// `8.0.4`, `3.1.23`.
    pub version: String,
    /// Whether hot ReadyToRun methods get replaced by tier-1 JIT code (probes on them then stop
    /// firing).
    pub tiering: bool,
    /// What decided it: `the default`, `DOTNET_TieredCompilation=0`, a runtimeconfig property...
    pub tiering_reason: String,
}

/// A Go process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GoProcess {
    /// `go1.19.8`; `None` without build info (Go before 1.13, or removed).
    pub version: Option<String>,
    /// The calling convention, from the version; `None` when the version is unknown.
    pub abi: Option<GoAbi>,
}

/// Can netprobe probe it?
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probeable {
    pub ok: bool,
    /// Why not (empty when `ok`).
    pub reasons: Vec<String>,
}

/// What holds for every process: who netprobe runs as, with which capabilities, and whether
/// tracefs is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// netprobe's effective uid.
    pub euid: u32,
    /// netprobe's effective capabilities ([`CapSet::effective`]).
    pub caps: CapSet,
    /// `true` when the tracing backend found a tracefs with uprobe support (the backend layer
    /// decides; the core does not look at tracefs).
    pub tracefs: bool,
}

/// The engine's answer about a .NET process: version and tiering from its mapped runtime, its
/// environment and its runtimeconfig. `None` when it cannot tell.
pub type DotnetFacts<'a> = &'a dyn Fn(u32) -> Option<DotnetRuntime>;

/// Every user process under `/proc`, by pid; kernel threads and processes that exit while being
/// read are left out.
/// Containers are named from `containers` (see [`crate::containers::read_system`]).
pub fn scan(host: &Host, containers: &Catalog, dotnet: DotnetFacts<'_>) -> Vec<ProcessEntry> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    let mut go_cache = GoCache::new();
    pids.into_iter()
        .filter_map(|pid| entry_with(pid, host, containers, dotnet, &mut go_cache))
        .collect()
}

/// The Go facts per executable file (by [`FileId`]): hundreds of processes often run a handful
/// of executables (`sleep`, `bash`, workers), each read once.
type GoCache = HashMap<FileId, Option<GoProcess>>;

/// One process; `None` for a kernel thread or a process that is gone.
pub fn entry(
    pid: u32,
    host: &Host,
    containers: &Catalog,
    dotnet: DotnetFacts<'_>,
) -> Option<ProcessEntry> {
    entry_with(pid, host, containers, dotnet, &mut GoCache::new())
}

fn entry_with(
    pid: u32,
    host: &Host,
    containers: &Catalog,
    dotnet: DotnetFacts<'_>,
    go_cache: &mut GoCache,
) -> Option<ProcessEntry> {
    let process = Process::open(pid).ok()?;
    let stat = std::fs::read(process.dir().join("stat")).ok()?;
    let (comm, flags) = parse_stat(&stat)?;
    if flags & PF_KTHREAD != 0 {
        return None;
    }
    let container = container_of_process(process.dir(), containers);
    let mut reasons = Vec::new();
    // tracefs's files are root's (`uprobe_events` mode 0640, the folder 0700): another uid
    // writes them only with CAP_DAC_OVERRIDE (capabilities(7)).
    if host.euid != 0 && !host.caps.has(Capability::DacOverride) {
        reasons.push(
            "missing CAP_DAC_OVERRIDE (tracefs's probe files are root's, mode 0640)".to_string(),
        );
    }
    if !host.tracefs {
        reasons.push("no tracefs (mount -t tracefs nodev /sys/kernel/tracing)".to_string());
    }
    let maps = match process.maps() {
        Ok(m) => m,
        Err(e) => {
            // Another user's maps need ptrace read access (proc(5), "/proc/pid/maps"), which
            // CAP_SYS_PTRACE grants.
            if !host.caps.has(Capability::SysPtrace)
                && matches!(e, crate::error::Error::PermissionDenied { .. })
            {
                reasons.push(format!(
                    "missing CAP_SYS_PTRACE (its /proc/{pid}/maps is another user's)"
                ));
            } else {
                reasons.push(format!("maps unreadable: {e}"));
            }
            Vec::new()
        }
    };
    let exe_link = std::fs::read_link(process.dir().join("exe")).ok();
    // `/proc/PID/exe` opens the executable the process runs, not what its path names now (a
    // FIFO or a symlink the process put there since: proc(5)); opened without blocking all the
    // same.
    let exe_readable =
        exe_link.is_some() && crate::regular_file::open(&process.dir().join("exe")).is_ok();
    let ptrace_named = reasons.iter().any(|r| r.contains("CAP_SYS_PTRACE"));
    if !exe_readable && !ptrace_named {
        match &exe_link {
            Some(exe) => reasons.push(format!(
                "executable {} not readable through /proc/{pid}/exe",
                exe.display()
            )),
            None => reasons.push("no executable (zombie, or no permission)".to_string()),
        }
    }
    let kind = if is_dotnet(&maps) {
        Kind::Dotnet(DotnetProcess {
            runtime: dotnet(pid),
            r2r_images: r2r_images(&maps),
        })
    } else {
        // /proc/PID/exe opens the file the process runs from any namespace, even when deleted.
        let exe = process.dir().join("exe");
        let go = match FileId::of(&exe) {
            Some(id) => go_cache.entry(id).or_insert_with(|| go_facts(&exe)).clone(),
            None => None,
        };
        match go {
            Some(go) => Kind::Go(go),
            None => Kind::Native,
        }
    };
    Some(ProcessEntry {
        pid,
        comm,
        container,
        kind,
        probe: Probeable {
            ok: reasons.is_empty(),
            reasons,
        },
    })
}

pub use crate::process::parse_stat;

/// The container of the process whose `/proc` directory is `proc_dir`, from its cgroup, named
/// by the runtimes' metadata in `containers` when it is known there; `None` on the host (or
/// gone).
pub fn container_of_process(proc_dir: &Path, containers: &Catalog) -> Option<Container> {
    let text = std::fs::read(proc_dir.join("cgroup")).ok()?;
    containers.container_of_cgroup(&String::from_utf8_lossy(&text))
}

/// Whether the maps show a CoreCLR process: `libcoreclr.so` mapped (framework-dependent and
/// self-contained apps), or the W^X double mapping `.NET 7+` creates (`/memfd:doublemapper`,
/// dotnet/runtime `src/coreclr/minipal/Unix/doublemapping.cpp`), which a single-file app (runtime
/// linked into the host, no `libcoreclr.so`) shows too.
pub fn is_dotnet(maps: &[MapsEntry]) -> bool {
    maps.iter().any(|m| {
        m.path.file().is_some_and(|p| {
            p.file_name().is_some_and(|n| n == "libcoreclr.so")
                || p.as_os_str()
                    .to_string_lossy()
                    .starts_with("/memfd:doublemapper")
        })
    })
}

/// ReadyToRun images among the mapped files: `.dll`/`.exe` files with an executable mapping.
pub fn r2r_images(maps: &[MapsEntry]) -> usize {
    MappedImage::group(maps)
        .iter()
        .filter(|img| {
            img.path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("dll") || e.eq_ignore_ascii_case("exe"))
                && img.exec_mappings().next().is_some()
        })
        .count()
}

/// The Go facts of the executable at `exe`: from the `.go.buildinfo` section (version) and the
/// presence of a Go section (`.gopclntab`, `.go.buildinfo`, `.note.go.buildid`). Only the ELF
/// headers and that section are read. `None` when it is not a Go binary (or not ELF).
pub fn go_facts(exe: &Path) -> Option<GoProcess> {
    let bytes = crate::bytes::FileBytes::open(exe).ok()?;
    let elf = ElfView::parse(exe, &bytes).ok()?;
    let mut is_go = false;
    let mut buildinfo = None;
    for sh in &elf.section_headers {
        match elf.section_name(sh) {
            Some(".go.buildinfo") => {
                is_go = true;
                buildinfo = Some((sh.sh_offset, sh.sh_size));
            }
            Some(".gopclntab" | ".note.go.buildid") => is_go = true,
            _ => {}
        }
    }
    if !is_go {
        return None;
    }
    // Only the section (never the whole-file magic scan of `BuildInfo::locate` without one).
    let version = buildinfo.and_then(|(offset, _)| {
        let blob = bytes
            .get(usize::try_from(offset).ok()?..)
            .filter(|b| b.starts_with(crate::golang::buildinfo::MAGIC))?;
        let segments = crate::elf::LoadSegments::from_program_headers(&elf.program_headers);
        BuildInfo::parse(blob, &bytes, &segments)
    });
    let version = version.as_ref().and_then(BuildInfo::version);
    let arch = elf.arch().unwrap_or(crate::arch::Arch::X86_64);
    Some(GoProcess {
        abi: version.as_ref().map(|v| abi_for(v, arch)),
        version: version.map(|v| v.raw),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "3f4e1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";

    #[test]
    fn cgroup_layouts_of_each_engine() {
        let cases = [
            ("host, cgroup v2", "0::/user.slice/user-0.slice/session-1.scope\n".to_string()),
            ("docker, systemd driver", format!("0::/system.slice/docker-{ID}.scope\n")),
            ("docker, cgroupfs driver", format!("0::/docker/{ID}\n")),
            (
                "docker, cgroup v1",
                format!("12:pids:/docker/{ID}\n11:memory:/docker/{ID}\n0::/\n"),
            ),
            (
                "kubernetes containerd",
                format!("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice/cri-containerd-{ID}.scope\n"),
            ),
            ("nerdctl", format!("0::/default/{ID}\n")),
            (
                "cri-o",
                format!("0::/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope\n"),
            ),
            ("cri-o monitor", format!("0::/system.slice/crio-conmon-{ID}.scope\n")),
            ("podman", format!("0::/machine.slice/libpod-{ID}.scope/container\n")),
            ("podman cgroupfs", format!("0::/libpod_parent/libpod-{ID}\n")),
            ("bare id", format!("0::/somewhere/{ID}\n")),
            ("id with uppercase", format!("0::/docker/{}\n", ID.to_uppercase())),
        ];
        let shown: Vec<String> = cases
            .iter()
            .map(|(what, text)| match container_of_cgroup(text) {
                Some(c) => format!("{what}: {} {}", c.engine, c.id),
                None => format!("{what}: host"),
            })
            .collect();
        insta::assert_snapshot!(shown.join("\n"));
    }

    #[test]
    fn stat_with_parentheses_and_spaces_in_comm() {
        let stat = b"42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0";
        assert_eq!(parse_stat(stat), Some(("a) b (c)".to_string(), 4194560)));
        let kthread = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0";
        let (_, flags) = parse_stat(kthread).unwrap();
        assert_ne!(flags & PF_KTHREAD, 0);
        assert_eq!(parse_stat(b"7 (x"), None);
    }

    proptest! {
        #[test]
        fn hostile_proc_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_stat(&bytes);
            let text = String::from_utf8_lossy(&bytes);
            let _ = container_of_cgroup(&text);
            let _ = crate::containers::docker::metadata_of_config("abc", &bytes);
        }

        #[test]
        fn any_64_hex_id_under_docker_is_found(id in "[0-9a-f]{64}", prefix in "(/[a-z.]{1,8}){0,3}") {
            let c = container_of_cgroup(&format!("0::{prefix}/docker-{id}.scope\n")).unwrap();
            prop_assert_eq!(c.id, id);
            prop_assert_eq!(c.engine, "docker");
        }
    }
}
