//! Putting back the caller a sample's frame-pointer walk misses.
//!
//! A sample on a function's first instructions (before `push rbp; mov rbp, rsp`), on its `ret`,
//! or anywhere in a function that makes no frame (a leaf) has RBP still pointing at the caller's
//! frame, so the kernel's walk names the caller's caller next and the caller is missing (perf's
//! `-g` profiles lose it the same way). `netprobe_core::innermost_frame` decodes the sampled
//! function from its first byte to say where the return address is then; the sample carries the
//! top of the user stack (`PERF_SAMPLE_STACK_USER`), which holds it.

use crate::backend::perf_event::record::USER_SPACE_END;
use crate::stacks::StackNamer;
use netprobe_core::addr::VirtAddr;
use netprobe_core::innermost_frame::{innermost_frame, returns_at, InnermostFrame};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Longest function prefix decoded (bytes from the function's first instruction to the sampled
/// one). Prologues are a few instructions; a frameless leaf deeper than this keeps its walk as
/// the kernel made it, except at a `ret`.
const MAX_PREFIX: u64 = 4096;

/// Longest x86-64 instruction.
const MAX_INSTRUCTION: u64 = 15;

/// The answers of [`innermost_frame`] per sampled address, and an open `/proc/PID/mem` per
/// process to read the code from (what runs, JIT code included).
#[derive(Default)]
pub struct MissedCallers {
    answers: HashMap<(u32, u64), InnermostFrame>,
    memory: HashMap<u32, Option<File>>,
}

impl MissedCallers {
    /// Inserts the caller's return address as `ips[1]` when the sampled function (`ips[0]`)
    /// had not made its frame, read from `stack` (the user stack from RSP up). Leaves `ips` as
    /// it is when the frame was made, the answer is unknown, the code cannot be read, or the
    /// word lies outside `stack` or cannot be a user return address.
    pub fn restore(&mut self, pid: u32, ips: &mut Vec<u64>, stack: &[u8], namer: &mut StackNamer) {
        let Some(&ip) = ips.first() else { return };
        if stack.is_empty() {
            return;
        }
        let answer = match self.answers.get(&(pid, ip)) {
            Some(a) => *a,
            None => {
                let a = self.decode(pid, ip, namer);
                self.answers.insert((pid, ip), a);
                a
            }
        };
        let InnermostFrame::OnStack(depth) = answer else {
            return;
        };
        let word = usize::try_from(depth).ok().and_then(|d| {
            let b = stack.get(d..d.checked_add(8)?)?;
            Some(u64::from_ne_bytes(b.try_into().ok()?))
        });
        if let Some(ret) = word.filter(|&r| r != 0 && r < USER_SPACE_END) {
            ips.insert(1, ret);
        }
    }

    /// Where the return address is at `ip`: from the function's first byte when the namer
    /// knows where the function starts (and it is at most [`MAX_PREFIX`] bytes before), else
    /// only whether `ip` is a `ret`; [`InnermostFrame::Unknown`] when the code cannot be read.
    fn decode(&mut self, pid: u32, ip: u64, namer: &mut StackNamer) -> InnermostFrame {
        namer.learn(pid, &[ip]);
        let offset = namer
            .frames(pid, &[ip])
            .last()
            .and_then(|f| f.offset)
            .filter(|&o| o <= MAX_PREFIX && o <= ip);
        let memory = self
            .memory
            .entry(pid)
            .or_insert_with(|| File::open(format!("/proc/{pid}/mem")).ok());
        let Some(memory) = memory.as_ref() else {
            return InnermostFrame::Unknown;
        };
        let entry = ip - offset.unwrap_or(0);
        let mut code = vec![0u8; (ip - entry + MAX_INSTRUCTION) as usize];
        // A short read (the code ends its mapping) is decoded as far as it goes.
        let read = match memory.read_at(&mut code, entry) {
            Ok(n) if n as u64 > ip - entry => n,
            _ => return InnermostFrame::Unknown,
        };
        code.truncate(read);
        match offset {
            Some(_) => innermost_frame(&code, VirtAddr(entry), VirtAddr(ip)),
            None if returns_at(&code) => InnermostFrame::OnStack(0),
            None => InnermostFrame::Unknown,
        }
    }
}
