//! User call stacks named by the core symbolizer, for every command that shows stacks
//! (`profile`'s samples, `trace --stack` and `count --stack` hits): a [`StackNamer`] names each
//! (process, address) once and keeps the frames; [`FrameName`] is a frame as folded stacks and
//! flame graphs show it; [`Unwinder`] walks a copied user stack from its registers, without
//! frame pointers where the images carry call-frame information; [`collapse_unnamed_runs`] shows
//! a run of unnamed frames of one image as one `[image]` frame.

mod collapse;
mod unwinder;

pub use collapse::{collapse_unnamed_runs, unnamed_frame_image};
pub use unwinder::Unwinder;

use netprobe_core::debuginfo::UnwoundBy;
use netprobe_core::symbolize::{Frame, SourceKind, Symbolizer};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One frame of a stack, as a flame graph names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FrameName {
    /// The function (`main.Fib`, `hot`, a .NET method as C# writes it), or
    /// `[unknown] (image+0xOFF)`.
    pub name: String,
    /// Inlined into its caller (shown with inferno's and stackcollapse-perf's `_[i]` suffix in
    /// folded lines).
    pub inlined: bool,
    /// No table named it.
    pub unknown: bool,
    /// The source file of its line, from DWARF (see [`Frame::file`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its source line (the sampled or probed instruction's in the innermost frame, the
    /// call's in the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Which method found the frame (call-frame information, the frame pointer, Go's pcsp
    /// table, the kernel's callchain), when the stack was unwound in user space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwound_by: Option<UnwoundBy>,
    /// A .NET method's code tier ([`Frame::tier`]): JSON carries it; the name does not, so a
    /// method counts as one function across a tier-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<netprobe_core::dotnet::managed_name::CodeTier>,
    /// The file that holds the code, as the process names it ([`Frame::image`]); `None` in
    /// anonymous memory. Not serialized: the name of an unnamed frame says it already, and a
    /// pprof file's mappings are made of it.
    #[serde(skip)]
    pub image: Option<String>,
}

impl FrameName {
    /// The name of a symbolized frame: its function, or `[unknown] (image+0xOFF)` /
    /// `[unknown] (0xADDR)` in anonymous memory.
    pub fn of(f: &Frame) -> FrameName {
        match &f.function {
            Some(name) => FrameName {
                name: name.clone(),
                inlined: f.inlined,
                unknown: false,
                file: f.file.clone(),
                line: f.line,
                unwound_by: None,
                tier: f.tier.clone(),
                image: f.image.as_ref().map(|p| p.display().to_string()),
            },
            None => FrameName {
                name: f.to_string(),
                inlined: false,
                unknown: true,
                file: None,
                line: None,
                unwound_by: None,
                tier: None,
                image: f.image.as_ref().map(|p| p.display().to_string()),
            },
        }
    }

    /// A frame named `name` with no source line.
    pub fn named(name: &str, inlined: bool, unknown: bool) -> FrameName {
        FrameName {
            name: name.to_string(),
            inlined,
            unknown,
            file: None,
            line: None,
            unwound_by: None,
            tier: None,
            image: None,
        }
    }

    /// The frame named with its .NET code tier after the name (`Replace(string, string)
    /// [tier1]`, `--tiers`); a frame without a tier as it is.
    pub fn with_tier(&self) -> FrameName {
        match &self.tier {
            Some(t) => FrameName {
                name: format!("{} [{t}]", self.name),
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// `file:line` (the file alone without a line); `None` without a file.
    pub fn source_line(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match self.line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        })
    }

    /// The name as text output shows it: `name (file:line)` when the line is known.
    pub fn with_line(&self) -> String {
        match self.source_line() {
            Some(at) => format!("{} ({at})", self.name),
            None => self.name.clone(),
        }
    }

    /// The frame as a folded-format element: `;` (the separator) becomes `:`, and line breaks and
    /// other control characters are escaped ([`crate::printable`]), so none can occur.
    pub fn folded(&self) -> String {
        self.folded_as(&self.name)
    }

    /// [`FrameName::folded`] with the source line: `name (file:line)` (`--folded-lines`).
    pub fn folded_with_line(&self) -> String {
        self.folded_as(&self.with_line())
    }

    fn folded_as(&self, name: &str) -> String {
        let clean = crate::printable::printable(name).replace(';', ":");
        if self.inlined {
            format!("{clean}_[i]")
        } else {
            clean
        }
    }
}

/// Brendan Gregg's folded format (`root;caller;callee count`, the input of `flamegraph.pl` and
/// inferno): one line per distinct stack (root first), equal stacks summed, sorted by stack as
/// stackcollapse-perf.pl prints them. With `source_lines`, each frame is `name (file:line)`
/// where DWARF gives its line (as `perf script -F +srcline` then stackcollapse-perf show it).
pub fn folded_lines<'a, S>(stacks: impl Iterator<Item = (S, u64)>, source_lines: bool) -> String
where
    S: IntoIterator<Item = &'a FrameName>,
{
    use std::fmt::Write as _;
    let mut lines: std::collections::BTreeMap<String, u64> = Default::default();
    for (stack, n) in stacks {
        let key = stack
            .into_iter()
            .map(|f| {
                if source_lines {
                    f.folded_with_line()
                } else {
                    f.folded()
                }
            })
            .collect::<Vec<_>>()
            .join(";");
        *lines.entry(key).or_insert(0) += n;
    }
    let mut out = String::new();
    for (k, n) in lines {
        let _ = writeln!(out, "{k} {n}");
    }
    out
}

/// Names stack addresses, caching each (pid, address) it named.
///
/// An address in no file stays unnamed only until the process's maps and JIT names are read
/// again: a runtime maps images into address ranges it reserved earlier (the .NET runtime's PE
/// loader does), and JIT-compiled code appears in its perf map after the fact. So unnamed
/// anonymous addresses are retried after a fresh read, at most every [`REREAD_INTERVAL`] per
/// process, while the process lives.
#[derive(Default)]
pub struct StackNamer {
    symbolizer: Symbolizer,
    /// Frames of each (pid, lookup address, whether it is a return address's), innermost first
    /// (inlined functions, then the function holding the code), and the address they were
    /// looked up at.
    cache: HashMap<(u32, u64, bool), (u64, Vec<Frame>)>,
    /// Return addresses (as looked up) in mapped memory that is not executable: a stack ends
    /// before them.
    not_code: std::collections::HashSet<(u32, u64)>,
    /// Per process: addresses in no file that no table named since the last fresh read.
    unnamed: HashMap<u32, Vec<u64>>,
    reread_at: HashMap<u32, Instant>,
}

/// Least time between two fresh reads of one process's maps and JIT names.
const REREAD_INTERVAL: Duration = Duration::from_millis(250);

impl StackNamer {
    pub fn new() -> StackNamer {
        StackNamer::default()
    }

