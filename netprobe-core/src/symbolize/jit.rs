//! Names of JIT-compiled code in one process: the runtime's `/tmp/perf-PID.map` and, when it
//! is there, its jitdump `/tmp/jit-PID.dump` ([`crate::perfmap::jitdump`]), in the folder opened
//! inside the process's root ([`Process::open_dir_in_root`]: a process in a container is read in
//! its own mount namespace, and a symlink it puts there cannot name a file of the host; the folder
//! stays open after the process exits, so a `-c` command's frames are named after it ended), under
//! the pid the process has in its own pid namespace (`NSpid` in `/proc/PID/status`, `proc(5)`):
//! that is the pid the runtime writes into the file name.

use crate::perfmap::{complete_lines, jitdump::parse_jitdump, parse_map_line};
use crate::process::Process;
use crate::regular_file::cap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// One named range of JIT code, in runtime addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JitRange {
    start: u64,
    end: u64,
    name: String,
}

/// The JIT code names of one process, re-read when its files grow.
#[derive(Debug, Default)]
pub struct JitNames {
    /// The process whose root the folder is resolved in (`None`: nothing to read).
    process: Option<Process>,
    /// The folder of the two files as the process names it, and opened once it could be.
    dir_path: PathBuf,
    dir: Option<OwnedFd>,
    /// The two files' names in that folder.
    perf_map: String,
    jitdump: String,
    /// Sizes of the two files when last read (`None`: absent).
    read_sizes: (Option<u64>, Option<u64>),
    ranges: Vec<JitRange>,
}

/// The pid of `process` in its own pid namespace: the last `NSpid` field of its status (the
/// pid itself on kernels before 4.1, which have no such line).
pub fn namespace_pid(process: &Process) -> u32 {
    std::fs::read_to_string(process.dir().join("status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|v| v.split_whitespace().last()?.parse().ok())
        })
        .unwrap_or(process.pid())
}

/// The first of `names` set (non-empty) in the environment `process` started with.
pub fn env_var(process: &Process, names: &[&str]) -> Option<PathBuf> {
    let env = process.environ().ok()?;
    names.iter().find_map(|n| {
        env.iter()
            .find(|(k, v)| k == n && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    })
}

/// Where the .NET runtime of a process writes its perf map files: the folder its
/// `DOTNET_PerfMapJitDumpPath` (or `COMPlus_PerfMapJitDumpPath`) names, else `/tmp`
/// (`src/coreclr/inc/clrconfignames.h`, `PerfMapJitDumpPath`), as the process sees it; the
/// names carry its pid in its own pid namespace (`src/coreclr/vm/perfmap.cpp`: `perf-PID.map`,
/// `jit-PID.dump`, and `perfinfo-PID.map`, the image loads, which .NET 8 writes with the map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfMapFiles {
    pub dir: PathBuf,
    pub perf_map: String,
    pub jitdump: String,
    pub perf_info: String,
}

impl PerfMapFiles {
    pub fn of(process: &Process) -> PerfMapFiles {
        let nspid = namespace_pid(process);
        PerfMapFiles {
            dir: env_var(
                process,
                &["DOTNET_PerfMapJitDumpPath", "COMPlus_PerfMapJitDumpPath"],
            )
            .unwrap_or_else(|| PathBuf::from("/tmp")),
            perf_map: format!("perf-{nspid}.map"),
            jitdump: format!("jit-{nspid}.dump"),
            perf_info: format!("perfinfo-{nspid}.map"),
        }
    }
}

impl JitNames {
    /// The perf map and jitdump paths of `process` (nothing is read yet): see [`PerfMapFiles`].
    pub fn for_process(process: &Process) -> JitNames {
        let files = PerfMapFiles::of(process);
        JitNames {
            process: Some(process.clone()),
            dir: process.open_dir_in_root(&files.dir).ok(),
            dir_path: files.dir,
            perf_map: files.perf_map,
            jitdump: files.jitdump,
            ..JitNames::default()
        }
    }

    /// The file `name` of the folder, when it is a regular file there.
    fn open(&self, name: &str) -> Option<std::fs::File> {
        let dir = self.dir.as_ref()?;
        crate::regular_file::open_at(dir, name, &self.dir_path.join(name)).ok()
    }

    /// The size of the file `name` of the folder.
    fn size(&self, name: &str) -> Option<u64> {
        Some(self.open(name)?.metadata().ok()?.len())
    }

    /// The bytes of the file `name` of the folder, up to `cap` (past it the file is left unread
    /// and its frames stay unnamed, rather than read without bound).
    fn read(&self, name: &str, cap: u64, what: &'static str) -> Option<Vec<u8>> {
        let file = self.open(name)?;
        crate::regular_file::read_open_capped(file, &self.dir_path.join(name), cap, what).ok()
    }

    /// Whether the runtime writes a perf map or jitdump for this process (either file exists).
    pub fn available(&self) -> bool {
        self.size(&self.perf_map).is_some() || self.size(&self.jitdump).is_some()
    }

    /// The perf map's path as the process names it.
    pub fn perf_map_path(&self) -> PathBuf {
        self.dir_path.join(&self.perf_map)
    }

    /// Re-reads both files when either changed size since the last read; `true` when it did.
    pub fn refresh(&mut self) -> bool {
        // A folder that did not exist yet when the process was first seen (the runtime creates
        // a `PerfMapJitDumpPath` of its own) is looked for again while the process runs.
        if self.dir.is_none() {
            if let Some(p) = &self.process {
                self.dir = p.open_dir_in_root(&self.dir_path).ok();
            }
        }
        let now = (self.size(&self.perf_map), self.size(&self.jitdump));
        if now == self.read_sizes {
            return false;
        }
        self.read_sizes = now;
        let mut ranges = Vec::new();
        // jitdump first: for code named in both, the perf map's line (read second, so later in
        // the list) is the one kept below.
        if let Some(loads) = self
            .read(&self.jitdump, cap::JITDUMP, "jitdump")
            .and_then(|b| parse_jitdump(&b))
        {
            ranges.extend(
                loads
                    .into_iter()
                    .filter(|l| l.code_size > 0)
                    .map(|l| JitRange {
                        start: l.code_addr,
                        end: l.code_addr.saturating_add(l.code_size),
                        name: l.name,
                    }),
            );
        }
        if let Some(text) = self.read(&self.perf_map, cap::PERF_MAP, "perf map") {
            ranges.extend(
                complete_lines(&text)
                    .split(|&b| b == b'\n')
                    .filter_map(|l| parse_map_line(l).ok())
                    .filter(|l| l.size > 0)
                    .map(|l| JitRange {
                        start: l.addr,
                        end: l.addr.saturating_add(l.size),
                        name: l.name,
                    }),
            );
        }
        // Newest first among ranges starting at the same address (code memory is reused after
        // a method is re-compiled at a higher tier), then cut overlaps.
        ranges.reverse();
        ranges.sort_by_key(|r| r.start);
        ranges.dedup_by_key(|r| r.start);
        for i in 1..ranges.len() {
            let next = ranges[i].start;
            if ranges[i - 1].end > next {
                ranges[i - 1].end = next;
            }
        }
        self.ranges = ranges;
        true
    }

    /// The name and start of the JIT code holding `addr`.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self
            .ranges
            .partition_point(|r| r.start <= addr)
            .checked_sub(1)?;
        let r = &self.ranges[i];
        (addr < r.end).then_some((r.name.as_str(), r.start))
    }
}
