//! The stack walker: from a sampled or probed thread's registers and a copy of its stack, one
//! frame after another, each by the method its image allows: a Go function by its `pcsp` table
//! (exact, the runtime's own), an image with call-frame information by CFI, anything else
//! (JIT code, an image without `.eh_frame`) by the frame pointer. So one stack mixes methods
//! (Go -> cgo -> libc; .NET ReadyToRun code -> the native runtime) and each frame says which
//! one found it.
//!
//! Bounded: at most [`WalkLimits::max_frames`], each caller's stack pointer strictly above its
//! callee's (a loop in hostile CFI or a corrupt frame chain cannot repeat), and a rule that reads
//! outside the copied stack ends the walk with the reason.

use super::image::ImageUnwinder;
use super::registers::{Registers, StackMemory, RA, RBP, RSP};
use super::CfiMiss;
use serde::Serialize;
use std::sync::Arc;

/// The end of user space on x86-64 with 5-level paging (`TASK_SIZE_MAX` under LA57,
/// arch/x86/include/asm/page_64_types.h): a return address above it is not user code.
pub const USER_SPACE_END: u64 = 1 << 56;

/// Which method produced a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnwoundBy {
    /// The sampled or probed instruction itself (the registers' rip).
    Ip,
    /// Call-frame information (`.eh_frame`, `.debug_frame`).
    Cfi,
    /// The frame pointer (`[rbp + 8]`), by netprobe's walker.
    Fp,
    /// A Go function's `pcsp` table.
    GoPcsp,
    /// The kernel's frame-pointer callchain (`PERF_SAMPLE_CALLCHAIN`, the tracefs stacktrace).
    KernelFp,
    /// The one caller put back from the stack at a function's first instructions.
    MissedCaller,
}

impl UnwoundBy {
    /// The name `--json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            UnwoundBy::Ip => "ip",
            UnwoundBy::Cfi => "cfi",
            UnwoundBy::Fp => "fp",
            UnwoundBy::GoPcsp => "go_pcsp",
            UnwoundBy::KernelFp => "kernel_fp",
            UnwoundBy::MissedCaller => "missed_caller",
        }
    }
}

/// Why a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// The outermost frame: its return address is undefined by its CFI (`_start`, a thread's
    /// start routine) or zero.
    Outermost,
    /// [`WalkLimits::max_frames`] frames were walked.
    MaxFrames,
    /// A caller's stack pointer was not above its callee's.
    CfaNotIncreasing,
    /// A rule read outside the copied stack (or rbp pointed outside it); says what.
    OutsideStack(String),
    /// A return address that cannot be user code.
    NotCode(u64),
    /// Call-frame information covers the pc but cannot be followed; says why.
    Broken(String),
}

/// Bounds of one walk.
#[derive(Clone, Copy, Debug)]
pub struct WalkLimits {
    pub max_frames: usize,
}

impl Default for WalkLimits {
    /// 127 frames: `PERF_MAX_STACK_DEPTH`, the kernel callchain's own default
    /// (kernel.perf_event_max_stack).
    fn default() -> Self {
        WalkLimits { max_frames: 127 }
    }
}

/// A walked stack: instruction addresses innermost first, each with its method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    pub frames: Vec<(u64, UnwoundBy)>,
    pub end: WalkEnd,
}

impl Walk {
    /// The addresses alone.
    pub fn pcs(&self) -> Vec<u64> {
        self.frames.iter().map(|f| f.0).collect()
    }
}

/// Where the walker finds the image mapping an address: its unwinder and load bias (runtime
/// address minus link-time address). `None`: no image (anonymous memory, JIT code).
pub trait ImageLookup {
    fn image_at(&mut self, pc: u64) -> Option<(Arc<ImageUnwinder>, u64)>;
}

impl<F: FnMut(u64) -> Option<(Arc<ImageUnwinder>, u64)>> ImageLookup for F {
    fn image_at(&mut self, pc: u64) -> Option<(Arc<ImageUnwinder>, u64)> {
        self(pc)
    }
}