    /// Names the frames of processes whose maps are gone from `recorded` (the mappings a session
    /// recorded while they ran); nothing changes with `None`.
    pub fn use_recorded_maps(&mut self, recorded: Option<netprobe_core::maps::RecordedMaps>) {
        if let Some(r) = recorded {
            self.symbolizer.use_recorded_maps(r);
        }
    }

    /// Symbolizes `addr` of `pid` into the cache; `ret` when `addr` is a return address minus
    /// one.
    ///
    /// A return address at a function's first byte follows no call: it is a signal frame's
    /// restorer (the kernel "returns" from a handler into, e.g., Go's `runtime.sigreturn`,
    /// `src/runtime/sys_linux_amd64.s`). The byte before it is the padding between functions,
    /// which no table names; then the function at the return address itself is the frame.
    /// Likewise a return address replaced by the kernel's uretprobe trampoline: the byte before
    /// it is unmapped, the trampoline itself is named as such.
    fn name(&mut self, pid: u32, addr: u64, ret: bool) {
        let look = |s: &mut Symbolizer, a: u64| {
            s.symbolize(pid, a)
                .unwrap_or_else(|_| vec![unknown_frame(a)])
        };
        let mut at = addr;
        let mut frames = look(&mut self.symbolizer, addr);
        let in_padding =
            |f: &[Frame]| matches!(f, [one] if one.function.is_none() && one.image.is_some());
        // The kernel's return-probe trampoline replaced this return address: the trampoline
        // is the first byte of the `[uprobes]` area, so the byte before lies outside it.
        if ret
            && matches!(&frames[..], [one] if one.source == SourceKind::Unknown && one.image.is_none())
        {
            let next = look(&mut self.symbolizer, addr + 1);
            if next
                .iter()
                .any(|f| f.source == SourceKind::ReturnProbeTrampoline)
            {
                at = addr + 1;
                frames = next;
            }
        }
        if ret && in_padding(&frames) {
            let next = look(&mut self.symbolizer, addr + 1);
            if next
                .last()
                .is_some_and(|f| f.function.is_some() && f.offset == Some(0))
            {
                at = addr + 1;
                frames = next;
            }
        }
        if frames.iter().all(|f| f.source == SourceKind::NotCode) {
            self.not_code.insert((pid, addr));
        } else if frames
            .iter()
            .all(|f| f.image.is_none() && f.function.is_none())
        {
            self.unnamed.entry(pid).or_default().push(addr);
        }
        self.cache.insert((pid, addr, ret), (at, frames));
    }

    /// Names every address of a stack (innermost first: the sampled or probed instruction, then
    /// return addresses) not named yet. Call it while the process lives.
    pub fn learn(&mut self, pid: u32, addrs: &[u64]) {
        for (i, addr) in lookup_addresses(addrs).enumerate() {
            if !self.cache.contains_key(&(pid, addr, i > 0)) {
                self.name(pid, addr, i > 0);
            }
        }
    }

