//! Live tracing of Go code on real uprobes (root, tracefs, Go, a C compiler): every assertion is
//! about real kernel hits on the Go sample app (`sample-app/go`, every build variant).
//!
//! Hit counts equal calls, arguments come back exactly as passed (ints, a string, a receiver's
//! field, past the nine registers of the register ABI), counts equal calls in functions whose
//! stack grows (and a first-byte probe counts more: the double fire the post-prologue probe
//! avoids), RET probes give every return value of a function with four RETs while the program
//! runs to its end, latency pairs every call, a uretprobe kills the program where the RET plan
//! runs clean, a binary in another mount namespace, a mutated entry refused, a tail jump warned
//! of. The toolchain matrix runs the same trace and count checks on the sample app built by Go
//! 1.21 and 1.27, or by each release 1.21..1.27 with `NETPROBE_GO_MATRIX=all`
//! (`fixtures::go::matrix_versions`, `scripts/fetch-go-toolchains.sh`), in five variants.

use fixtures::e2e::{self, err, json_lines, succeeded, text, Need};
use fixtures::live::Waiting;
use fixtures::netprobe;
use fixtures::session::TRACEFS;
use netprobe_core::addr::FileOffset;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Group of the probes these tests write by hand (never netprobe's own `netprobe_*`).
const GROUP: &str = "nptest_golive";

/// Rounds of the Go workload: per round Add3, Greet, Calc.Add once, Classify 4 times, BigFrame
/// once in a new goroutine, Recurse(64) (65 calls) in a new goroutine.
const ROUNDS: i64 = 5;

type R = Result<(), String>;

/// The file offset of `name`'s first byte in `bin` (netprobe's resolver; the offsets themselves
/// are checked against objdump/addr2line/nm by the core's tests).
fn entry_offset(bin: &Path, name: &str) -> Result<FileOffset, String> {
    let t = netprobe_core::resolve::resolve_file(bin, name).map_err(err)?;
    match t.as_slice() {
        [one] => Ok(one.file_offset),
        _ => Err(format!("{name}: {} matches", t.len())),
    }
}

fn workload_cmd(bin: &Path) -> String {
    format!("{} workload -n {ROUNDS}", bin.display())
}

/// The workload's own summary (it prints it after all calls, so the program ran to its end).
fn check_summary(stdout: &str) -> R {
    for want in [
        format!("Classify calls={} sum={}", 4 * ROUNDS, 2 * ROUNDS),
        format!("BigFrame calls={ROUNDS}"),
        format!("Recurse calls={} outer={ROUNDS}", 65 * ROUNDS),
    ] {
        if !stdout.contains(&want) {
            return Err(format!(
                "the workload did not finish (missing {want:?}): {stdout}"
            ));
        }
    }
    Ok(())
}

/// trace: entries of Add3 (three ints), Greet (a string, an int), (*Calc).Add (receiver, its
/// field, an int); the return values of Classify on its four RETs; the program finishes.
fn go_trace_args_and_returns(variant: &str) -> R {
    trace_args_and_returns(&fixtures::go::sample_app(variant), variant)
}

/// [`go_trace_args_and_returns`] on the build `bin` (`variant` names it in messages).
fn trace_args_and_returns(bin: &Path, variant: &str) -> R {
    let b = bin.display();
    let out = succeeded(
        netprobe::output(&[
            "trace",
            "--json",
            "-c",
            &workload_cmd(bin),
            &format!("{b}:main.Add3 a=s64 b=s64 c=s64"),
            &format!("{b}:main.Greet name=gostring times=s64"),
            &format!("{b}:main.(*Calc).Add calc=x64 x=s64 base=+0(%ax):s64"),
            &format!("r:{b}:main.Classify s64"),
        ])?,
        variant,
    )?;
    let stdout = text(&out.stdout);
    check_summary(&stdout)?;
    let stderr = text(&out.stderr);
    if !stderr.contains("probed on each RET instruction") {
        return Err(format!("no explanation of the RET probes: {stderr}"));
    }
    let hits = json_lines(&out.stdout);
    let of = |f: &str| -> Vec<&Json> { hits.iter().filter(|h| h["function"] == f).collect() };
    let (add3, greet, calc, classify) = (
        of("main.Add3"),
        of("main.Greet"),
        of("main.(*Calc).Add"),
        of("main.Classify"),
    );
    if [add3.len(), greet.len(), calc.len()] != [ROUNDS as usize; 3]
        || classify.len() != 4 * ROUNDS as usize
    {
        return Err(format!(
            "{variant}: hits Add3 {} Greet {} Calc.Add {} Classify {} (expected {ROUNDS}, {ROUNDS}, {ROUNDS}, {}): {stderr}",
            add3.len(),
            greet.len(),
            calc.len(),
            classify.len(),
            4 * ROUNDS
        ));
    }
    for i in 0..ROUNDS {
        let a = &add3[i as usize]["args"];
        if a["a"] != i || a["b"] != 10 * i || a["c"] != 100 * i {
            return Err(format!("{variant}: Add3 call {i}: {a}"));
        }
        let g = &greet[i as usize]["args"];
        if g["name"] != "netprobe" || g["times"] != i {
            return Err(format!("{variant}: Greet call {i}: {g}"));
        }
        let c = &calc[i as usize]["args"];
        if c["base"] != 1000 || c["x"] != i || c["calc"] == "0x0" {
            return Err(format!("{variant}: Calc.Add call {i}: {c}"));
        }
        for (k, want) in [-1, 0, 1, 2].iter().enumerate() {
            let r = &classify[(4 * i) as usize + k];
            if r["event"] != "return" || r["retval"] != *want {
                return Err(format!("{variant}: Classify return {k} of round {i}: {r}"));
            }
        }
    }
    Ok(())
}

/// count: the stack of BigFrame's goroutine grows at its prologue on every call, Recurse's stack
/// grows on the way down; probes by name (after the stack check) count the calls exactly, probes
/// at the first byte count more (morestack re-enters the function there).
fn go_counts_with_growing_stacks(variant: &str) -> R {
    counts_with_growing_stacks(&fixtures::go::sample_app(variant), variant)
}

/// [`go_counts_with_growing_stacks`] on the build `bin` (`variant` names it in messages).
fn counts_with_growing_stacks(bin: &Path, variant: &str) -> R {
    let b = bin.display();
    let big = entry_offset(bin, "main.BigFrame")?;
    let rec = entry_offset(bin, "main.Recurse")?;
    let out = succeeded(
        netprobe::output(&[
            "count",
            "--json",
            "-c",
            &workload_cmd(bin),
            &format!("{b}:main.BigFrame"),
            &format!("{b}:main.Recurse"),
            &format!("{b}:main.Add3"),
            &format!("{b}:{big}"),
            &format!("{b}:{rec}"),
        ])?,
        variant,
    )?;
    check_summary(&text(&out.stdout))?;
    let stderr = text(&out.stderr);
    if !stderr.contains("fires twice") {
        return Err(format!(
            "no warning for the first-byte offset probes: {stderr}"
        ));
    }
    let last = json_lines(&out.stdout).pop().ok_or("no count output")?;
    let counts = &last["counts"];
    let n = |k: &str| counts[k].as_i64().unwrap_or(-1);
    let file = bin.file_name().unwrap().to_string_lossy().into_owned();
    let (first_big, first_rec) = (n(&format!("{file}+{big}")), n(&format!("{file}+{rec}")));
    if n("main.BigFrame") != ROUNDS
        || n("main.Recurse") != 65 * ROUNDS
        || n("main.Add3") != ROUNDS
        || last["complete"] != true
    {
        return Err(format!("{variant}: counts by name {last}"));
    }
    // BigFrame's 64 KiB frame never fits a new goroutine's stack: every call enters at least
    // twice (a third time when a preemption request, `stackPreempt` in `runtime/stack.go`, makes
    // the same prologue check fail once more; seen about once in five runs).
    if first_big < 2 * ROUNDS || first_rec <= 65 * ROUNDS {
        return Err(format!(
            "{variant}: first-byte counts BigFrame {first_big} Recurse {first_rec}: the double fire should show there ({last})"
        ));
    }
    Ok(())
}

/// latency: entries and RET probes paired by goroutine (r14) for every call.
fn go_latency_pairs_every_call(variant: &str) -> R {
    let bin = fixtures::go::sample_app(variant);
    let b = bin.display();
    let out = succeeded(
        netprobe::output(&[
            "latency",
            "--json",
            "-c",
            &workload_cmd(&bin),
            &format!("{b}:main.Classify"),
            &format!("{b}:main.Recurse"),
            &format!("{b}:main.BigFrame"),
            &format!("{b}:main.Greet"),
        ])?,
        variant,
    )?;
    check_summary(&text(&out.stdout))?;
    let lines = json_lines(&out.stdout);
    for (f, calls) in [
        ("main.Classify", 4 * ROUNDS),
        ("main.Recurse", 65 * ROUNDS),
        ("main.BigFrame", ROUNDS),
        ("main.Greet", ROUNDS),
    ] {
        let l = lines
            .iter()
            .find(|l| l["function"] == f)
            .ok_or(format!("{variant}: no latency for {f}"))?;
        if l["count"] != calls || l["complete"] != true {
            return Err(format!(
                "{variant}: {f}: {l} (expected {calls} paired calls)"
            ));
        }
    }
    Ok(())
}

/// With --force-uretprobe on a function whose stack grows the Go runtime kills the program; the
/// default plan (RET probes) on the same function lets it finish.
fn go_uretprobe_kills_ret_probes_do_not(variant: &str) -> R {
    let bin = fixtures::go::sample_app(variant);
    let b = bin.display();
    for f in ["main.Recurse", "main.BigFrame"] {
        let forced = netprobe::output(&[
            "latency",
            "--force-uretprobe",
            "-c",
            &workload_cmd(&bin),
            &format!("{b}:{f}"),
        ])?;
        let stderr = text(&forced.stderr);
        if !stderr.contains("WARNING: --force-uretprobe") {
            return Err(format!("{variant} {f}: no loud warning: {stderr}"));
        }
        let died = stderr.contains("unexpected return pc") || stderr.contains("unknown caller pc");
        if !died || check_summary(&text(&forced.stdout)).is_ok() {
            return Err(format!(
                "{variant} {f}: with a uretprobe the program should have died (unexpected return pc): {stderr}"
            ));
        }
        let clean = succeeded(
            netprobe::output(&["latency", "-c", &workload_cmd(&bin), &format!("{b}:{f}")])?,
            variant,
        )?;
        check_summary(&text(&clean.stdout))?;
        if text(&clean.stderr).contains("unexpected return pc") {
            return Err(format!("{variant} {f}: RET probes crashed it"));
        }
    }
    Ok(())
}

/// A Go program in another mount namespace (as in a container): its binary is only reachable
/// through /proc/PID/root, and the probes placed there hit.
fn go_in_other_mount_namespace() -> R {
    let bin = fixtures::go::sample_app("sampleapp-stripped-pie");
    let dir = tempfile::tempdir().map_err(err)?;
    let d = dir.path().display();
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs nptest_golive {d} && cp {} {d}/hidden-go && exec {d}/hidden-go workload -n {ROUNDS} -wait",
            bin.display()
        ));
    let mut w = Waiting::start(&mut cmd)?;
    let pid = w.pid().to_string();
    if Path::new(&format!("{d}/hidden-go")).exists() {
        return Err("the tmpfs is visible outside the namespace: test is void".into());
    }
    let np = netprobe::Running::start(&[
        "count",
        "--json",
        "-p",
        &pid,
        "hidden-go:main.Recurse",
        "hidden-go:main.Add3",
    ])?;
    let first = w.go()?;
    let rest = w.finish();
    check_summary(&format!("{first}{rest}"))?;
    let (stdout, stderr) = np.wait()?;
    let last = json_lines(stdout.as_bytes()).pop().ok_or("no output")?;
    if last["counts"]["main.Recurse"] != 65 * ROUNDS || last["counts"]["main.Add3"] != ROUNDS {
        return Err(format!("{last}: {stderr}"));
    }
    Ok(())
}