/// One frame-pointer step: the caller's rip at `[rbp + 8]`, its rsp `rbp + 16`, its rbp `[rbp]`
/// (the `push rbp; mov rbp, rsp` prologue, psABI §3.4.1 "the conventional use of %rbp").
pub fn frame_pointer_step(regs: &Registers, stack: &dyn StackMemory) -> Result<Registers, WalkEnd> {
    let rbp = regs
        .rbp()
        .ok_or_else(|| WalkEnd::OutsideStack("rbp is unknown".into()))?;
    let read = |a: u64| {
        stack.read_u64(a).ok_or_else(|| {
            WalkEnd::OutsideStack(format!(
                "the frame pointer {rbp:#x} lies outside the copied stack"
            ))
        })
    };
    let ra = read(rbp.checked_add(8).ok_or(WalkEnd::CfaNotIncreasing)?)?;
    let mut caller = *regs;
    caller.set(RA, Some(ra));
    caller.set(RSP, rbp.checked_add(16));
    caller.set(RBP, Some(read(rbp)?));
    Ok(caller)
}

/// One step from the frame `regs` (`first`: the sampled instruction, else a return address).
fn step(
    regs: &Registers,
    first: bool,
    stack: &dyn StackMemory,
    images: &mut dyn ImageLookup,
) -> Result<(Registers, UnwoundBy), WalkEnd> {
    let pc = regs.rip().ok_or(WalkEnd::Outermost)?;
    // A return address is one past its call, which may be the function's last byte: look up
    // the call's row.
    let lookup = if first { pc } else { pc.wrapping_sub(1) };
    if let Some((image, bias)) = images.image_at(lookup) {
        let link = lookup.wrapping_sub(bias);
        if let Some(go) = image.go.as_ref().filter(|g| g.covers(link)) {
            if let Some(r) = go.step(link, regs, stack) {
                return Ok((r, UnwoundBy::GoPcsp));
            }
        }
        if let Some(cfi) = &image.cfi {
            match cfi.step(link, regs, stack) {
                Ok(r) => return Ok((r, UnwoundBy::Cfi)),
                Err(CfiMiss::NoEntry) => {}
                Err(CfiMiss::Broken(why)) => {
                    return Err(if why.contains("outside the copied stack") {
                        WalkEnd::OutsideStack(why)
                    } else {
                        WalkEnd::Broken(why)
                    })
                }
            }
        }
    }
    Ok((frame_pointer_step(regs, stack)?, UnwoundBy::Fp))
}

/// Walks the stack of a thread whose registers are `regs` (rip, rsp and rbp at least) and whose
/// stack from rsp up is `stack`.
pub fn walk(
    regs: Registers,
    stack: &dyn StackMemory,
    images: &mut dyn ImageLookup,
    limits: WalkLimits,
) -> Walk {
    let mut frames = Vec::new();
    let Some(ip) = regs.rip() else {
        return Walk {
            frames,
            end: WalkEnd::Outermost,
        };
    };
    frames.push((ip, UnwoundBy::Ip));
    let mut regs = regs;
    let end = loop {
        if frames.len() >= limits.max_frames {
            break WalkEnd::MaxFrames;
        }
        let (caller, by) = match step(&regs, frames.len() == 1, stack, images) {
            Ok(s) => s,
            Err(end) => break end,
        };
        let ret = match caller.rip() {
            None | Some(0) => break WalkEnd::Outermost,
            Some(r) if r >= USER_SPACE_END => break WalkEnd::NotCode(r),
            Some(r) => r,
        };
        match (caller.rsp(), regs.rsp()) {
            (Some(up), Some(down)) if up > down => {}
            _ => break WalkEnd::CfaNotIncreasing,
        }
        frames.push((ret, by));
        regs = caller;
    };
    Walk { frames, end }
}
