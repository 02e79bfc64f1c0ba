//! The capabilities this process holds, from the `CapEff` line of `/proc/self/status` (proc(5):
//! "CapEff: Mask of capabilities enabled in effective set", hexadecimal), so that what is missing
//! for probing can be named (capabilities(7) lists each one and what it allows).

use std::fmt;

/// The capabilities netprobe's work depends on, with their bit numbers from
/// `include/uapi/linux/capability.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Reads and searches files whatever their mode.
    DacReadSearch,
    /// Writes files whatever their mode (tracefs's `uprobe_events` is root's, mode 0640).
    DacOverride,
    SetGid,
    SetUid,
    /// Reads other users' `/proc/PID/maps`, `exe` and `root` (ptrace access mode checks).
    SysPtrace,
    /// Opens `/proc/PID/map_files`, mounts tracefs.
    SysAdmin,
    /// perf_event_open(2) beyond `perf_event_paranoid` (Linux 5.8).
    Perfmon,
    Bpf,
    /// Opens `/proc/PID/map_files` (Linux 5.9).
    CheckpointRestore,
}

impl Capability {
    /// The bit number in a capability mask.
    pub fn bit(self) -> u32 {
        match self {
            Capability::DacOverride => 1,
            Capability::DacReadSearch => 2,
            Capability::SetGid => 6,
            Capability::SetUid => 7,
            Capability::SysPtrace => 19,
            Capability::SysAdmin => 21,
            Capability::Perfmon => 38,
            Capability::Bpf => 39,
            Capability::CheckpointRestore => 40,
        }
    }

    /// The name capabilities(7) gives it, `CAP_DAC_OVERRIDE`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::DacOverride => "CAP_DAC_OVERRIDE",
            Capability::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Capability::SetGid => "CAP_SETGID",
            Capability::SetUid => "CAP_SETUID",
            Capability::SysPtrace => "CAP_SYS_PTRACE",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::Perfmon => "CAP_PERFMON",
            Capability::Bpf => "CAP_BPF",
            Capability::CheckpointRestore => "CAP_CHECKPOINT_RESTORE",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A capability mask, as `CapEff` holds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapSet(pub u64);

impl CapSet {
    /// Every capability (what a process without a `/proc` to read is assumed to hold, so that no
    /// capability is named as missing on a guess).
    pub const ALL: CapSet = CapSet(u64::MAX);

    /// The `CapEff:` line of a `/proc/PID/status` text; `None` when it has none or it is not hex.
    pub fn effective_from_status(status: &str) -> Option<CapSet> {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))?
            .trim();
        if hex.is_empty() || hex.len() > 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok().map(CapSet)
    }

    /// This process's effective set (all, when `/proc/self/status` cannot be read or parsed).
    pub fn effective() -> CapSet {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| CapSet::effective_from_status(&s))
            .unwrap_or(CapSet::ALL)
    }

    pub fn has(self, cap: Capability) -> bool {
        self.0 & (1u64 << cap.bit()) != 0
    }

    /// Those of `caps` this set lacks, in the order given.
    pub fn missing(self, caps: &[Capability]) -> Vec<Capability> {
        caps.iter().copied().filter(|&c| !self.has(c)).collect()
    }
}

/// `CAP_A and CAP_B` (one name alone, or `A, B and C`).
pub fn names(caps: &[Capability]) -> String {
    let names: Vec<&str> = caps.iter().map(|c| c.name()).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000002\nCapEff:\t0000000000080002\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn reads_the_effective_set() {
        let set = CapSet::effective_from_status(STATUS).unwrap();
        assert!(set.has(Capability::DacOverride));
        assert!(set.has(Capability::SysPtrace));
        assert!(!set.has(Capability::SysAdmin));
        assert_eq!(
            set.missing(&[
                Capability::DacOverride,
                Capability::SysAdmin,
                Capability::CheckpointRestore
            ]),
            [Capability::SysAdmin, Capability::CheckpointRestore]
        );
    }

    #[test]
    fn a_status_without_a_hex_capeff_has_no_set() {
        assert_eq!(CapSet::effective_from_status("Name:\tcat\n"), None);
        assert_eq!(CapSet::effective_from_status("CapEff:\tzz\n"), None);
        assert_eq!(
            CapSet::effective_from_status("CapEff:\t00000000000000000001\n"),
            None
        );
    }

    #[test]
    fn names_join_like_a_sentence() {
        assert_eq!(names(&[Capability::SysAdmin]), "CAP_SYS_ADMIN");
        assert_eq!(
            names(&[Capability::SetUid, Capability::SetGid]),
            "CAP_SETUID and CAP_SETGID"
        );
        assert_eq!(
            names(&[
                Capability::DacOverride,
                Capability::SysPtrace,
                Capability::SysAdmin
            ]),
            "CAP_DAC_OVERRIDE, CAP_SYS_PTRACE and CAP_SYS_ADMIN"
        );
    }
}
