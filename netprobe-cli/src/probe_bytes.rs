//! The first bytes of the instruction each probe of a plan traps on, read from the probed files:
//! what the kernel does with the trap depends on it (emulated or single-stepped, its cost:
//! `crate::overhead`; whether perf's call chain already holds the caller: the per-task backend).
//! Each file is opened once, however many probes it has.

use crate::plan::ProbePlan;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;

/// The longest x86-64 instruction.
pub const MAX_INSTRUCTION: usize = 15;

/// For each probe of `plan`, the bytes at its offset (up to [`MAX_INSTRUCTION`], fewer at the
/// file's end); empty when its file cannot be opened as a regular file or read there.
pub fn instruction_bytes(plan: &ProbePlan) -> Vec<Vec<u8>> {
    let mut files = HashMap::new();
    plan.probes
        .iter()
        .map(|p| {
            let file = files.entry(p.path.clone()).or_insert_with(|| {
                netprobe_core::regular_file::open(&p.path)
                    .ok()
                    .map(|(f, _)| f)
            });
            let Some(file) = file else {
                return Vec::new();
            };
            let mut b = vec![0u8; MAX_INSTRUCTION];
            match file.read_at(&mut b, p.offset.0) {
                Ok(n) => {
                    b.truncate(n);
                    b
                }
                Err(_) => Vec::new(),
            }
        })
        .collect()
}
