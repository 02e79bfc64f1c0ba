//! Output formats: dry-run (uprobe_events lines, perf probe, bpftrace) through the real binary, and
//! trace/count/latency rendering of decoded hits.
//!
//! Snapshots mask only what changes from run to run: the tracee's path (built at test time, its
//! name carrying a content hash) and the session names (pids). Offsets stay: an offset into the
//! tracee is written `[FUNCTION]` only where it is that function's file offset by tools netprobe
//! did not write (`nm` and `readelf -sW` agree on its address, `readelf -lW` maps it to the file:
//! `fixtures::binutils`); any other offset is kept as netprobe printed it, so a wrong one changes
//! the snapshot.

use assert_cmd::Command;
use fixtures::tracee;
use netprobe_cli::backend::Lost;
use netprobe_cli::plan::{
    ArgRequest, FunctionPlan, Hit, PairingKey, ProbePlan, Returns, Role, Value,
};
use netprobe_cli::sinks::{Counter, Format, Latency, Sink, TaskInfo, TracePrinter};
use netprobe_core::abi::{CallingConvention, IntType as FetchType, ValueType as ArgType};
use netprobe_core::addr::FileOffset;

fn filters(bin: &str) -> Vec<(String, String)> {
    vec![
        (fixtures::live::regex_escape(bin), "[TRACEE]".into()),
        (r"netprobe_\d+_\d+".into(), "netprobe_[SESSION]".into()),
        // The fixture's file name carries a content hash.
        (r"tracee[-_][0-9a-f]{16}".into(), "tracee-[HASH]".into()),
    ]
}

fn dry_run(args: &[&str]) -> String {
    let out = Command::cargo_bin("netprobe")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `out` with each `:0x…` offset that is the file offset of a function of `bin`, by
/// [`fixtures::binutils::agreed_function_offsets`], written `:[FUNCTION]`; other offsets as they
/// are.
fn name_offsets(out: &str, bin: &str) -> String {
    let functions = fixtures::binutils::agreed_function_offsets(std::path::Path::new(bin))
        .unwrap_or_else(|e| panic!("nm/readelf on {bin}: {e}"));
    let mut named = String::with_capacity(out.len());
    let mut rest = out;
    while let Some(at) = rest.find(":0x") {
        named.push_str(&rest[..at]);
        let digits = rest[at + 3..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - at - 3);
        let hex = &rest[at + 3..at + 3 + digits];
        match u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|o| functions.get(&o))
        {
            Some(name) => named.push_str(&format!(":[{name}]")),
            None => named.push_str(&rest[at..at + 3 + digits]),
        }
        rest = &rest[at + 3 + digits..];
    }
    named.push_str(rest);
    named
}

macro_rules! snap {
    ($name:expr, $bin:expr, $value:expr) => {{
        let value = name_offsets(&$value, $bin);
        let f = filters($bin);
        let refs: Vec<(&str, &str)> = f.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        insta::with_settings!({filters => refs}, {
            insta::assert_snapshot!($name, value);
        });
    }};
}

#[test]
fn dry_run_trace_with_command() {
    let bin = tracee::path();
    let cmd = format!("{bin} now 3");
    let out = dry_run(&[
        "trace",
        "--dry-run",
        "-c",
        &cmd,
        &format!("{bin}:np_add a=s32 b=x64 s=string"),
        &format!("r:{bin}:np_add s64"),
    ]);
    snap!("dry_run_trace_with_command", &bin, out);
}

#[test]
fn dry_run_count_system_wide() {
    let bin = tracee::path();
    let out = dry_run(&["count", "--dry-run", &format!("{bin}:np_*")]);
    snap!("dry_run_count_system_wide", &bin, out);
}

#[test]
fn dry_run_latency_with_pid() {
    let bin = tracee::path();
    let out = dry_run(&[
        "latency",
        "--dry-run",
        "-c",
        &format!("{bin} now 1"),
        &format!("{bin}:np_add"),
    ]);
    snap!("dry_run_latency_with_command", &bin, out);
}

/// `--stack` adds the instance's `userstacktrace` option and the caller's word to section 1,
/// a call graph to perf, and `ustack` to bpftrace.
#[test]
fn dry_run_count_with_stacks() {
    let bin = tracee::path();
    let out = dry_run(&[
        "count",
        "--stack",
        "--dry-run",
        "-c",
        &format!("{bin} now 1"),
        &format!("{bin}:np_add"),
    ]);
    snap!("dry_run_count_with_stacks", &bin, out);
}

