//! User call stacks of hits (`trace --stack`, `count --stack`): naming a hit's stack
//! ([`StackShow`]), and calls per distinct stack ([`StackCounter`], like bcc stackcount), also
//! as Brendan Gregg's folded lines for flame graph tools.

use super::{Flow, Format, Sink, TaskInfo};
use crate::backend::Lost;
use crate::plan::{Hit, ProbePlan, UserStack};
use crate::stacks::{FrameName, StackNamer, Unwinder};
use netprobe_core::debuginfo::UnwoundBy;
use netprobe_core::symbolize::Frame;
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;

/// Why a stack shows fewer frames than the thread had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StackCut {
    /// `--stack-depth` kept the innermost frames.
    Depth,
    /// The kernel recorded as many entries as it records per event; the stack may go on.
    KernelLimit,
}

impl StackCut {
    /// What the text format says under a cut stack.
    pub fn text(self, depth: Option<usize>) -> String {
        match self {
            StackCut::Depth => format!(
                "(cut at --stack-depth {})",
                depth.map_or_else(|| "?".into(), |d| d.to_string())
            ),
            StackCut::KernelLimit => {
                "(cut: the kernel records no more user stack entries per event; outer frames missing)"
                    .into()
            }
        }
    }
}

/// A hit's stack as a trace line shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShownStack {
    /// Innermost first: the probed function, then its callers (inlined functions before the
    /// function they were inlined into).
    pub frames: Vec<Frame>,
    pub cut: Option<StackCut>,
    /// `--stack-depth`, to say where it cut.
    pub depth: Option<usize>,
    /// No stack record came with the hit (the kernel could not write one).
    pub missing: bool,
    /// Beside each frame, the method that found it, when the stack was unwound in user space
    /// from a copy (empty: the kernel's frame-pointer chain as it came).
    pub unwound_by: Vec<UnwoundBy>,
    /// The text format writes each .NET frame's tier after it (`--tiers`).
    pub tiers: bool,
}

/// The innermost `depth` of `frames` and why they were cut, if they were.
fn cut_to<T>(
    mut frames: Vec<T>,
    depth: Option<usize>,
    kernel_limit: bool,
) -> (Vec<T>, Option<StackCut>) {
    match depth {
        Some(d) if frames.len() > d => {
            frames.truncate(d);
            (frames, Some(StackCut::Depth))
        }
        _ => (frames, kernel_limit.then_some(StackCut::KernelLimit)),
    }
}

/// Names the stacks of hits for trace lines.
#[derive(Default)]
pub struct StackShow {
    pub namer: StackNamer,
    unwinder: Unwinder,
    /// `--stack-depth`: at most this many frames (innermost).
    pub depth: Option<usize>,
    /// `--tiers`: text stacks show each .NET frame's code tier ([`ShownStack::tiers`]).
    pub tiers: bool,
}

impl StackShow {
    /// Names and unwinds the stacks of processes gone by then from the mappings the session
    /// recorded (`Session::recorded_maps`).
    pub fn use_recorded_maps(&mut self, recorded: Option<netprobe_core::maps::RecordedMaps>) {
        self.unwinder.use_recorded_maps(recorded.clone());
        self.namer.use_recorded_maps(recorded);
    }

    pub fn new(depth: Option<usize>) -> StackShow {
        StackShow {
            namer: StackNamer::new(),
            unwinder: Unwinder::new(),
            depth,
            tiers: false,
        }
    }

    /// The named stack of `hit` ([`StackShow::named`]) as `--tiers` asks it shown.
    pub fn show(&mut self, pid: Option<u32>, hit: &Hit) -> ShownStack {
        ShownStack {
            tiers: self.tiers,
            ..self.named(pid, hit)
        }
    }

