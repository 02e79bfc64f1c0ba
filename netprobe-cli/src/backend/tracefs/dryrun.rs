//! `--dry-run`: what netprobe would do, as `uprobe_events` lines, `perf probe` commands and a
//! bpftrace program, so the same probes can be placed by hand or by other tools.
//!
//! The text is a shell script a user may paste or pipe into `sh`, and the paths and function
//! names in it come from files and processes that others control. So every such word on a
//! command line is shell-quoted ([`crate::shell::quote`]), every such text in a comment has its
//! control characters escaped ([`crate::printable`]: a newline would end the comment and start a
//! command), and a name or path goes into the bpftrace program only in a form bpftrace's own
//! grammar reads back as the same text ([`bpftrace_string`], [`bpftrace_path`]), else that probe
//! is left out with a comment saying why.

use crate::backend::tracefs::events::{
    event_layout, event_name, probe_defs, removal_lines, KernelEvent, PROBE_ID_FIELD,
};
use crate::backend::tracefs::fetch;
use crate::backend::tracefs::fetch::FetchType;
use crate::backend::tracefs::filter::filter_file;
use crate::backend::tracefs::probe::GroupName;
use crate::gate::GateReport;
use crate::mode::Mode;
use crate::plan::{ArgRequest, Decode, ProbeKind, ProbePlan, Role, RETURN_ADDRESS_FIELD};
use crate::printable::printable;
use crate::shell::quote;
use netprobe_core::abi::IntType;
use std::fmt::Write;
use std::path::Path;

/// The link-time virtual address of file offset `off` in the ELF file `path` (inverse of the
/// segment formula over the PT_LOAD holding it); `None` if not ELF or not in a segment.
fn vaddr_of(path: &Path, off: u64) -> Option<u64> {
    use netprobe_core::file_id::FileId;
    thread_local! {
        // The segments of each file (as it is now: keyed by its identity, as the parse cache
        // is), read once: a plan of libc's 2,200 functions asks two or three times per probe.
        static SEGMENTS: std::cell::RefCell<
            std::collections::HashMap<FileId, Option<netprobe_core::elf::LoadSegments>>,
        > = Default::default();
    }
    let id = FileId::of(path)?;
    SEGMENTS.with_borrow_mut(|known| {
        known
            .entry(id)
            .or_insert_with(|| {
                netprobe_core::elf::ElfFile::open(path)
                    .ok()?
                    .segments()
                    .ok()
            })
            .as_ref()?
            .vaddr_of_file_offset(netprobe_core::addr::FileOffset(off))
            .map(|v| v.0)
    })
}

/// Whether `path` is an ELF file (its first bytes); unreadable files count as ELF (no claim).
fn is_elf(path: &Path) -> bool {
    use netprobe_core::image::{sniff_file, ImageFormat};
    sniff_file(path).map_or(true, |f| f == Some(ImageFormat::Elf))
}

/// A symbol name perf and bpftrace accept as is.
fn plain_symbol(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Which tool a probe location is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    Perf,
    Bpftrace,
}

/// perf probe's and bpftrace's location for a probe: `SYMBOL`, `SYMBOL+0xDELTA`, or a number.
/// The number is the file offset for perf (perf 6.1 writes a raw `-x` address into
/// `uprobe_events` unchanged, i.e. as a file offset: checked here on an ET_EXEC Go binary, whose
/// addresses and offsets differ by 0x400000) and the link-time address for bpftrace (which maps
/// it to a symbol). Go functions always get the number: their names come from the pclntab, which
/// perf and bpftrace do not read (they find nothing in a stripped Go binary).
fn location(plan: &ProbePlan, i: usize, tool: Tool) -> String {
    let p = &plan.probes[i];
    let f = plan.function(p.function);
    let named = f
        .symbol
        .as_deref()
        .filter(|s| plain_symbol(s) && !f.convention.is_go());
    if let Some(sym) = named {
        let delta = p.offset.0.wrapping_sub(f.function_offset.0);
        if delta == 0 {
            return sym.to_string();
        }
        if p.offset.0 > f.function_offset.0 {
            return format!("{sym}+{delta:#x}");
        }
    }
    match (tool, vaddr_of(&p.path, p.offset.0)) {
        (Tool::Bpftrace, Some(v)) => format!("{v:#x}"),
        _ => format!("{:#x}", p.offset.0),
    }
}