#[test]
fn dry_run_persistent_probe() {
    let bin = tracee::path();
    let out = dry_run(&[
        "probe",
        "add",
        "--dry-run",
        "--group",
        "mygroup",
        // 0x10 lies in the ELF header, not in code: the probe-safety gate refuses it unless
        // told otherwise (the warning goes to stderr; the probes printed are the same).
        "--unsafe-offset",
        &format!("{bin}:np_add a=s32 len=+8(%si):s32"),
        &format!("{bin}:0x10"),
    ]);
    snap!("dry_run_persistent_probe", &bin, out);
}

/// A plan with one C function (entry args + return) and hits for it.
fn sample() -> (ProbePlan, Vec<Hit>) {
    let mut plan = ProbePlan::new(true);
    plan.add_function(FunctionPlan {
        name: "np_add".into(),
        image: "/bin/tracee".into(),
        probe_path: "/bin/tracee".into(),
        function_offset: FileOffset(0x13d0),
        entry_offsets: vec![FileOffset(0x13d0)],
        returns: Returns::UretProbe,
        convention: CallingConvention::SysV,
        args: vec![
            ArgRequest::Positional {
                name: Some("a".into()),
                ty: ArgType::Int(FetchType::S32),
            },
            ArgRequest::Positional {
                name: Some("b".into()),
                ty: ArgType::Int(FetchType::X64),
            },
            ArgRequest::Positional {
                name: Some("s".into()),
                ty: ArgType::CString,
            },
            ArgRequest::Positional {
                name: Some("name".into()),
                ty: ArgType::DotnetString,
            },
        ],
        ret: Some(ArgType::Int(FetchType::S64)),
        pairing: PairingKey::Thread,
        symbol: Some("np_add".into()),
    })
    .unwrap();
    let mut hits = Vec::new();
    for i in 1..=3u64 {
        let t0 = 1_000_000_000 + i * 10_000;
        hits.push(Hit {
            ts_ns: t0,
            tid: 4242,
            pid: None,
            probe: 0,
            function: plan.functions[0].id,
            role: Role::Entry,
            args: vec![
                ("a".into(), Value::Signed(i as i64 - 3)),
                ("b".into(), Value::Hex(i * 0x10)),
                (
                    "s".into(),
                    Value::Str {
                        text: format!("lbl-{i}"),
                        truncated: false,
                        length: None,
                    },
                ),
                (
                    "name".into(),
                    if i == 3 {
                        Value::Fault
                    } else {
                        Value::Str {
                            text: "x".repeat(64),
                            truncated: true,
                            length: Some(100),
                        }
                    },
                ),
            ],
            pair_key: 4242,
            comm: Some("tracee".into()),
            user_stack: None,
        });
        hits.push(Hit {
            ts_ns: t0 + 512 * i,
            tid: 4242,
            pid: None,
            probe: 1,
            function: plan.functions[0].id,
            role: Role::Return,
            args: vec![("ret".into(), Value::Signed(i as i64 * 100))],
            pair_key: 4242,
            comm: Some("tracee".into()),
            user_stack: None,
        });
    }
    (plan, hits)
}

fn printed(format: Format) -> String {
    let (plan, hits) = sample();
    let mut p = TracePrinter {
        out: Vec::new(),
        format,
        start_ns: 1_000_000_000,
        max_events: None,
        printed: 0,
        tasks: TaskInfo::new(None),
        stacks: None,
        places: netprobe_cli::sinks::places::Places::off(),
    };
    p.header().unwrap();
    for h in hits {
        p.hit(&plan, h);
    }
    // tid 4242 may or may not exist on the machine: the pid column is filtered.
    String::from_utf8(p.out).unwrap()
}