    /// The named stack of `hit`; `pid` is its process in netprobe's pid namespace (see
    /// [`naming_pid`]). Notes for the user (how to name JIT-compiled .NET code) go to stderr,
    /// once per process.
    fn named(&mut self, pid: Option<u32>, hit: &Hit) -> ShownStack {
        let Some(stack) = &hit.user_stack else {
            return ShownStack {
                missing: true,
                depth: self.depth,
                ..ShownStack::default()
            };
        };
        let Some(pid) = pid else {
            let (frames, cut) = cut_to(
                StackNamer::unnamed(&stack.addrs),
                self.depth,
                stack.kernel_limit,
            );
            return ShownStack {
                frames,
                cut,
                depth: self.depth,
                missing: false,
                unwound_by: Vec::new(),
                tiers: false,
            };
        };
        if let Some((walked, _)) = stack
            .copy
            .as_ref()
            .and_then(|c| self.unwinder.stitched(pid, &stack.addrs, &c.regs, &c.stack))
        {
            let addrs: Vec<u64> = walked.iter().map(|w| w.0).collect();
            self.namer.learn(pid, &addrs);
            self.namer.retry_unnamed(false);
            let (frames, methods) = self.namer.frames_unwound(pid, &walked);
            let (frames, cut) = cut_to(frames, self.depth, false);
            let mut unwound_by = methods;
            unwound_by.truncate(frames.len());
            return ShownStack {
                frames,
                cut,
                depth: self.depth,
                missing: false,
                unwound_by,
                tiers: false,
            };
        }
        self.namer.learn(pid, &stack.addrs);
        self.namer.retry_unnamed(false);
        for note in self.namer.take_notes() {
            crate::printable::eprint_line(&format!("netprobe: note: {note}"));
        }
        let (frames, cut) = cut_to(
            self.namer.frames(pid, &stack.addrs),
            self.depth,
            stack.kernel_limit,
        );
        ShownStack {
            frames,
            cut,
            depth: self.depth,
            missing: false,
            unwound_by: Vec::new(),
            tiers: false,
        }
    }
}

/// The process to name `hit`'s stack in, in netprobe's pid namespace: the thread's process as
/// `tasks` maps it, else (where netprobe sees the kernel's ids) the stack record's `tgid`;
/// `None` inside a pid namespace for a thread it cannot map (its frames stay unnamed rather than
/// be named from another process).
pub fn naming_pid(tasks: &mut TaskInfo, hit: &Hit) -> Option<u32> {
    let stack = hit.user_stack.as_ref()?;
    tasks
        .process_of(hit)
        .or((!tasks.translates()).then_some(stack.pid))
}

/// One distinct stack and its calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StackCount {
    /// Innermost first.
    pub frames: Vec<FrameName>,
    pub count: u64,
    pub cut: Option<StackCut>,
}

/// Calls per distinct stack, most frequent first (`count --stack`).
#[derive(Clone, Debug, Default)]
pub struct StackCountReport {
    pub stacks: Vec<StackCount>,
    /// Calls whose hit came without a stack record.
    pub without_stack: u64,
    pub depth: Option<usize>,
    pub lost: Lost,
    pub elapsed_s: f64,
}

impl StackCountReport {
    /// Brendan Gregg's folded format: `root;caller;callee count`, one line per distinct stack,
    /// sorted like stackcollapse-perf.pl's output (by stack); with `source_lines`, each frame
    /// as `name (file:line)` where its line is known.
    pub fn folded(&self, source_lines: bool) -> String {
        crate::stacks::folded_lines(
            self.stacks.iter().map(|s| {
                let root_first: Vec<&FrameName> = s.frames.iter().rev().collect();
                (root_first, s.count)
            }),
            source_lines,
        )
    }

    /// The report with each .NET frame's code tier after its name (`Replace(string, string)
    /// [tier1]`, `--tiers`): a method's code at each tier is then a stack of its own.
    pub fn with_tiers_in_names(self) -> StackCountReport {
        let stacks = self
            .stacks
            .into_iter()
            .map(|s| StackCount {
                frames: s.frames.iter().map(FrameName::with_tier).collect(),
                ..s
            })
            .collect();
        StackCountReport { stacks, ..self }
    }