/// What a probe of a Go function observes, for a comment next to it: `entry after the
/// stack-check prologue (main.F+0x12; first byte 0x4000)`, `return: RET at main.F+0x40`.
/// `None` for other functions (their probes sit where their names say).
fn go_probe_point_comment(plan: &ProbePlan, i: usize) -> Option<String> {
    let p = &plan.probes[i];
    let f = plan.function(p.function);
    if !f.convention.is_go() {
        return None;
    }
    // Where the Go rules put an entry probe, before any move to a cheaper instruction.
    let planned = p
        .entry_choice
        .as_ref()
        .map_or(p.offset.0, |c| f.function_offset.0 + c.planned.offset);
    let delta = planned.wrapping_sub(f.function_offset.0);
    let first = vaddr_of(&p.path, f.function_offset.0)
        .map(|v| format!("{v:#x}"))
        .unwrap_or_else(|| format!("file offset {}", f.function_offset));
    Some(match (p.role, p.kind) {
        (Role::Entry, _) if delta == 0 => format!(
            "entry at the first byte of {} ({first}; no stack check to skip)",
            f.name
        ),
        (Role::Entry, _) => format!(
            "entry after the stack-check prologue: {}+{delta:#x} (first byte {first}), so a call whose stack grows counts once",
            f.name
        ),
        (Role::Return, ProbeKind::Entry) => format!(
            "return: the RET at {}+{delta:#x}, read before it executes (no uretprobe: it crashes Go)",
            f.name
        ),
        (Role::Return, ProbeKind::UretProbe) => format!(
            "return: uretprobe on {} (--force-uretprobe: crashes Go if the stack moves during a call)",
            f.name
        ),
    })
}

/// Where an entry probe sits and what a hit costs there, when netprobe chose among
/// equivalent points (`crate::gate::choose_entry_points`): `entry at main.Work+0x4 (push,
/// emulated: ~1.5 µs/hit) instead of +0x0 (sub, single-stepped: ~12 µs/hit)`, or why a
/// single-stepped entry stayed.
fn entry_choice_comment(plan: &ProbePlan, i: usize) -> Option<String> {
    let p = &plan.probes[i];
    let c = p.entry_choice.as_ref()?;
    let name = &plan.function(p.function).name;
    if c.moved() {
        return Some(format!(
            "entry at {name}{} instead of {} (--exact-entry keeps it there)",
            c.chosen.describe(),
            c.planned.describe()
        ));
    }
    let why = c.kept.as_ref()?;
    if c.planned.handling != netprobe_core::probe_point::KernelHandling::SingleStepped {
        return None;
    }
    Some(format!(
        "entry at {name}{}, kept: {why}",
        c.planned.describe()
    ))
}