#[test]
fn trace_text_and_json() {
    let pid_filter = vec![
        (r"\b\d+/4242", "[PID]/4242"),
        (r#""pid":(null|\d+)"#, r#""pid":[PID]"#),
        (r"\?/4242", "[PID]/4242"),
    ];
    insta::with_settings!({filters => pid_filter}, {
        insta::assert_snapshot!("trace_text", printed(Format::Text));
        insta::assert_snapshot!("trace_json", printed(Format::Json));
    });
}

#[test]
fn count_and_latency_reports() {
    let (plan, hits) = sample();
    let mut c = Counter::default();
    let mut l = Latency::default();
    for h in hits {
        c.hit(&plan, h.clone());
        l.hit(&plan, h);
    }
    let mut out = Vec::new();
    c.report(&plan, Format::Text, Lost::default(), 1.0, &mut out)
        .unwrap();
    c.report(&plan, Format::Json, Lost::default(), 1.0, &mut out)
        .unwrap();
    c.report(
        &plan,
        Format::Text,
        Lost {
            counted: 7,
            unknown_amount: false,
        },
        1.0,
        &mut out,
    )
    .unwrap();
    l.report(&plan, Format::Text, Lost::default(), &mut out)
        .unwrap();
    l.report(&plan, Format::Json, Lost::default(), &mut out)
        .unwrap();
    insta::assert_snapshot!("count_and_latency", String::from_utf8(out).unwrap());
}

/// The stack printers: a trace line with its frames (named, inlined, unknown in a file and in
/// anonymous memory, cut), text and JSON; a hit without a stack record; and `count --stack`'s
/// report in both formats and folded.
#[test]
fn stack_printers() {
    use netprobe_cli::sinks::stack::{ShownStack, StackCount, StackCountReport, StackCut};
    use netprobe_cli::stacks::FrameName;
    use netprobe_core::symbolize::{Frame, SourceKind};
    let frame = |addr: u64,
                 function: Option<&str>,
                 offset: Option<u64>,
                 image: Option<&str>,
                 source,
                 inlined| Frame {
        address: addr,
        image: image.map(std::path::PathBuf::from),
        file_offset: image.map(|_| FileOffset(addr & 0xffff)),
        function: function.map(str::to_string),
        offset,
        source,
        inlined,
        file: None,
        line: None,
        column: None,
        tier: None,
    };
    let at = |f: Frame, line: u32| Frame {
        file: Some("/srv/app/main.go".into()),
        line: Some(line),
        column: None,
        ..f
    };
    let stack = ShownStack {
        unwound_by: Vec::new(),
        frames: vec![
            at(
                frame(
                    0x4a1234,
                    Some("main.add"),
                    None,
                    Some("/srv/app"),
                    SourceKind::GoPclntab,
                    true,
                ),
                12,
            ),
            at(
                frame(
                    0x4a1234,
                    Some("main.compute"),
                    Some(0x34),
                    Some("/srv/app"),
                    SourceKind::GoPclntab,
                    false,
                ),
                30,
            ),
            frame(
                0x7f00_0001_2345,
                Some("void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)"),
                Some(0x1c),
                Some("/usr/share/dotnet/System.Private.CoreLib.dll"),
                SourceKind::DotnetR2r,
                false,
            ),
            frame(
                0x7f00_0002_0010,
                Some("[Optimized] Program::Main(string[])"),
                Some(0x10),
                None,
                SourceKind::PerfMap,
                false,
            ),
            frame(
                0x7f00_0003_2724,
                None,
                None,
                Some("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                SourceKind::Unknown,
                false,
            ),
            frame(
                0x7f00_0004_0000,
                None,
                None,
                None,
                SourceKind::Unknown,
                false,
            ),
        ],
        cut: Some(StackCut::Depth),
        depth: Some(6),
        missing: false,
        tiers: false,
    };
    let missing = ShownStack {
        missing: true,
        ..ShownStack::default()
    };
    let line = |stack| netprobe_cli::sinks::TraceLine {
        rel_s: 0.5,
        mono_ns: 1_500_000_000,
        pid: Some(42),
        tid: 43,
        comm: "app",
        function: "main.add",
        image: std::path::Path::new("/srv/app"),
        role: Role::Entry,
        args: &[],
        stack: Some(stack),
        place: None,
    };
    let mut out = Vec::new();
    for f in [Format::Text, Format::Json] {
        f.printer().trace_line(&mut out, &line(&stack)).unwrap();
        f.printer().trace_line(&mut out, &line(&missing)).unwrap();
    }
    let name = |n: &str| FrameName::named(n, false, n.starts_with("[unknown]"));
    let probed = FrameName {
        file: Some("/src/p.c".into()),
        line: Some(7),
        ..name("probed")
    };
    let report = StackCountReport {
        stacks: vec![
            StackCount {
                frames: vec![probed.clone(), name("path_b"), name("path_a")],
                count: 3,
                cut: Some(StackCut::Depth),
            },
            StackCount {
                frames: vec![
                    name("probed"),
                    FrameName {
                        inlined: true,
                        ..name("inl;ined")
                    },
                    name("main"),
                    name("[unknown] (libc.so.6+0x2724a)"),
                ],
                count: 2,
                cut: Some(StackCut::KernelLimit),
            },
        ],
        without_stack: 1,
        depth: Some(3),
        lost: Lost::default(),
        elapsed_s: 1.25,
    };
    for f in [Format::Text, Format::Json] {
        f.printer().stack_counts(&mut out, &report).unwrap();
    }
    out.extend_from_slice(report.folded(false).as_bytes());
    out.extend_from_slice(b"-- with --folded-lines:\n");
    out.extend_from_slice(report.folded(true).as_bytes());
    insta::assert_snapshot!("stack_printers", String::from_utf8(out).unwrap());
}

/// `trace --stack --tiers` and `count --stack --tiers`: a .NET frame's tier after its name in
/// text and folded stacks; without `--tiers`, stacks that differ only in a method's tier are one
/// stack of the name (the ReadyToRun and the tier-1 code of one method read the same); JSON
/// keeps the tier as a field either way.
#[test]
fn stack_printers_show_tiers_when_asked() {
    use netprobe_cli::sinks::stack::{ShownStack, StackCount, StackCountReport};
    use netprobe_cli::stacks::FrameName;
    use netprobe_core::dotnet::managed_name::CodeTier;
    use netprobe_core::symbolize::{Frame, SourceKind};
    let replace = "System.String.Replace(string, string)";
    let frame = Frame {
        address: 0x7f00_0002_0010,
        image: None,
        file_offset: None,
        function: Some(replace.into()),
        offset: Some(0x1c),
        source: SourceKind::PerfMap,
        inlined: false,
        file: None,
        line: None,
        column: None,
        tier: Some(CodeTier::Tier1),
    };
    let stack = |tiers| ShownStack {
        frames: vec![frame.clone()],
        tiers,
        ..ShownStack::default()
    };
    fn line(stack: &ShownStack) -> netprobe_cli::sinks::TraceLine<'_> {
        netprobe_cli::sinks::TraceLine {
            rel_s: 0.5,
            mono_ns: 1_500_000_000,
            pid: Some(42),
            tid: 43,
            comm: "app",
            function: "System.String::Replace",
            image: std::path::Path::new("/usr/share/dotnet/System.Private.CoreLib.dll"),
            role: Role::Entry,
            args: &[],
            stack: Some(stack),
            place: None,
        }
    }
    let printed = |format: Format, tiers| {
        let mut out = Vec::new();
        let shown = stack(tiers);
        format
            .printer()
            .trace_line(&mut out, &line(&shown))
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let text = |tiers| printed(Format::Text, tiers);
    assert!(
        text(true).contains("        System.String.Replace(string, string)+0x1c [tier1]\n"),
        "{}",
        text(true)
    );
    assert!(!text(false).contains("[tier1]"), "{}", text(false));
    let json = printed(Format::Json, false);
    assert!(json.contains(r#""tier":"tier1""#), "{json}");

    let at = |tier| FrameName {
        tier: Some(tier),
        ..FrameName::named(replace, false, false)
    };
    let main = FrameName::named("Program.Main(string[])", false, false);
    let report = StackCountReport {
        stacks: vec![
            StackCount {
                frames: vec![at(CodeTier::Tier1), main.clone()],
                count: 7,
                cut: None,
            },
            StackCount {
                frames: vec![at(CodeTier::ReadyToRun), main.clone()],
                count: 3,
                cut: None,
            },
        ],
        ..StackCountReport::default()
    };
    let printed = |r: &StackCountReport| {
        let mut out = Vec::new();
        Format::Text.printer().stack_counts(&mut out, r).unwrap();
        String::from_utf8(out).unwrap()
    };
    let merged = report.clone().with_tiers_merged();
    assert_eq!(
        printed(&merged),
        "  System.String.Replace(string, string)\n  Program.Main(string[])\n    10\n\n"
    );
    assert_eq!(
        merged.folded(false),
        "Program.Main(string[]);System.String.Replace(string, string) 10\n"
    );
    let apart = report.clone().with_tiers_in_names();
    assert_eq!(
        printed(&apart),
        "  System.String.Replace(string, string) [tier1]\n  Program.Main(string[])\n    7\n\n\
         \x20 System.String.Replace(string, string) [ready_to_run]\n  Program.Main(string[])\n    3\n\n"
    );
    assert_eq!(
        apart.folded(false),
        "Program.Main(string[]);System.String.Replace(string, string) [ready_to_run] 3\n\
         Program.Main(string[]);System.String.Replace(string, string) [tier1] 7\n"
    );
    let mut json = Vec::new();
    Format::Json
        .printer()
        .stack_counts(&mut json, &report)
        .unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(r#""tier":"tier1""#) && json.contains(r#""tier":"ready_to_run""#),
        "{json}"
    );
}