    /// The report as text shows it without `--tiers`: stacks that differ only in their .NET
    /// frames' tiers (a method sampled in its ReadyToRun code and after tier-up) merged into one,
    /// as they read the same.
    pub fn with_tiers_merged(self) -> StackCountReport {
        let mut merged: HashMap<(Vec<FrameName>, Option<StackCut>), u64> = HashMap::new();
        for s in self.stacks {
            let frames = s
                .frames
                .into_iter()
                .map(|f| FrameName { tier: None, ..f })
                .collect();
            *merged.entry((frames, s.cut)).or_insert(0) += s.count;
        }
        StackCountReport {
            stacks: sorted(merged),
            ..self
        }
    }

    /// [`StackCountReport::folded`] with each run of unnamed frames of one image as one
    /// `[image]` frame ([`crate::stacks::collapse_unnamed_runs`]): what `count --stack --folded`
    /// writes unless `--unknown-addrs` asks for every address.
    pub fn folded_collapsed(&self, source_lines: bool) -> String {
        let stacks: Vec<(Vec<FrameName>, u64)> = self
            .stacks
            .iter()
            .map(|s| {
                (
                    crate::stacks::collapse_unnamed_runs(s.frames.iter().rev()),
                    s.count,
                )
            })
            .collect();
        crate::stacks::folded_lines(stacks.iter().map(|(s, n)| (s, *n)), source_lines)
    }
}

/// Merged stacks, most frequent first (then by frames, then by cut).
fn sorted(merged: HashMap<(Vec<FrameName>, Option<StackCut>), u64>) -> Vec<StackCount> {
    let mut stacks: Vec<StackCount> = merged
        .into_iter()
        .map(|((frames, cut), count)| StackCount { frames, count, cut })
        .collect();
    stacks.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.frames.cmp(&b.frames))
            .then_with(|| a.cut.cmp(&b.cut))
    });
    stacks
}

/// `count --stack`: calls per distinct user stack (like bcc stackcount). Stacks are kept as
/// addresses while tracing (named as they come, while the process lives) and merged by name at
/// the end.
#[derive(Default)]
pub struct StackCounter {
    pub namer: StackNamer,
    unwinder: Unwinder,
    pub tasks: TaskInfo,
    pub depth: Option<usize>,
    pub max_events: Option<u64>,
    pub total: u64,
    /// Per (process, addresses, kernel limit reached, methods when unwound from a copy).
    raw: HashMap<(u32, Vec<u64>, bool, Vec<UnwoundBy>), u64>,
    without_stack: u64,
}

impl StackCounter {
    /// Names and unwinds the stacks of processes gone by then from the mappings the session
    /// recorded (`Session::recorded_maps`).
    pub fn use_recorded_maps(&mut self, recorded: Option<netprobe_core::maps::RecordedMaps>) {
        self.unwinder.use_recorded_maps(recorded.clone());
        self.namer.use_recorded_maps(recorded);
    }

    pub fn new(tasks: TaskInfo, depth: Option<usize>, max_events: Option<u64>) -> StackCounter {
        StackCounter {
            tasks,
            depth,
            max_events,
            ..StackCounter::default()
        }
    }

    fn add(&mut self, pid: u32, stack: &UserStack) {
        let walked = stack
            .copy
            .as_ref()
            .and_then(|c| self.unwinder.stitched(pid, &stack.addrs, &c.regs, &c.stack));
        if let Some((walked, _)) = walked {
            let (addrs, methods): (Vec<u64>, Vec<UnwoundBy>) = walked.into_iter().unzip();
            self.namer.learn(pid, &addrs);
            self.namer.retry_unnamed(false);
            *self.raw.entry((pid, addrs, false, methods)).or_insert(0) += 1;
            return;
        }
        self.namer.learn(pid, &stack.addrs);
        self.namer.retry_unnamed(false);
        for note in self.namer.take_notes() {
            crate::printable::eprint_line(&format!("netprobe: note: {note}"));
        }
        *self
            .raw
            .entry((pid, stack.addrs.clone(), stack.kernel_limit, Vec::new()))
            .or_insert(0) += 1;
    }