/// Everything worth saying next to a probe's perf line.
fn probe_point_comment(plan: &ProbePlan, i: usize) -> Option<String> {
    let parts: Vec<String> = [
        go_probe_point_comment(plan, i),
        entry_choice_comment(plan, i),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The shell line that appends `line` to `file`: `echo 'LINE' >> FILE`, or `printf '%s\n'` when
/// the line holds a backslash (dash's `echo` reads `\c`, `\n`... as escapes: POSIX leaves
/// `echo` with a backslash operand unspecified, XCU "echo").
fn append_line(line: &str, file: &str) -> String {
    if line.contains('\\') {
        format!("printf '%s\\n' {} >> {file}", quote(line))
    } else {
        format!("echo {} >> {file}", quote(line))
    }
}

/// `text` as a bpftrace string literal's contents: `"` and `\` escaped with a backslash (both
/// read back so by bpftrace 0.17, checked here with `printf` and map keys); `None` for text
/// holding a control character or `%` (bpftrace 0.17's `printf` prints `%%` as two characters,
/// so a `%` in a format has no escape), which the program then leaves out.
fn bpftrace_string(text: &str) -> Option<String> {
    if text.chars().any(|c| c.is_control() || c == '%') {
        return None;
    }
    Some(text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A file path as a bpftrace attach point reads it: as is when made of `[A-Za-z0-9/._-]` (what
/// bpftrace 0.17's lexer takes unquoted: `+` or `@` is a syntax error there), else in double
/// quotes when it holds printable ASCII other than `"` and `\` (checked here with a path holding
/// a space, `'`, `$(...)`, backquotes, `;`, `{a,b}`, `%`, `#` and `~`); `None` otherwise.
fn bpftrace_path(path: &str) -> Option<String> {
    let bare = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-');
    if !path.is_empty() && path.bytes().all(bare) {
        return Some(path.to_string());
    }
    path.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        .then(|| format!("\"{path}\""))
}

/// The dry-run text for a plan; the error a real run would stop with when a probe cannot be
/// written to `uprobe_events` (so the dry run fails where the run would).
pub fn render(
    plan: &ProbePlan,
    gate: &GateReport,
    group: &GroupName,
    pids: &[u32],
    command: Option<&str>,
    mode: Mode,
) -> crate::Result<String> {
    let mut s = String::new();
    let defs = probe_defs(plan, group)?;
    let tracefs = "/sys/kernel/tracing";
    for n in &plan.notes {
        let _ = writeln!(s, "# note: {}", printable(n));
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(s);
    }
    // Probes the probe-safety gate refuses stay in the listing, commented out and marked, so
    // the dry run shows what the real run would refuse (and it exits 1 like the real run).
    let mark = |i: usize| {
        if gate.refusal(i).is_some() {
            "# REFUSED: "
        } else {
            ""
        }
    };
    if gate.any_refused() {
        let _ = writeln!(
            s,
            "# The probe-safety gate refuses these probes, so netprobe would place nothing:"
        );
        for (i, p) in plan.probes.iter().enumerate() {
            if let Some(why) = gate.refusal(i) {
                let what = format!(
                    "{} at {}:{}: {why}",
                    plan.function(p.function).name,
                    p.path.display(),
                    p.offset
                );
                let _ = writeln!(s, "# REFUSED: {}", printable(&what));
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "# 1. The lines netprobe appends to {tracefs}/uprobe_events (group {group}):"
    );
    let events = format!("{tracefs}/uprobe_events");
    for (i, d) in defs.iter().enumerate() {
        let _ = writeln!(s, "{}{}", mark(i), append_line(&d.to_string(), &events));
    }
    // The filters (`--filter`, `--tid`, `--comm`), written before the events are enabled: in
    // the session's instance, or for persistent probes in the top-level events.
    let layout = event_layout(plan).ok();
    let filtered: Vec<&KernelEvent> = layout
        .as_ref()
        .map(|l| l.events.iter().filter(|e| e.filter.is_some()).collect())
        .unwrap_or_default();
    if !filtered.is_empty() {
        let dir = if mode == Mode::Persist {
            tracefs.to_string()
        } else {
            format!("{tracefs}/instances/{group}")
        };
        let _ = writeln!(
            s,
            "# and the filters the kernel tests each hit with before it reaches the ring buffer:"
        );
        for e in &filtered {
            let _ = writeln!(
                s,
                "echo {} > {dir}/{}",
                quote(e.filter.as_deref().unwrap_or_default()),
                filter_file(group, &e.name).display()
            );
        }
    }
    if plan.user_stacks {
        // What `Session` does for `--stack` (backend/tracefs/session/): the option makes the
        // kernel write a `user_stack` record after each event of the instance (kernel
        // `Documentation/trace/ftrace.rst`, "userstacktrace"; `ftrace_trace_userstack` in
        // `kernel/trace/trace.c`).
        let inst = format!("{tracefs}/instances/{group}");
        let _ = writeln!(
            s,
            "# and the user stacks: the session's instance records one after each hit (a frame-pointer walk, as deep as the `caller` array of {tracefs}/events/ftrace/user_stack/format; at an entry or RET probe it misses the caller, whose return address is the {RETURN_ADDRESS_FIELD} word, put back under the probed function):"
        );
        let _ = writeln!(s, "mkdir {inst}");
        if !pids.is_empty() {
            let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
            let _ = writeln!(
                s,
                "echo '{}' > {inst}/set_event_pid  # and each thread's id",
                list.join(" ")
            );
        }
        let _ = writeln!(s, "echo 1 > {inst}/options/userstacktrace");
        let _ = writeln!(s, "echo 1 > {inst}/events/{group}/enable");
        let _ = writeln!(
            s,
            "cat {inst}/trace_pipe  # each hit, then `<user stack trace>` and one `=> <address>` a frame"
        );
        let _ = writeln!(s, "echo 0 > {inst}/events/{group}/enable; rmdir {inst}");
    }
    let _ = writeln!(s, "# remove them with:");
    for line in removal_lines(&defs) {
        let _ = writeln!(s, "{}", append_line(&line.to_string(), &events));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "# 2. The same probes with perf:");
    for (i, d) in defs.iter().enumerate() {
        let p = &plan.probes[i];
        let loc = location(plan, i, Tool::Perf);
        let ret = if p.kind == ProbeKind::UretProbe {
            "%return"
        } else {
            ""
        };
        // perf records the command name itself, and gives each probe its own event (it has no
        // multi-probe events), so the np_id tag is not needed there.
        let args: Vec<String> = d
            .args()
            .iter()
            .filter(|a| a.expr != "$comm" && a.name != PROBE_ID_FIELD)
            .map(|a| a.render())
            .collect();
        let comment = probe_point_comment(plan, i)
            .map(|c| format!("  # {}", printable(&c)))
            .unwrap_or_default();
        let definition = format!(
            "{}:{}={loc}{ret}{}{}",
            group,
            event_name(plan, i).map_or_else(|_| d.event().to_string(), |e| e.to_string()),
            if args.is_empty() { "" } else { " " },
            args.join(" ")
        );
        let _ = writeln!(
            s,
            "{}perf probe -x {} -a {}{comment}",
            mark(i),
            quote(d.path().as_str()),
            quote(&definition)
        );
    }
    if mode != Mode::Persist {
        // perf names return probes EVENT__return, hence the wildcard.
        let target = match (command, pids.is_empty()) {
            (Some(c), _) => format!("-- {c}"),
            (None, true) => "-a".to_string(),
            (None, false) => format!(
                "-p {}",
                pids.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        // perf applies a tracepoint filter to the -e before it (`perf record --filter`), with
        // the same kernel parser; one filter for all events only when every probe has it.
        let texts: Vec<Option<&str>> = layout
            .as_ref()
            .map(|l| l.events.iter().map(|e| e.filter.as_deref()).collect())
            .unwrap_or_default();
        let perf_filter = match texts.first() {
            Some(Some(t)) if texts.iter().all(|x| *x == Some(*t)) => {
                format!(" --filter {}", quote(t))
            }
            _ => String::new(),
        };
        if perf_filter.is_empty() && !filtered.is_empty() {
            let _ = writeln!(
                s,
                "# (the probes' filters differ: give perf record one `-e EVENT --filter TEXT` pair per event of 1.)"
            );
        }
        // perf's own frame-pointer walk; recent kernels also restore the caller when the
        // probed instruction is `push %rbp` or `endbr64` (`is_uprobe_at_func_entry`,
        // `arch/x86/events/core.c`; seen here on 6.18: bpftrace's `ustack` of a C function
        // probed at its first byte names the caller).
        let call_graph = if plan.user_stacks {
            " --call-graph fp"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "perf record -e '{group}:*'{perf_filter}{call_graph} {target} && perf script"
        );
        let _ = writeln!(s, "perf probe -d '{group}:*'");
    }
    let _ = writeln!(s);
    if let Some(p) = plan.probes.iter().find(|p| !is_elf(&p.path)) {
        // Verified with bpftrace 0.17: "uprobe target file ... does not exist or is not
        // executable" for a .NET assembly (even with the executable bit set), and attaching to
        // the uprobe events of section 1 as tracepoints fails (PERF_EVENT_IOC_SET_BPF: EINVAL).
        let _ = writeln!(
            s,
            "# 3. No bpftrace program: bpftrace attaches uprobes to ELF files only, and {} is not one (use the lines of 1. or perf, 2.)",
            printable(&p.path.display().to_string())
        );
        return Ok(s);
    }
    let _ = writeln!(s, "# 3. A bpftrace program doing the same:");
    if !filtered.is_empty() {
        let _ = writeln!(
            s,
            "# (without the --filter/--tid/--comm of 1.: add them as predicates by hand)"
        );
    }
    if plan.user_stacks {
        let _ = writeln!(
            s,
            "# (ustack walks the frame pointers as perf does: on older kernels, or at a probe on another instruction than push %rbp/endbr64 such as a Go RET, it misses the caller netprobe puts back)"
        );
    }
    if plan.functions.iter().any(|f| f.convention.is_go()) {
        let _ = writeln!(
            s,
            "# (bpftrace maps each address to a symbol of the file: it finds none in a stripped Go binary, and places a probe inside a function only when built with probe-offset support, which Debian's bpftrace 0.17 is not; 1. and 2. work in every case)"
        );
    }
    let mut program = String::from("\n");
    let filter = if command.is_some() {
        " /pid == cpid/".to_string()
    } else if pids.is_empty() {
        String::new()
    } else {
        format!(
            " /{}/",
            pids.iter()
                .map(|p| format!("pid == {p}"))
                .collect::<Vec<_>>()
                .join(" || ")
        )
    };
    for i in 0..plan.probes.len() {
        let p = &plan.probes[i];
        let f = plan.function(p.function);
        let loc = location(plan, i, Tool::Bpftrace);
        let kind = match p.kind {
            ProbeKind::Entry => "uprobe",
            ProbeKind::UretProbe => "uretprobe",
        };
        let name = event_name(plan, i)
            .map(|e| e.to_string())
            .unwrap_or_default();
        let path = p.path.to_str().and_then(bpftrace_path);
        let (Some(fname), Some(path)) = (bpftrace_string(&f.name), path) else {
            let why = match bpftrace_string(&f.name) {
                None => format!(
                    "left out: the function name {:?} holds a control character or '%', which a bpftrace string cannot hold as is (use 1. or 2.)",
                    f.name
                ),
                Some(_) => format!(
                    "left out: the path {:?} holds a character a bpftrace attach point cannot hold ('\"', '\\', a control or non-ASCII character; use 1. or 2.)",
                    p.path
                ),
            };
            let _ = writeln!(program, "  // {name}: {}", printable(&why));
            continue;
        };
        let body = match (mode, p.role) {
            (Mode::Count, _) if plan.user_stacks => {
                format!("@calls[\"{fname}\", ustack] = count();")
            }
            (Mode::Count, _) | (Mode::Persist, _) => format!("@calls[\"{fname}\"] = count();"),
            (Mode::Latency, Role::Entry) => format!("@start{i}[{}] = nsecs;", pair_expr(plan, i)),
            (Mode::Latency, Role::Return) => {
                let entry = plan
                    .probes
                    .iter()
                    .position(|q| q.function == p.function && q.role == Role::Entry)
                    .unwrap_or(i);
                let key = pair_expr(plan, i);
                format!(
                    "if (@start{entry}[{key}]) {{ @ns[\"{fname}\"] = hist(nsecs - @start{entry}[{key}]); delete(@start{entry}[{key}]); }}"
                )
            }
            (Mode::Trace, _) if plan.user_stacks => {
                format!("{} print(ustack);", trace_printf(plan, i, &fname))
            }
            (Mode::Trace, _) => trace_printf(plan, i, &fname),
        };
        match probe_point_comment(plan, i) {
            Some(c) => {
                let _ = writeln!(program, "  // {name}: {}", printable(&c));
            }
            None => {
                let _ = writeln!(program, "  // {name}");
            }
        }
        let _ = writeln!(
            program,
            "  {}{kind}:{path}:{loc}{filter} {{ {body} }}",
            if gate.refusal(i).is_some() {
                "// REFUSED: "
            } else {
                ""
            },
        );
    }
    // The whole program is one shell word (its names may hold `'`).
    let _ = match command {
        Some(c) => writeln!(s, "bpftrace -c {} -e {}", quote(c), quote(&program)),
        None => writeln!(s, "bpftrace -e {}", quote(&program)),
    };
    Ok(s)
}

fn pair_expr(plan: &ProbePlan, i: usize) -> String {
    match &plan.probes[i].pair_field {
        Some(_) => match &plan.function(plan.probes[i].function).pairing {
            crate::plan::PairingKey::Register(r) => format!("reg(\"{r}\")"),
            crate::plan::PairingKey::Thread => "tid".into(),
        },
        None => "tid".into(),
    }
}

/// A bpftrace expression for a register-based fetch-arg expression (`%di` → `reg("di")`,
/// `+8(%di)` → `*(reg("di") + 8)`), typed; `None` when not translatable.
fn bpf_value(expr: &str, ty: FetchType) -> Option<(String, &'static str)> {
    let cast = |v: String| -> (String, &'static str) {
        match ty {
            FetchType::Int(IntType::S8) => (format!("(int8){v}"), "%d"),
            FetchType::Int(IntType::S16) => (format!("(int16){v}"), "%d"),
            FetchType::Int(IntType::S32) => (format!("(int32){v}"), "%d"),
            FetchType::Int(IntType::S64) => (format!("(int64){v}"), "%lld"),
            FetchType::Int(IntType::U8) => (format!("(uint8){v}"), "%u"),
            FetchType::Int(IntType::U16) => (format!("(uint16){v}"), "%u"),
            FetchType::Int(IntType::U32) => (format!("(uint32){v}"), "%u"),
            FetchType::Int(IntType::U64) => (format!("(uint64){v}"), "%llu"),
            FetchType::Int(_) => (v, "0x%lx"),
            FetchType::String => (format!("str({v})"), "\"%s\""),
            FetchType::Array { .. } => (v, "%p"),
        }
    };
    if expr == "$retval" {
        return Some(cast("retval".into()));
    }
    if let Some(r) = expr.strip_prefix('%') {
        return Some(cast(format!("reg(\"{r}\")")));
    }
    // +OFF(%reg)
    let inner = expr.strip_prefix('+')?;
    let (off, rest) = inner.split_once('(')?;
    let reg = rest.strip_suffix(')')?.strip_prefix('%')?;
    let off: i64 = off.parse().ok()?;
    let addr = format!("reg(\"{reg}\") + {off}");
    Some(match ty {
        FetchType::String => (format!("str({addr})"), "\"%s\""),
        FetchType::Int(IntType::S32) => (format!("*(int32 *)({addr})"), "%d"),
        FetchType::Int(IntType::U32) => (format!("*(uint32 *)({addr})"), "%u"),
        FetchType::Int(IntType::S64) => (format!("*(int64 *)({addr})"), "%lld"),
        _ => (format!("*(uint64 *)({addr})"), "0x%lx"),
    })
}

/// The `printf` of a trace probe; `fname` is the function's name as [`bpftrace_string`] wrote it.
fn trace_printf(plan: &ProbePlan, i: usize, fname: &str) -> String {
    let p = &plan.probes[i];
    let mut fmt_parts = Vec::new();
    let mut vals = Vec::new();
    let mut notes = Vec::new();
    for a in &p.args {
        let fetchargs = fetch::fetchargs(p);
        let fetch = |field: &str| fetchargs.iter().find(|x| x.name == field);
        match &a.decode {
            Decode::Raw { field }
                if fetch(field).is_some_and(|fa| matches!(fa.ty, FetchType::Array { .. })) =>
            {
                notes.push(format!(
                    "{}: array fetch-args are not translated to bpftrace",
                    a.name
                ))
            }
            Decode::Int { field, .. } | Decode::CString { field } | Decode::Raw { field } => {
                if let Some(fa) = fetch(field) {
                    match bpf_value(&fa.expr, fa.ty) {
                        Some((v, f)) => {
                            fmt_parts.push(format!("{}={f}", a.name));
                            vals.push(v);
                        }
                        None => notes.push(format!("{}: {} not translated", a.name, fa.render())),
                    }
                }
            }
            Decode::GoString {
                bytes_field,
                len_field,
            } => {
                // bpftrace's str(PTR, LEN) reads exactly LEN bytes (a Go string has no NUL);
                // the pointer is the expression the bytes fetch-arg dereferences, `+0(PTR)`.
                let ptr = fetch(bytes_field)
                    .and_then(|fa| fa.expr.strip_prefix("+0(")?.strip_suffix(')'))
                    .and_then(|inner| bpf_value(inner, FetchType::Int(IntType::X64)));
                let len = fetch(len_field)
                    .and_then(|fa| bpf_value(&fa.expr, FetchType::Int(IntType::X64)));
                match (ptr, len) {
                    (Some((p, _)), Some((l, _))) => {
                        fmt_parts.push(format!("{}=\"%s\"", a.name));
                        vals.push(format!("str({p}, {l})"));
                    }
                    _ => notes.push(format!("{}: not translated", a.name)),
                }
            }
            Decode::Utf16 { len_field, .. } => {
                if let Some(fa) = fetch(len_field) {
                    if let Some((v, f)) = bpf_value(&fa.expr, fa.ty) {
                        fmt_parts.push(format!("{}_len={f}", a.name));
                        vals.push(v);
                    }
                }
                notes.push(format!(
                    "{}: string text is not decoded by this program",
                    a.name
                ));
            }
        }
    }
    let escaped = |sep: &str| fmt_parts.join(sep).replace('"', "\\\"");
    let arrow = match p.role {
        Role::Entry => format!("-> {fname}({})", escaped(", ")),
        Role::Return => format!("<- {fname} {}", escaped(" ")),
    };
    let mut body = format!("printf(\"%d/%d %s {arrow}\\n\", pid, tid, comm");
    for v in vals {
        body.push_str(", ");
        body.push_str(&v);
    }
    body.push_str(");");
    if !notes.is_empty() {
        body.push_str(&format!(" /* {} */", notes.join("; ")));
    }
    body
}

/// The argument list as users wrote it (for the demo's explanations).
pub fn describe_args(reqs: &[ArgRequest]) -> String {
    reqs.iter()
        .map(|r| match r {
            ArgRequest::Positional { name, ty } => {
                format!(
                    "{}{}",
                    name.as_deref().map(|n| format!("{n}=")).unwrap_or_default(),
                    ty.label()
                )
            }
            ArgRequest::Raw { name, text } => format!("{name}={text}"),
            ArgRequest::Located { name, ty, .. } => format!("{name}={}", ty.label()),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
