//! `netprobe demo`: trace a known function end to end and explain each step.
//!
//! netprobe starts a child of its own binary (`netprobe demo-target`, hidden) paused before it
//! runs; the child calls [`netprobe_demo_add`] [`DEMO_CALLS`] times with known arguments. netprobe
//! finds the function in its own file, computes the probe offset by the segment formula, places an
//! entry probe (with the three arguments) and a return probe (with the return value) limited to the
//! child, lets the child run, prints every hit, checks each against what the child was asked to
//! do, and removes everything.

use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::plan::{ArgRequest, FunctionPlan, Hit, PairingKey, ProbePlan, Returns, Role, Value};
use crate::session::{Options, Session, Target};
use crate::shell::quote;
use crate::sinks::{Flow, Sink};
use netprobe_core::abi::{CallingConvention, IntType, ValueType};
use netprobe_core::elf::ElfFile;
use netprobe_core::resolve::resolve_file;
use netprobe_core::symbol::Address;
use std::ffi::{c_char, CStr, CString};
use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How many times the demo target calls the function.
pub const DEMO_CALLS: i32 = 5;
/// The traced function's name (as exported).
pub const DEMO_SYMBOL: &str = "netprobe_demo_add";

static DEMO_TOTAL: AtomicI64 = AtomicI64::new(0);

/// The function the demo traces: returns `a * 3 + b` (plus the label's length, so the string is
/// used). Exported and never inlined so that it exists in the binary's symbol table at one address.
///
/// # Safety
/// `label` must be null or point to a NUL-terminated string.
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn netprobe_demo_add(a: i32, b: u64, label: *const c_char) -> i64 {
    let len = if label.is_null() {
        0
    } else {
        // SAFETY: callers pass a valid NUL-terminated string or null.
        unsafe { CStr::from_ptr(label) }.to_bytes().len() as i64
    };
    let r = std::hint::black_box(a as i64 * 3 + b as i64 + len);
    DEMO_TOTAL.fetch_add(r, Ordering::Relaxed);
    r
}

/// The arguments of call `i` (1-based) and its expected return value.
pub fn demo_call(i: i32) -> (i32, u64, String, i64) {
    let label = format!("call-{i}");
    let b = (i as u64) * 1000;
    let ret = i as i64 * 3 + b as i64 + label.len() as i64;
    (i, b, label, ret)
}

/// The hidden `demo-target` subcommand: make the calls, exit.
pub fn demo_target(calls: i32) -> i32 {
    for i in 1..=calls {
        let (a, b, label, _) = demo_call(i);
        let c = CString::new(label).expect("no NUL");
        // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
        std::hint::black_box(unsafe {
            netprobe_demo_add(std::hint::black_box(a), std::hint::black_box(b), c.as_ptr())
        });
    }
    0
}

struct Collect(Vec<Hit>);

impl Sink for Collect {
    fn hit(&mut self, _plan: &ProbePlan, hit: Hit) -> Flow {
        self.0.push(hit);
        Flow::Continue
    }
}

fn step(out: &mut dyn Write, n: u32, title: &str) {
    let _ = writeln!(out, "\n== Step {n}: {title}");
}