    /// Retries the unnamed anonymous addresses of live processes whose maps and JIT names
    /// were not read for [`REREAD_INTERVAL`] (of every live one when `all`, at the end).
    pub fn retry_unnamed(&mut self, all: bool) {
        let pids: Vec<u32> = self.unnamed.keys().copied().collect();
        for pid in pids {
            let due = self
                .reread_at
                .get(&pid)
                .is_none_or(|t| t.elapsed() >= REREAD_INTERVAL);
            let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
            // A process that exited keeps what the symbolizer knew of it (its maps, and the
            // folder of its perf map, held open): at the end its JIT names are read once more,
            // as the runtime may have written the last of them after the hit was seen.
            let retry = all || (due && alive);
            if !retry {
                continue;
            }
            let addrs = self.unnamed.remove(&pid).unwrap_or_default();
            if alive {
                self.symbolizer.forget_process(pid);
            }
            self.reread_at.insert(pid, Instant::now());
            for addr in addrs {
                // Anonymous memory only (no padding fallback): both lookups are the same.
                for ret in [false, true] {
                    if self.cache.contains_key(&(pid, addr, ret)) {
                        self.name(pid, addr, ret);
                    }
                }
            }
        }
    }

    /// The symbolized frames of a stack, innermost first (a function's inlined functions before
    /// it). Addresses not learnt print as unknown. Each frame shows the address of the stack (a
    /// return address, not the one looked up), its offsets moved to match.
    ///
    /// A return address that is not code ends the stack there: the frame-pointer walk read
    /// data from then on (through a frame of code that keeps no frame pointer), so it and every
    /// frame outside it are dropped.
    pub fn frames(&self, pid: u32, addrs: &[u64]) -> Vec<Frame> {
        self.frames_per_address(pid, addrs)
            .into_iter()
            .flatten()
            .collect()
    }

    /// [`StackNamer::frames`] grouped by the stack's address they name (one group per address
    /// kept, in order).
    fn frames_per_address(&self, pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>> {
        let end = lookup_addresses(addrs)
            .enumerate()
            .skip(1)
            .find(|(_, a)| self.not_code.contains(&(pid, *a)))
            .map_or(addrs.len(), |(i, _)| i);
        let addrs = &addrs[..end];
        let mut out = Vec::with_capacity(addrs.len());
        for (i, (addr, lookup)) in addrs.iter().zip(lookup_addresses(addrs)).enumerate() {
            out.push(match self.cache.get(&(pid, lookup, i > 0)) {
                Some((at, frames)) => frames
                    .iter()
                    .map(|f| {
                        let shift = addr - at;
                        Frame {
                            address: *addr,
                            offset: f.offset.map(|o| o + shift),
                            file_offset: f
                                .file_offset
                                .map(|o| netprobe_core::addr::FileOffset(o.0 + shift)),
                            ..f.clone()
                        }
                    })
                    .collect(),
                None => vec![unknown_frame(*addr)],
            });
        }
        out
    }

    /// The frames of a stack no process can name (every one `[unknown] (0xADDR)`), innermost
    /// first.
    pub fn unnamed(addrs: &[u64]) -> Vec<Frame> {
        addrs.iter().map(|&a| unknown_frame(a)).collect()
    }

    /// The named stack, root first (the order of folded lines).
    pub fn stack(&self, pid: u32, addrs: &[u64]) -> Vec<FrameName> {
        self.frames(pid, addrs)
            .iter()
            .rev()
            .map(FrameName::of)
            .collect()
    }

    /// The named stack, root first, of an unwound stack (innermost first, each address with the
    /// method that found it): every frame of an address (its inlined functions too) carries
    /// that method.
    pub fn stack_unwound(&self, pid: u32, walked: &[(u64, UnwoundBy)]) -> Vec<FrameName> {
        let (frames, methods) = self.frames_unwound(pid, walked);
        let mut out: Vec<FrameName> = frames
            .iter()
            .zip(methods)
            .map(|(f, by)| FrameName {
                unwound_by: Some(by),
                ..FrameName::of(f)
            })
            .collect();
        out.reverse();
        out
    }

    /// [`StackNamer::frames`] of an unwound stack, innermost first, and beside each frame the
    /// method that found its address.
    pub fn frames_unwound(
        &self,
        pid: u32,
        walked: &[(u64, UnwoundBy)],
    ) -> (Vec<Frame>, Vec<UnwoundBy>) {
        let addrs: Vec<u64> = walked.iter().map(|w| w.0).collect();
        let mut frames = Vec::with_capacity(walked.len());
        let mut methods = Vec::with_capacity(walked.len());
        for (group, &(_, by)) in self.frames_per_address(pid, &addrs).into_iter().zip(walked) {
            methods.extend(std::iter::repeat_n(by, group.len()));
            frames.extend(group);
        }
        (frames, methods)
    }

    /// Notes for the user gathered while naming (how to get names of JIT-compiled .NET code),
    /// each once per process; empties the list.
    pub fn take_notes(&mut self) -> Vec<String> {
        self.symbolizer.take_notes()
    }
}

/// The addresses to symbolize for a stack: the sampled or probed instruction, then each return
/// address minus one (the call instruction, not what follows it; what perf and Go's
/// `runtime.CallersFrames` do too).
fn lookup_addresses(addrs: &[u64]) -> impl Iterator<Item = u64> + '_ {
    addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) })
}

fn unknown_frame(addr: u64) -> Frame {
    Frame::unknown(addr, None, None)
}