    /// The stacks named and merged, most frequent first (then by frames).
    pub fn stack_report(&mut self, lost: Lost, elapsed_s: f64) -> StackCountReport {
        self.namer.retry_unnamed(true);
        let mut merged: HashMap<(Vec<FrameName>, Option<StackCut>), u64> = HashMap::new();
        for ((pid, addrs, kernel_limit, methods), n) in &self.raw {
            let innermost_first: Vec<FrameName> = if methods.is_empty() {
                self.namer
                    .frames(*pid, addrs)
                    .iter()
                    .map(FrameName::of)
                    .collect()
            } else {
                let walked: Vec<(u64, UnwoundBy)> =
                    addrs.iter().copied().zip(methods.iter().copied()).collect();
                let mut v = self.namer.stack_unwound(*pid, &walked);
                v.reverse();
                v
            };
            let (frames, cut) = cut_to(innermost_first, self.depth, *kernel_limit);
            *merged.entry((frames, cut)).or_insert(0) += n;
        }
        StackCountReport {
            stacks: sorted(merged),
            without_stack: self.without_stack,
            depth: self.depth,
            lost,
            elapsed_s,
        }
    }

    /// Writes the report in `format`.
    pub fn report(
        &mut self,
        format: Format,
        lost: Lost,
        elapsed_s: f64,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let r = self.stack_report(lost, elapsed_s);
        format.printer().stack_counts(out, &r)?;
        out.flush()
    }
}

impl Sink for StackCounter {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        if !super::Counter::counts_hit(plan, &hit) {
            return Flow::Continue;
        }
        match &hit.user_stack {
            Some(stack) => match naming_pid(&mut self.tasks, &hit) {
                Some(pid) => self.add(pid, stack),
                // Counted with unnamed frames: no process is learnt as pid 0.
                None => {
                    *self
                        .raw
                        .entry((0, stack.addrs.clone(), stack.kernel_limit, Vec::new()))
                        .or_insert(0) += 1
                }
            },
            None => self.without_stack += 1,
        }
        self.total += 1;
        if self.max_events.is_some_and(|m| self.total >= m) {
            return Flow::Enough;
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn folded_counts_collapse_unnamed_runs_unless_asked() {
        let f = |n: &str| FrameName::named(n, false, n.starts_with('['));
        let stack = |offs: [u32; 2], n| StackCount {
            // Innermost first.
            frames: vec![
                f("probed"),
                f(&format!("[unknown] (libcoreclr.so+{:#x})", offs[0])),
                f(&format!("[unknown] (libcoreclr.so+{:#x})", offs[1])),
                f("main"),
            ],
            count: n,
            cut: None,
        };
        let r = StackCountReport {
            stacks: vec![stack([0x10, 0x20], 2), stack([0x11, 0x20], 1)],
            ..StackCountReport::default()
        };
        assert_eq!(r.folded_collapsed(false), "main;[libcoreclr.so];probed 3\n");
        assert_eq!(
            r.folded(false),
            "main;[unknown] (libcoreclr.so+0x20);[unknown] (libcoreclr.so+0x10);probed 2\n\
             main;[unknown] (libcoreclr.so+0x20);[unknown] (libcoreclr.so+0x11);probed 1\n"
        );
    }

    proptest! {
        /// A cut keeps the innermost frames, at most `depth`, and says why only when it cut or
        /// the kernel filled its entries.
        #[test]
        fn cuts_keep_the_innermost_frames(n in 0usize..20, depth in proptest::option::of(1usize..12), full: bool) {
            let frames: Vec<usize> = (0..n).collect();
            let (kept, cut) = cut_to(frames.clone(), depth, full);
            prop_assert_eq!(&kept[..], &frames[..kept.len()]);
            match depth {
                Some(d) if n > d => {
                    prop_assert_eq!(kept.len(), d);
                    prop_assert_eq!(cut, Some(StackCut::Depth));
                }
                _ => {
                    prop_assert_eq!(kept.len(), n);
                    prop_assert_eq!(cut, full.then_some(StackCut::KernelLimit));
                }
            }
        }
    }
}