/// Runs the demo; returns the exit code (0 when every call was seen with the right values).
pub fn run(out: &mut dyn Write) -> Result<i32> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| Error::io("/proc/self/exe", e))?;
    let _ = writeln!(
        out,
        "netprobe demo: trace {DEMO_SYMBOL}() in a child of this very binary, end to end."
    );

    step(out, 1, "find the function in the file");
    let elf = ElfFile::open(&exe)?;
    let targets = resolve_file(&exe, DEMO_SYMBOL)?;
    let target = targets
        .first()
        .ok_or_else(|| Error::usage("demo symbol not found"))?;
    let Address::Virt(vaddr) = target.symbol.address else {
        return Err(Error::usage("demo symbol has no ELF address"));
    };
    let _ = writeln!(
        out,
        "{} ({}) has symbol {DEMO_SYMBOL} at virtual address {vaddr}, {} bytes of code",
        exe.display(),
        target.symbol.origin.label(),
        target
            .symbol
            .size
            .map_or("?".to_string(), |s| s.to_string())
    );

    step(
        out,
        2,
        "turn the address into a file offset (what uprobe_events wants)",
    );
    let ex = elf.explain(vaddr)?;
    let seg = ex
        .segment
        .ok_or_else(|| Error::usage("demo symbol is outside every executable segment"))?;
    let _ = writeln!(
        out,
        "the executable PT_LOAD segment holding it: p_vaddr {:#x}, p_offset {:#x}, p_filesz {:#x}",
        seg.vaddr, seg.offset, seg.filesz
    );
    let _ = writeln!(
        out,
        "offset = vaddr - p_vaddr + p_offset = {:#x} - {:#x} + {:#x} = {}",
        vaddr.0, seg.vaddr, seg.offset, target.file_offset
    );
    if ex.segment_offset != Some(target.file_offset) {
        return Err(Error::usage(
            "internal: the resolver and the segment formula disagree",
        ));
    }

    step(
        out,
        3,
        "start the target paused (a child of netprobe, stopped before exec)",
    );
    let command = [
        exe.display().to_string(),
        "demo-target".to_string(),
        "--calls".to_string(),
        DEMO_CALLS.to_string(),
    ]
    .iter()
    .map(|w| quote(w))
    .collect::<Vec<_>>()
    .join(" ");
    // The target is netprobe's own file, so its C convention is that of the architecture this
    // netprobe was built for.
    let arch = netprobe_core::arch::Arch::host()
        .ok_or_else(|| Error::usage("the demo needs a netprobe built for x86_64 or aarch64"))?;
    let mut plan = ProbePlan::new(true);
    plan.add_function(FunctionPlan {
        name: DEMO_SYMBOL.into(),
        image: exe.clone(),
        probe_path: target.probe_path.clone(),
        function_offset: target.file_offset,
        entry_offsets: vec![target.file_offset],
        returns: Returns::UretProbe,
        convention: CallingConvention::native(arch),
        args: vec![
            ArgRequest::Positional {
                name: Some("a".into()),
                ty: ValueType::Int(IntType::S32),
            },
            ArgRequest::Positional {
                name: Some("b".into()),
                ty: ValueType::Int(IntType::U64),
            },
            ArgRequest::Positional {
                name: Some("label".into()),
                ty: ValueType::CString,
            },
        ],
        ret: Some(ValueType::Int(IntType::S64)),
        pairing: PairingKey::Thread,
        symbol: Some(DEMO_SYMBOL.into()),
    })?;
    // Scoped to the child, as `-c` is: the uprobe events are opened as perf events on its task,
    // so only its memory gets the breakpoint (another netprobe running this same binary never
    // traps), recording from its exec on. The session holds the child before its exec until the
    // first `run`.
    let mut session = Session::builder(Mode::Trace)
        .probe_plan(plan)
        .target(Target::Command {
            line: command,
            user: None,
        })
        .options(Options {
            duration: Some(Duration::from_secs(20)),
            wake_on_every_hit: true,
            ..Options::default()
        })
        .start()?;
    let pid = session.pids().first().copied().unwrap_or_default();
    let _ = writeln!(
        out,
        "pid {pid} will run `netprobe demo-target --calls {DEMO_CALLS}`: {DEMO_SYMBOL}(i, i*1000, \"call-i\") for i = 1..{DEMO_CALLS}"
    );

    step(
        out,
        4,
        "place the probes (defined in uprobe_events, opened as perf events on that pid)",
    );
    let _ = writeln!(
        out,
        "System V calling convention: a in %di (s32), b in %si (u64), label is a char* in %dx; the return value is $retval"
    );
    let probes_text = session.definitions();
    for d in &probes_text {
        let _ = writeln!(out, "  appended to uprobe_events: {d}");
    }
    let _ = writeln!(
        out,
        "  opened as perf events on pid {pid}'s task: the breakpoint goes into its memory alone"
    );

    step(out, 5, "let the target run and read the hits");
    let mut hits = Collect(Vec::new());
    let outcome = session.run(&mut hits)?;
    let (reason, lost) = (outcome.reason, outcome.lost);
    let group = session.name().to_string();
    let stopped = session.stop()?;
    let status = stopped.command_status.unwrap_or_default();
    for h in &hits.0 {
        let args = h
            .args
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        match h.role {
            Role::Entry => {
                let _ = writeln!(out, "  tid {} -> {DEMO_SYMBOL}({args})", h.tid);
            }
            Role::Return => {
                let _ = writeln!(
                    out,
                    "  tid {} <- {DEMO_SYMBOL} returned {}",
                    h.tid,
                    h.args.first().map(|a| a.1.to_string()).unwrap_or_default()
                );
            }
        }
    }
    let _ = writeln!(out, "  ({reason}; target exit status {status})");

    step(
        out,
        6,
        "check every hit against what the target was asked to do",
    );
    let entries: Vec<&Hit> = hits.0.iter().filter(|h| h.role == Role::Entry).collect();
    let returns: Vec<&Hit> = hits.0.iter().filter(|h| h.role == Role::Return).collect();
    let mut ok =
        entries.len() == DEMO_CALLS as usize && returns.len() == DEMO_CALLS as usize && !lost.any();
    for i in 1..=DEMO_CALLS {
        let (a, b, label, ret) = demo_call(i);
        let idx = (i - 1) as usize;
        let entry_ok = entries.get(idx).is_some_and(|h| {
            h.args.first().map(|x| &x.1) == Some(&Value::Signed(a as i64))
                && h.args.get(1).map(|x| &x.1) == Some(&Value::Unsigned(b))
                && matches!(h.args.get(2).map(|x| &x.1), Some(Value::Str { text, .. }) if *text == label)
        });
        let ret_ok = returns
            .get(idx)
            .is_some_and(|h| h.args.first().map(|x| &x.1) == Some(&Value::Signed(ret)));
        ok &= entry_ok && ret_ok;
        let _ = writeln!(
            out,
            "  call {i}: expected ({a}, {b}, \"{label}\") -> {ret}: entry {} return {}",
            if entry_ok { "ok" } else { "MISMATCH" },
            if ret_ok { "ok" } else { "MISMATCH" }
        );
    }
    let _ = writeln!(
        out,
        "  {} entries and {} returns recorded for {DEMO_CALLS} calls; {} lost",
        entries.len(),
        returns.len(),
        lost.counted
    );

    step(out, 7, "clean up");
    for p in &probes_text {
        let head = p.split(' ').next().unwrap_or_default();
        let ev = head.split_once(':').map(|x| x.1).unwrap_or_default();
        let _ = writeln!(out, "  appended to uprobe_events: -:{ev}");
    }
    let (left, inst_left) = stopped.leftovers()?;
    let _ = writeln!(
        out,
        "  closed the perf events; probes of {group} left in uprobe_events: {left}, instance left: {}",
        if inst_left { "yes" } else { "no" }
    );
    ok &= left == 0 && !inst_left;
    let _ = writeln!(
        out,
        "\n{}",
        if ok {
            "RESULT: every call was seen with its exact arguments and return value, and nothing was left behind."
        } else {
            "RESULT: MISMATCH: see above."
        }
    );
    Ok(if ok { 0 } else { 1 })
}
