//! What a probe hit costs the process that makes it, on this machine: measured once, kept in a
//! cache file, per kind of instruction the kernel traps on (`KernelHandling`: an emulated
//! instruction takes one trap, a single-stepped one two) and for the record a sampled session
//! writes per hit.
//!
//! How: netprobe probes functions of its own binary whose first instruction is known (a NOP, a
//! 5-byte NOP, a register `mov`, assembled below), through the kernel's `uprobe` PMU
//! (`/sys/bus/event_source/devices/uprobe`, perf_event_open(2) with `config1` = the file's path
//! and `config2` = the offset) as a counting event on the calibrating thread, and times the same
//! calls with and without it on that thread's CPU clock (CLOCK_THREAD_CPUTIME_ID: the trap is the
//! thread's own time, kernel included). The per-task event puts the breakpoint in netprobe's own
//! memory only, so no other process (another netprobe) traps. A sampled event with a ring buffer
//! gives the cost of writing a record. The fastest of a few rounds is kept: the cost a hit
//! cannot go below, which is what the estimate multiplies by the hit rate.

use crate::backend::perf_event::ring::Ring;
use netprobe_core::probe_point::KernelHandling;
use perf_event_open_sys as sys;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

// The calibration targets. Each returns its argument so the call cannot be folded away; the
// first instruction is what the kernel traps on.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".globl netprobe_calibrate_emulated",
    ".type netprobe_calibrate_emulated,@function",
    "netprobe_calibrate_emulated:",
    // 90: nop, emulated (`branch_setup_xol_ops`, `insn_is_nop`).
    "nop",
    "mov rax, rdi",
    "ret",
    ".size netprobe_calibrate_emulated, .-netprobe_calibrate_emulated",
    ".globl netprobe_calibrate_optimized",
    ".type netprobe_calibrate_optimized,@function",
    "netprobe_calibrate_optimized:",
    // 0f 1f 44 00 00: the 5-byte NOP the kernel may turn into a call (`can_optimize`).
    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "mov rax, rdi",
    "ret",
    ".size netprobe_calibrate_optimized, .-netprobe_calibrate_optimized",
    ".globl netprobe_calibrate_stepped",
    ".type netprobe_calibrate_stepped,@function",
    "netprobe_calibrate_stepped:",
    // 48 89 f8: mov rax, rdi, single-stepped out of line (`default_xol_ops`).
    "mov rax, rdi",
    "ret",
    ".size netprobe_calibrate_stepped, .-netprobe_calibrate_stepped",
);

// The same three on aarch64 (the argument and the result are both in x0): a `b` to the next
// instruction, which the kernel simulates (`arch/arm64/kernel/probes/decode-insn.c`,
// `aarch64_insn_is_b` -> `simulate_b_bl`); again a `b`, as arm64 has no optimized uprobes; and
// `add x0, x0, #0`, stepped out of line (`INSN_GOOD`).
#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".text",
    ".globl netprobe_calibrate_emulated",
    ".type netprobe_calibrate_emulated,%function",
    "netprobe_calibrate_emulated:",
    "b 1f",
    "1:",
    "ret",
    ".size netprobe_calibrate_emulated, .-netprobe_calibrate_emulated",
    ".globl netprobe_calibrate_optimized",
    ".type netprobe_calibrate_optimized,%function",
    "netprobe_calibrate_optimized:",
    "b 2f",
    "2:",
    "ret",
    ".size netprobe_calibrate_optimized, .-netprobe_calibrate_optimized",
    ".globl netprobe_calibrate_stepped",
    ".type netprobe_calibrate_stepped,%function",
    "netprobe_calibrate_stepped:",
    "add x0, x0, #0",
    "ret",
    ".size netprobe_calibrate_stepped, .-netprobe_calibrate_stepped",
);

extern "C" {
    fn netprobe_calibrate_emulated(x: u64) -> u64;
    fn netprobe_calibrate_optimized(x: u64) -> u64;
    fn netprobe_calibrate_stepped(x: u64) -> u64;
}