/// `fixtures/go/stackargs` built once per source and `go version` (like the sample app's builds).
fn go_stackargs_bin() -> Result<PathBuf, String> {
    fixtures::go::go_fixture("stackargs")
}

/// Go's register ABI passes nine integer arguments in registers and stack-assigns the tenth
/// (`abi-internal.md`; `go tool objdump` shows `MOVQ 0x8(SP), DX` in `main.Ten`): every call of
/// `Ten` (no prologue: probe at the first byte) and of `TenFramed` (probe after its stack check,
/// before `SUBQ $.., SP`) hits once with all ten values passed.
fn go_arguments_past_nine_registers() -> R {
    const CALLS: i64 = 17;
    let bin = go_stackargs_bin()?;
    let mut w = Waiting::start(Command::new(&bin).arg(CALLS.to_string()))?;
    let pid = w.pid().to_string();
    let args = "a=s64 b=s64 c=s64 d=s64 e=s64 f=s64 g=s64 h=s64 i=s64 j=s64";
    let np = netprobe::Running::start(&[
        "trace",
        "--json",
        "-p",
        &pid,
        &format!("main.Ten {args}"),
        &format!("main.TenFramed {args}"),
    ])?;
    w.go()?;
    w.finish();
    let (stdout, stderr) = np.wait()?;
    let hits = json_lines(stdout.as_bytes());
    let want: Vec<Vec<i64>> = (1..=CALLS)
        .map(|i| (1..=10).map(|k| k * i).collect())
        .collect();
    for f in ["main.Ten", "main.TenFramed"] {
        let got: Vec<Vec<i64>> = hits
            .iter()
            .filter(|h| h["event"] == "entry" && h["function"] == f)
            .map(|h| {
                ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
                    .iter()
                    .map(|k| h["args"][*k].as_i64().unwrap_or(i64::MIN))
                    .collect()
            })
            .collect();
        if got != want {
            return Err(format!("{f}: got {got:?}; {stderr}"));
        }
    }
    Ok(())
}