/// Nanoseconds a hit costs the process that makes it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HitCosts {
    /// A trap on an instruction the kernel emulates (`push`, NOP, relative jumps).
    pub emulated_ns: f64,
    /// A 5-byte NOP, which the kernel may replace with a call into a trampoline.
    pub optimized_ns: f64,
    /// A trap and a single-step of the instruction out of line.
    pub single_stepped_ns: f64,
    /// Writing a hit's record into a perf ring buffer (sampled sessions; counted ones write none).
    pub record_ns: f64,
    /// Measured on this machine (`false`: the typical figures of BENCHMARKS.md, used where the
    /// calibration cannot run, e.g. without CAP_PERFMON for the uprobe PMU).
    pub measured: bool,
}

impl HitCosts {
    /// The figures measured on this project's machines (BENCHMARKS.md, "Cheaper entry hits").
    pub const TYPICAL: HitCosts = HitCosts {
        emulated_ns: 1500.0,
        optimized_ns: 1000.0,
        single_stepped_ns: 12000.0,
        record_ns: 300.0,
        measured: false,
    };

    /// The cost of one hit of a probe whose instruction the kernel handles as `h`; `records`:
    /// the session writes a record per hit.
    pub fn per_hit_ns(&self, h: KernelHandling, records: bool) -> f64 {
        let trap = match h {
            KernelHandling::Optimized => self.optimized_ns,
            KernelHandling::Emulated => self.emulated_ns,
            KernelHandling::SingleStepped | KernelHandling::Refused => self.single_stepped_ns,
        };
        trap + if records { self.record_ns } else { 0.0 }
    }
}

/// What the cache file holds: the costs and what they were measured on.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    machine: String,
    costs: HitCosts,
}

/// Names this machine for the cache: kernel release, CPU model, netprobe's version (a new build
/// may trap differently only through the kernel, but a new version recalibrates cheaply).
fn machine_key() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    format!(
        "{} | {} | netprobe {}",
        release.trim(),
        cpu,
        env!("CARGO_PKG_VERSION")
    )
}

/// The cache file: `$XDG_CACHE_HOME/netprobe/hit-costs.json`, else `~/.cache/...`, else `None`.
fn cache_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("netprobe").join("hit-costs.json"))
}

/// This machine's hit costs: from the cache when it names this machine, else measured now (about
/// a fifth of a second) and cached; the typical figures when they cannot be measured.
pub fn hit_costs() -> HitCosts {
    let key = machine_key();
    let path = cache_path();
    if let Some(p) = &path {
        // A file of a few hundred bytes at most; anything else (or another machine's) is
        // measured again.
        if let Ok(bytes) = netprobe_core::regular_file::read_capped(p, 4096, "hit-cost cache") {
            if let Ok(c) = serde_json::from_slice::<Cached>(&bytes) {
                if c.machine == key && c.costs.measured && plausible(&c.costs) {
                    return c.costs;
                }
            }
        }
    }
    let Some(costs) = measure() else {
        return HitCosts::TYPICAL;
    };
    if let Some(p) = &path {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let text = serde_json::to_vec(&Cached {
            machine: key,
            costs,
        })
        .unwrap_or_default();
        let _ = crate::output_file::replace_file(p, |w| w.write_all(&text));
    }
    costs
}

/// Costs a cache file may hold: positive, finite, below a second.
fn plausible(c: &HitCosts) -> bool {
    [
        c.emulated_ns,
        c.optimized_ns,
        c.single_stepped_ns,
        c.record_ns,
    ]
    .iter()
    .all(|v| v.is_finite() && *v >= 0.0 && *v < 1e9)
}

/// CPU time of this thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Thread CPU nanoseconds of `n` calls of `f`.
fn time_calls(f: unsafe extern "C" fn(u64) -> u64, n: u64) -> u64 {
    let start = thread_cpu_ns();
    let mut x = 0u64;
    for i in 0..n {
        // SAFETY: the calibration functions read one register and return; no memory access.
        x = x.wrapping_add(unsafe { f(i) });
    }
    std::hint::black_box(x);
    thread_cpu_ns().saturating_sub(start)
}

/// The file offset of the code at runtime address `addr` in netprobe's own executable
/// (`/proc/self/maps`: the mapping holding it, `addr - start + offset`).
fn own_file_offset(addr: u64) -> Option<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (range, _perms, off) = (f.next()?, f.next()?, f.next()?);
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
        );
        let off = u64::from_str_radix(off, 16).ok()?;
        (addr >= a && addr < b).then(|| addr - a + off)
    })
}