/// A real function that returns through a tail jump (`runtime.memequal` ends in
/// `JMP memeqbody`): netprobe warns, naming the jump's address, which `go tool objdump` shows as a
/// JMP to another function; its one RET still gets a probe.
fn go_tail_jump_warning() -> R {
    let bin = fixtures::go::sample_app("sampleapp-default");
    let b = bin.display().to_string();
    let out = succeeded(
        netprobe::output(&["trace", "--dry-run", &format!("r:{b}:runtime.memequal s64")])?,
        "dry-run",
    )?;
    let stderr = text(&out.stderr);
    let at = stderr
        .split("tail jump(s) (at ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .ok_or(format!("no tail-jump warning: {stderr}"))?
        .to_string();
    let dis = Command::new("go")
        .args(["tool", "objdump", "-s", "^runtime.memequal$", &b])
        .output()
        .map_err(err)?;
    let dis = text(&dis.stdout);
    let line = dis
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(at.as_str()))
        .ok_or(format!("objdump has no instruction at {at}: {dis}"))?;
    if !line.contains("JMP") || line.contains("runtime.memequal(SB)") || line.contains("JMP 0x") {
        return Err(format!("{at} is not a jump out of the function: {line}"));
    }
    let rets = dis.lines().filter(|l| l.contains("\tRET")).count();
    let probes = text(&out.stdout)
        .lines()
        // `echo 'LINE'`, or `printf '%s\n' 'LINE'` for a line with a backslash (`np_id=\N`).
        .filter(|l| {
            (l.starts_with("echo 'p:") || l.starts_with("printf '%s\\n' 'p:")) && l.contains("_r")
        })
        .count();
    if rets == 0 || probes != rets {
        return Err(format!("{rets} RETs, {probes} return probes"));
    }
    Ok(())
}

/// A mutated copy of the Go sample whose pclntab puts `main.Classify`'s entry one byte into its
/// first instruction (both places the table states it,
/// `netprobe_core::golang::Pclntab::entry_fields`): `count`, `trace`, `latency` and `probe add`
/// refuse every probe netprobe would plan from it with one line naming the function, exit 1,
/// never start the command, and leave nothing in `uprobe_events`; `--dry-run` marks the probes.
fn go_mutated_entry_refused() -> R {
    use netprobe_core::golang::GoBinary;
    let dir = tempfile::tempdir().map_err(err)?;
    let copy = dir.path().join("sampleapp-mutated");
    let mut bytes = std::fs::read(fixtures::go::sample_app("sampleapp-default")).map_err(err)?;
    let (fields, size, entry) = {
        let go = GoBinary::parse(&copy, &bytes)
            .map_err(err)?
            .ok_or("not Go")?;
        let (i, f) = go
            .functions()
            .enumerate()
            .find(|(_, f)| f.name == "main.Classify")
            .ok_or("no main.Classify")?;
        let first =
            netprobe_core::arch::x86_64::instructions(go.code(&f).ok_or("no code")?, f.entry)
                .next()
                .ok_or("no instruction")?;
        if first.len() < 2 {
            return Err(format!(
                "main.Classify starts with {first}, a 1-byte instruction"
            ));
        }
        let (fields, size) = go.pclntab().entry_fields(i as u64).ok_or("no fields")?;
        let table = go.pclntab_location().file_offset.0;
        (fields.map(|f| (table + f) as usize), size, f.entry.0)
    };
    for at in fields {
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&bytes[at..at + size]);
        let moved = u64::from_le_bytes(v) + 1;
        bytes[at..at + size].copy_from_slice(&moved.to_le_bytes()[..size]);
    }
    std::fs::write(&copy, &bytes).map_err(err)?;
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(err)?;
    let moved = GoBinary::parse(&copy, &bytes).map_err(err)?.and_then(|g| {
        g.functions_named("main.Classify")
            .first()
            .map(|f| f.entry.0)
    });
    if moved != Some(entry + 1) {
        return Err(format!(
            "mutation did not move the entry: {moved:?} vs {entry:#x}"
        ));
    }
    let path = copy.display().to_string();
    let spec = format!("{path}:main.Classify");
    let cmd = workload_cmd(&copy);
    for args in [
        vec!["count", "-c", &cmd, &spec],
        vec!["trace", "-c", &cmd, &spec],
        vec!["latency", "-c", &cmd, &spec],
        vec!["probe", "add", "--group", GROUP, &spec],
        vec!["trace", "--dry-run", &spec],
    ] {
        let out = netprobe::output(&args)?;
        let stderr = text(&out.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("netprobe: error"))
            .collect();
        if out.status.code() != Some(1)
            || errors.len() != 1
            || !errors[0].contains(&format!("refusing the probe on main.Classify at {path}:0x"))
            || !errors[0].contains("tables disagree with its code")
            || text(&out.stdout).contains("Classify calls=")
        {
            return Err(format!("{args:?}: {:?}\n{stderr}", out.status));
        }
        if args.contains(&"--dry-run")
            && !text(&out.stdout).contains("# REFUSED: echo 'p:")
            && !text(&out.stdout).contains("# REFUSED: printf '%s\\n' 'p:")
        {
            return Err(format!("dry-run: {}", text(&out.stdout)));
        }
        let events = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
        if events.contains(&path) {
            return Err(format!("{args:?} left probes: {events}"));
        }
    }
    Ok(())
}