/// A uprobe PMU event on this thread at `offset` of netprobe's own executable, enabled;
/// `sampled`: a record per hit into `ring`.
fn pmu_uprobe(offset: u64, sampled: bool) -> Option<(OwnedFd, Option<Ring>)> {
    let pmu: u32 = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let path = std::ffi::CString::new(exe.into_os_string().into_encoded_bytes()).ok()?;
    let mut a = sys::bindings::perf_event_attr {
        type_: pmu,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        ..Default::default()
    };
    // `config1` is the path (a user pointer), `config2` the offset (kernel
    // `perf_uprobe_event_init` / `perf_uprobe_init`).
    a.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    a.__bindgen_anon_4.config2 = offset;
    a.set_exclude_kernel(1);
    if sampled {
        a.sample_type = (sys::bindings::PERF_SAMPLE_TID
            | sys::bindings::PERF_SAMPLE_TIME
            | sys::bindings::PERF_SAMPLE_RAW) as u64;
        a.__bindgen_anon_1.sample_period = 1;
        a.__bindgen_anon_2.wakeup_events = 1 << 20;
    }
    // `path` outlives the call, which copies it.
    let fd = crate::backend::perf_event::open_event(&mut a, 0, -1).ok()?;
    if !sampled {
        return Some((fd, None));
    }
    // 1 MiB: the records of a round (about 40 bytes each) fit without being read.
    let ring = Ring::map(fd.try_clone().ok()?, 256).ok()?;
    Some((fd, Some(ring)))
}

/// Thread CPU nanoseconds per call of `f` with a uprobe at its first instruction, minus without:
/// the fastest of `rounds` rounds of `n` calls. `None` when the probe cannot be placed.
fn cost_of(f: unsafe extern "C" fn(u64) -> u64, n: u64, sampled: bool) -> Option<f64> {
    let offset = own_file_offset(f as usize as u64)?;
    let rounds = 3;
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let base = time_calls(f, n);
        let (fd, ring) = pmu_uprobe(offset, sampled)?;
        let probed = time_calls(f, n);
        let mut hits = 0u64;
        // SAFETY: reading 8 bytes into a u64 from our own counting event (no read_format).
        let got = unsafe { libc::read(fd.as_raw_fd(), (&mut hits as *mut u64).cast(), 8) };
        drop(ring);
        drop(fd);
        // A sampled event has no count to read; a counting one must have seen every call.
        if !sampled && (got != 8 || hits < n) {
            return None;
        }
        best = best.min(probed.saturating_sub(base) as f64 / n as f64);
    }
    Some(best)
}

/// Measures [`HitCosts`] on this machine; `None` where the uprobe PMU is not available to
/// netprobe.
pub fn measure() -> Option<HitCosts> {
    let emulated = cost_of(netprobe_calibrate_emulated, 20_000, false)?;
    let optimized = cost_of(netprobe_calibrate_optimized, 20_000, false)?;
    let stepped = cost_of(netprobe_calibrate_stepped, 5_000, false)?;
    let sampled = cost_of(netprobe_calibrate_emulated, 20_000, true)?;
    Some(HitCosts {
        emulated_ns: emulated,
        optimized_ns: optimized,
        single_stepped_ns: stepped,
        record_ns: (sampled - emulated).max(0.0),
        measured: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_functions_return_their_argument() {
        // SAFETY: as in `time_calls`.
        unsafe {
            assert_eq!(netprobe_calibrate_emulated(7), 7);
            assert_eq!(netprobe_calibrate_optimized(8), 8);
            assert_eq!(netprobe_calibrate_stepped(9), 9);
        }
    }

    #[test]
    fn a_hit_costs_its_trap_plus_its_record() {
        let c = HitCosts::TYPICAL;
        assert_eq!(c.per_hit_ns(KernelHandling::Emulated, false), 1500.0);
        assert_eq!(c.per_hit_ns(KernelHandling::SingleStepped, true), 12300.0);
    }

    #[test]
    fn implausible_cached_costs_are_measured_again() {
        let mut c = HitCosts::TYPICAL;
        assert!(plausible(&c));
        c.record_ns = f64::NAN;
        assert!(!plausible(&c));
        c.record_ns = -1.0;
        assert!(!plausible(&c));
    }
}