fn main() {
    let go = e2e::live(&[Need::Go, Need::CCompiler]);
    if e2e::unmet(&[Need::Go, Need::CCompiler]).is_none() {
        fixtures::go::sample_app("sampleapp-default");
    }
    let mut trials = Vec::new();
    for variant in fixtures::go::SAMPLE_VARIANTS {
        trials.push(e2e::trial(
            &format!("go_trace_args_and_returns::{variant}"),
            &go,
            move || go_trace_args_and_returns(variant),
        ));
        trials.push(e2e::trial(
            &format!("go_counts_with_growing_stacks::{variant}"),
            &go,
            move || go_counts_with_growing_stacks(variant),
        ));
        trials.push(e2e::trial(
            &format!("go_latency_pairs_every_call::{variant}"),
            &go,
            move || go_latency_pairs_every_call(variant),
        ));
    }
    // The Go toolchain matrix: the sample app built by each fetched Go release (1.21 to the
    // newest) in the matrix variants; entries after the prologue count exactly, arguments and
    // the four RET return values of every call come back, on real kernel hits.
    for version in fixtures::go::matrix_versions() {
        let need = e2e::live(&[
            Need::Path(fixtures::go::toolchain_go(version)),
            Need::CCompiler,
        ]);
        for variant in fixtures::go::MATRIX_VARIANTS {
            trials.push(e2e::trial(
                &format!("go_toolchain_matrix_live::{version}::{variant}"),
                &need,
                move || {
                    let bin = fixtures::go::sample_app_variants_by(version).join(variant);
                    let label = format!("go{version} {variant}");
                    trace_args_and_returns(&bin, &label)?;
                    counts_with_growing_stacks(&bin, &label)
                },
            ));
        }
    }
    for variant in ["sampleapp-default", "sampleapp-extlink-pie"] {
        trials.push(e2e::trial(
            &format!("go_uretprobe_kills_ret_probes_do_not::{variant}"),
            &go,
            move || go_uretprobe_kills_ret_probes_do_not(variant),
        ));
    }
    trials.extend([
        e2e::trial(
            "go_in_other_mount_namespace",
            &e2e::live(&[Need::Go, Need::CCompiler, Need::Program("unshare")]),
            go_in_other_mount_namespace,
        ),
        e2e::trial(
            "go_arguments_past_nine_registers",
            &e2e::live(&[Need::Go]),
            go_arguments_past_nine_registers,
        ),
        e2e::trial("go_mutated_entry_refused", &go, go_mutated_entry_refused),
        e2e::trial(
            "go_tail_jump_warning",
            &[Need::Go, Need::CCompiler],
            go_tail_jump_warning,
        ),
    ]);
    e2e::run(trials);
}
