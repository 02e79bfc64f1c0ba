//! End-to-end tests of `--filter`, `--tid` and `--comm` on real uprobes: the kernel tests each
//! hit against the event's `filter` file, so counts equal the matching calls the target made,
//! and the kernel's own counters show the other hits never reached the ring buffer.
//!
//! Targets: `fixtures/c/filtered.c` (`np_value(i % 10)` and `np_name(NAMES[i % 4])` for
//! i = 0..N-1 on the main thread; `np_work` 7 times on thread np-worker-a, 13 times on
//! np-worker-b), the Go sample app's workload (`Add3(i, 10i, 100i)`, `Classify(v)` for
//! v in {-7, 0, 7, 1000}, per round), and the .NET sample app's `String::Replace` (whose
//! string arguments the kernel cannot filter: the refusal is checked).

use fixtures::e2e::{self, err, Need};
use fixtures::live::Waiting;
use fixtures::netprobe;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const TRACEFS: &str = "/sys/kernel/tracing";
/// Calls of the main thread: np_value(i % 10) and np_name(NAMES[i % 4]) for i = 0..N-1.
const N: usize = 100;
const NAMES: [&str; 4] = ["tmp-alpha", "tmp-beta", "log-gamma", "data-delta"];
/// Go workload rounds.
const ROUNDS: i64 = 5;

type R = Result<(), String>;

fn filtered() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        fixtures::CProgram::new("filtered")
            .flags(&["-O2", "-pthread"])
            .build()
    })
    .clone()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The kernel's counters of one netprobe session while it runs: hits of its probes on `file`
/// (`uprobe_profile`, counted before any filter) and events its instance's buffers took
/// (`entries` + `read events` of every `per_cpu/cpuN/stats`; a host-wide session's: one scoped
/// to processes records through perf events and has no instance, `buffered` stays 0).
#[derive(Debug, Default, PartialEq, Eq)]
struct KernelCounts {
    probe_hits: u64,
    buffered: u64,
}

fn kernel_counts(np_pid: u32, target: u32, file: &Path) -> Result<KernelCounts, String> {
    let pidns = std::fs::read_link("/proc/self/ns/pid").map_err(err)?;
    let ino = pidns
        .to_string_lossy()
        .trim_start_matches("pid:[")
        .trim_end_matches(']')
        .to_string();
    let inst = PathBuf::from(format!("{TRACEFS}/instances/netprobe_{ino}_{np_pid}"));
    let mut c = KernelCounts::default();
    let cpus = match std::fs::read_dir(inst.join("per_cpu")) {
        Ok(d) => d.collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("{}: {e}", inst.display())),
    };
    for e in cpus {
        let stats = std::fs::read_to_string(e.map_err(err)?.path().join("stats")).map_err(err)?;
        for line in stats.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if matches!(k.trim(), "entries" | "read events") {
                    c.buffered += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    // `  FILE EVENT HITS` (kernel trace_uprobe.c, probes_profile_seq_show): this test's fixture
    // file is probed by nobody else. With `-p` netprobe names it by the target's
    // `/proc/PID/map_files/` link (the file the kernel maps).
    let profile = std::fs::read_to_string(format!("{TRACEFS}/uprobe_profile")).map_err(err)?;
    let file = file.display().to_string();
    let mapped = format!("/proc/{target}/map_files/");
    for line in profile.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 3 && (f[0] == file || f[0].starts_with(&mapped)) {
            c.probe_hits += f[2].parse::<u64>().unwrap_or(0);
        }
    }
    Ok(c)
}

type Around = (String, String, KernelCounts, Vec<u32>);

/// Runs a host-wide `netprobe ARGS` around one run of `filtered stdin N` (its fixture file is
/// run by nothing else, so the hits are the target's), stopped with SIGINT once the target
/// exits; returns netprobe's stdout, its stderr, and the kernel's counters read after the calls,
/// while the session still runs: its tracefs instance shows what the kernel's filter let into
/// the buffers.
fn around_filtered(args: &[&str]) -> Result<Around, String> {
    around_filtered_in(args, false)
}

/// [`around_filtered`] with `-p PID` (`scoped`): the per-task backend, whose filters are set on
/// the perf events; netprobe ends when the target does.
fn around_filtered_in(args: &[&str], scoped: bool) -> Result<Around, String> {
    // `uprobe_profile` names file and event, not the session: one session on the fixture at a
    // time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bin = filtered();
    let mut target = Waiting::start(Command::new(&bin).args(["stdin", &N.to_string()]))?;
    // "ready PID TID_A TID_B"
    let ids: Vec<u32> = target
        .ready
        .split_whitespace()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let pid = target.pid().to_string();
    let mut full: Vec<String> = args
        .iter()
        .map(|a| a.replace("BIN", &bin.display().to_string()))
        .collect();
    for (i, id) in ids.iter().enumerate().skip(1) {
        let tag = if i == 1 { "TID_A" } else { "TID_B" };
        for a in &mut full {
            *a = a.replace(tag, &id.to_string());
        }
    }
    if scoped {
        full.extend(["-p".into(), pid]);
    }
    full.extend(["--duration".into(), "60s".into()]);
    let (child, stderr) =
        fixtures::live::spawn_until_live(netprobe::command().args(&full), Duration::from_secs(60))?;
    let np_pid = child.id();
    let done = target.go()?;
    if !done.starts_with("done") {
        return Err(format!("target: {done}"));
    }
    let counts = kernel_counts(np_pid, target.pid(), &bin);
    // At EOF the target exits, and so does a session scoped to it; a host-wide one is stopped.
    target.finish();
    if !scoped {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(np_pid as libc::pid_t, libc::SIGINT) };
    }
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    if !out.status.success() {
        return Err(format!(
            "netprobe {full:?} exited with {}: {stderr}",
            out.status
        ));
    }
    Ok((text(&out.stdout), stderr, counts?, ids))
}

/// The count of `function` in `count --json` output (`{"counts":{"FUNCTION":N},...}`).
fn count_of(stdout: &str, function: &str) -> Option<u64> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find_map(|j| {
            j["counts"]
                .as_object()
                .map(|c| c.get(function).and_then(Json::as_u64).unwrap_or(0))
        })
}

/// `count --filter 'arg0 > 5'` counts exactly the 40 calls with 6..=9 of 100; the probe fired
/// 100 times (uprobe_profile) but only 40 events entered the buffer, where the same run without
/// the filter buffers all 100.
fn int_filter_counts_matching_calls_and_the_kernel_drops_the_rest() -> R {
    let spec = "BIN:np_value s32";
    let (out, stderr, filtered_counts, _) =
        around_filtered(&["count", "--json", spec, "--filter", "arg0 > 5"])?;
    let want = (0..N).filter(|i| i % 10 > 5).count() as u64;
    if count_of(&out, "np_value") != Some(want) {
        return Err(format!("expected np_value {want}: {out} {stderr}"));
    }
    if !stderr.contains("kernel filter on 1 event(s): arg0 > 5") {
        return Err(format!("the filter is not reported: {stderr}"));
    }
    let (out, _, unfiltered, _) = around_filtered(&["count", "--json", spec])?;
    if count_of(&out, "np_value") != Some(N as u64) {
        return Err(format!("unfiltered: expected np_value {N}: {out}"));
    }
    let expected = (
        KernelCounts {
            probe_hits: N as u64,
            buffered: want,
        },
        KernelCounts {
            probe_hits: N as u64,
            buffered: N as u64,
        },
    );
    if (filtered_counts, unfiltered) != expected {
        return Err(format!(
            "kernel counters (filtered, unfiltered): expected {expected:?}"
        ));
    }
    // The kernel's precedence is the grammar's (&& above ||), and ! negates its group.
    let (out, stderr, _, _) = around_filtered(&[
        "count",
        "--json",
        spec,
        "--filter",
        "arg0 == 1 || arg0 == 2 && arg0 == 3 || !(arg0 < 9)",
    ])?;
    let want = (0..N).filter(|i| i % 10 == 1 || i % 10 == 9).count() as u64;
    if count_of(&out, "np_value") != Some(want) {
        return Err(format!(
            "precedence: expected np_value {want}: {out} {stderr}"
        ));
    }
    Ok(())
}

/// `==` on a C string passes exactly the calls with that value (trace shows each), `~` globs,
/// and `==` does not glob.
fn string_equality_and_glob_on_a_c_string() -> R {
    let (out, stderr, _, _) = around_filtered(&[
        "trace",
        "--json",
        "BIN:np_name name=string",
        "--filter",
        "name == \"tmp-alpha\"",
    ])?;
    let hits: Vec<Json> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|j: &Json| j["function"] == "np_name")
        .collect();
    if hits.len() != N / 4 || hits.iter().any(|h| h["args"]["name"] != "tmp-alpha") {
        return Err(format!(
            "expected {} tmp-alpha hits: {hits:?} {stderr}",
            N / 4
        ));
    }
    let (out, _, counts, _) = around_filtered(&[
        "count",
        "--json",
        "BIN:np_name name=string",
        "--filter",
        "name ~ \"tmp-*\" && name != \"tmp-beta\" || name == \"data-d*\"",
    ])?;
    // tmp-alpha only: "data-d*" is compared literally by ==.
    if count_of(&out, "np_name") != Some((N / 4) as u64) || counts.buffered != (N / 4) as u64 {
        return Err(format!("glob: {out} {counts:?}"));
    }
    let (out, _, _, _) = around_filtered(&[
        "count",
        "--json",
        "BIN:np_name name=string",
        "--filter",
        "name ~ \"*a\"",
    ])?;
    let want = (0..N).filter(|i| NAMES[i % 4].ends_with('a')).count() as u64;
    if count_of(&out, "np_name") != Some(want) {
        return Err(format!("suffix glob: expected {want}: {out}"));
    }
    Ok(())
}

/// The same filters on a session scoped to the process (`-p`: perf events on its threads, each
/// with the event's filter): the counts are exact, and the kernel saw every call.
fn filters_apply_to_a_session_scoped_to_the_process() -> R {
    let (out, stderr, counts, _) = around_filtered_in(
        &[
            "count",
            "--json",
            "BIN:np_value s32",
            "--filter",
            "arg0 > 5",
        ],
        true,
    )?;
    let want = (0..N).filter(|i| i % 10 > 5).count() as u64;
    if count_of(&out, "np_value") != Some(want) || counts.probe_hits != N as u64 {
        return Err(format!(
            "-p --filter: expected {want} of {N}: {out} {counts:?} {stderr}"
        ));
    }
    let (out, stderr, _, _) = around_filtered_in(
        &["count", "--json", "BIN:np_work s32", "--tid", "TID_B"],
        true,
    )?;
    if count_of(&out, "np_work") != Some(13) {
        return Err(format!("-p --tid: {out} {stderr}"));
    }
    // Two probes of one kernel event, counted in the kernel: each probe's counting event tests
    // the user's filter and its own tag.
    let (out, stderr, _, _) = around_filtered_in(
        &[
            "count",
            "--json",
            "BIN:np_[vw]* s32",
            "--filter",
            "arg0 > 1",
        ],
        true,
    )?;
    let value = (0..N).filter(|i| i % 10 > 1).count() as u64;
    if count_of(&out, "np_value") != Some(value) || count_of(&out, "np_work") != Some(13) {
        return Err(format!(
            "-p shared event: expected np_value {value}, np_work 13: {out} {stderr}"
        ));
    }
    let (out, stderr, _, _) = around_filtered_in(
        &[
            "trace",
            "--json",
            "BIN:np_name name=string",
            "--filter",
            "name == \"tmp-alpha\"",
        ],
        true,
    )?;
    let hits = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter(|j| j["function"] == "np_name" && j["args"]["name"] == "tmp-alpha")
        .count();
    if hits != N / 4 {
        return Err(format!("-p string filter: {hits} hits: {out} {stderr}"));
    }
    Ok(())
}

/// Probes of one signature share a kernel event (np_value and np_work: one `s32`): the event's
/// filter tests every probe in it, and each function counts exactly its matching calls.
fn shared_events_filter_every_probe() -> R {
    let (out, stderr, counts, _) = around_filtered(&[
        "count",
        "--json",
        "BIN:np_[vw]* s32",
        "--filter",
        "arg0 > 1",
    ])?;
    let value = (0..N).filter(|i| i % 10 > 1).count() as u64;
    // np_work(1) 7 times, np_work(2) 13 times: 2 > 1.
    if count_of(&out, "np_value") != Some(value)
        || count_of(&out, "np_work") != Some(13)
        || counts.buffered != value + 13
        || counts.probe_hits != N as u64 + 20
    {
        return Err(format!(
            "expected np_value {value}, np_work 13: {out} {counts:?} {stderr}"
        ));
    }
    if !stderr.contains("kernel filter on 1 event(s): arg0 > 1") {
        return Err(format!(
            "the two probes did not share one filtered event: {stderr}"
        ));
    }
    Ok(())
}

/// `--tid` keeps exactly the hits of one thread, `--comm` those of a thread by name, each
/// combined with `--filter` by &&.
fn tid_and_comm_select_one_thread() -> R {
    let spec = "BIN:np_work s32";
    let (out, stderr, counts, ids) = around_filtered(&["count", "--json", spec, "--tid", "TID_B"])?;
    if count_of(&out, "np_work") != Some(13) || counts.buffered != 13 || counts.probe_hits != 20 {
        return Err(format!("--tid {:?}: {out} {counts:?} {stderr}", ids.get(2)));
    }
    let (out, _, counts, _) = around_filtered(&["count", "--json", spec, "--comm", "np-worker-a"])?;
    if count_of(&out, "np_work") != Some(7) || counts.buffered != 7 {
        return Err(format!("--comm: {out} {counts:?}"));
    }
    let (out, stderr, _, _) = around_filtered(&[
        "count",
        "--json",
        spec,
        "--comm",
        "np-worker-a",
        "--filter",
        "arg0 == 2",
    ])?;
    // Worker a passes 1: nothing is both.
    if count_of(&out, "np_work").unwrap_or(0) != 0 {
        return Err(format!("--comm && --filter: {out}"));
    }
    if !stderr.contains("arg0 == 2 && comm == \"np-worker-a\"") {
        return Err(format!("combined filter not reported: {stderr}"));
    }
    Ok(())
}

fn go_bin() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(fixtures::go::sample_app_variants)
        .join("sampleapp-default")
}

/// A Go argument by name: Add3's `b` (10i) and Classify's `v` on the register ABI; a Go string
/// argument is refused with the reason.
fn go_arguments_by_name() -> R {
    let bin = go_bin();
    let b = bin.display();
    let cmd = format!("{b} workload -n {ROUNDS}");
    let out = netprobe::output(&[
        "count",
        "--json",
        "-c",
        &cmd,
        &format!("{b}:main.Add3 a=s64 b=s64 c=s64"),
        "--filter",
        "b >= 20 && c != 300",
    ])?;
    let stdout = text(&out.stdout);
    // b = 10i >= 20: i in 2..5, minus c = 300 (i = 3).
    let want = (0..ROUNDS)
        .filter(|i| 10 * i >= 20 && 100 * i != 300)
        .count() as u64;
    if count_of(&stdout, "main.Add3") != Some(want) {
        return Err(format!(
            "Add3: expected {want}: {stdout} {}",
            text(&out.stderr)
        ));
    }
    let out = netprobe::output(&[
        "count",
        "--json",
        "-c",
        &cmd,
        &format!("{b}:main.Classify v=s64"),
        "--filter",
        "v > 0",
    ])?;
    let stdout = text(&out.stdout);
    if count_of(&stdout, "main.Classify") != Some(2 * ROUNDS as u64) {
        return Err(format!("Classify: {stdout} {}", text(&out.stderr)));
    }
    // Classify's four RETs (one uprobe each, sharing one event) return -1, 0, 1, 2.
    let out = netprobe::output(&[
        "count",
        "--json",
        "-c",
        &cmd,
        &format!("r:{b}:main.Classify s64"),
        "--filter",
        "ret >= 1",
    ])?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    if count_of(&stdout, "main.Classify") != Some(2 * ROUNDS as u64)
        || !stderr.contains("kernel filter on 1 event(s): ret >= 1")
    {
        return Err(format!("Classify returns: {stdout} {stderr}"));
    }
    let out = netprobe::output(&[
        "count",
        "-c",
        &cmd,
        &format!("{b}:main.Greet name=gostring times=s64"),
        "--filter",
        "name == \"netprobe\"",
    ])?;
    let stderr = text(&out.stderr);
    if out.status.success()
        || !stderr.contains("name is a Go string")
        || !stderr.contains("the kernel's event filter compares only NUL-terminated strings")
        || stderr.lines().filter(|l| l.contains("error")).count() != 1
    {
        return Err(format!("Go string filter not refused clearly: {stderr}"));
    }
    Ok(())
}

/// .NET strings are UTF-16 (fetched as u16[64]): the kernel cannot compare them, and netprobe
/// says so before placing anything.
fn dotnet_string_filter_is_refused() -> R {
    let root = fixtures::cache_dir().join("dotnet").join("8");
    let app = fixtures::cache_dir().join("sample-app-dotnet/net8.0/sample-netcore-app.dll");
    let script = fixtures::workspace_root().join("sample-app/dotnet/run.sh");
    let built = Command::new(script)
        .args(["--runtime", "8", "--build-only"])
        .output()
        .map_err(err)?;
    if !built.status.success() {
        return Err(format!("building the sample app: {}", text(&built.stderr)));
    }
    let cmd = format!(
        "{} {} strings --count 1",
        root.join("dotnet").display(),
        app.display()
    );
    let out = netprobe::output(&[
        "trace",
        "--keep-r2r",
        "-c",
        &cmd,
        "System.String::Replace(string,string)",
        "--filter",
        "oldValue == \"needle\"",
    ])?;
    let stderr = text(&out.stderr);
    if out.status.success()
        || !stderr.contains(
            "oldValue is a .NET string, which netprobe reads as UTF-16 characters (u16[64])",
        )
    {
        return Err(format!(".NET string filter not refused clearly: {stderr}"));
    }
    Ok(())
}

/// A filter the kernel refuses comes back with the kernel's own reason, read from the `filter`
/// file it wrote it into; a good one reads back as written.
fn kernel_refusal_is_read_back() -> R {
    use netprobe_cli::backend::tracefs::filter::set_filter;
    use netprobe_cli::backend::tracefs::probe::{EventName, GroupName};
    let bin = filtered();
    let offset =
        netprobe_core::resolve::resolve_file(&bin, "np_value").map_err(err)?[0].file_offset;
    let (group, event) = ("nptest_filters", "refused");
    let events = format!("{TRACEFS}/uprobe_events");
    let append = |line: String| -> R {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&events)
            .map_err(err)?;
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).map_err(err)
    };
    append(format!(
        "p:{group}/{event} {}:{offset} a=%di:s32",
        bin.display()
    ))?;
    let g = GroupName::new(group).map_err(err)?;
    let e = EventName::new(event).map_err(err)?;
    let bad = set_filter(Path::new(TRACEFS), &g, &e, "a >> 5");
    let good = set_filter(Path::new(TRACEFS), &g, &e, "a > 5");
    let _ = set_filter(Path::new(TRACEFS), &g, &e, "0");
    append(format!("-:{group}/{event}"))?;
    let bad = bad.err().map(|e| e.to_string()).unwrap_or_default();
    if !bad.contains(
        "the kernel refused the filter `a >> 5` on nptest_filters:refused: Invalid value (did you forget quotes)?",
    ) {
        return Err(format!("kernel refusal: {bad:?}"));
    }
    good.map_err(err)
}

/// `probe add --filter` writes the filter into the persistent event (what tracefs readers see)
/// and prints the matching `perf record --filter`; a refused filter leaves no probe behind.
fn persistent_probe_gets_the_filter() -> R {
    let bin = filtered();
    let spec = format!("{}:np_value n=s32", bin.display());
    let group = "nptest_filters_persist";
    let out = netprobe::output(&[
        "probe", "add", "--group", group, &spec, "--filter", "n >= 7",
    ])?;
    let stdout = text(&out.stdout);
    let filter = std::fs::read_to_string(format!("{TRACEFS}/events/{group}/np_value_e0/filter"));
    let removed = netprobe::output(&["probe", "remove", "--group", group])?;
    if !out.status.success()
        || filter.as_ref().ok().map(|f| f.trim()) != Some("n >= 7")
        || !stdout.contains(&format!("perf record -e '{group}:*' --filter 'n >= 7' -a"))
        || !removed.status.success()
    {
        return Err(format!(
            "probe add: {stdout} {} filter file {filter:?}",
            text(&out.stderr)
        ));
    }
    let out = netprobe::output(&[
        "probe",
        "add",
        "--group",
        group,
        &spec,
        "--filter",
        "n == \"x\"",
    ])?;
    let left = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
    if out.status.success() || left.contains(group) {
        return Err(format!("refused filter: {} {left}", text(&out.stderr)));
    }
    Ok(())
}

fn main() {
    let c = vec![Need::Root, Need::Tracefs, Need::CCompiler];
    // Build once, before the trials run in threads.
    if e2e::unmet(&c).is_none() {
        filtered();
    }
    let mut go = c.clone();
    go.push(Need::Go);
    let dotnet = vec![
        Need::Root,
        Need::Tracefs,
        Need::Program("mcs"),
        Need::Path(fixtures::cache_dir().join("dotnet/8/dotnet")),
    ];
    e2e::run(vec![
        e2e::trial(
            "int_filter_counts_matching_calls_and_the_kernel_drops_the_rest",
            &c,
            int_filter_counts_matching_calls_and_the_kernel_drops_the_rest,
        ),
        e2e::trial(
            "string_equality_and_glob_on_a_c_string",
            &c,
            string_equality_and_glob_on_a_c_string,
        ),
        e2e::trial(
            "tid_and_comm_select_one_thread",
            &c,
            tid_and_comm_select_one_thread,
        ),
        e2e::trial(
            "persistent_probe_gets_the_filter",
            &c,
            persistent_probe_gets_the_filter,
        ),
        e2e::trial(
            "shared_events_filter_every_probe",
            &c,
            shared_events_filter_every_probe,
        ),
        e2e::trial(
            "filters_apply_to_a_session_scoped_to_the_process",
            &c,
            filters_apply_to_a_session_scoped_to_the_process,
        ),
        e2e::trial("go_arguments_by_name", &go, go_arguments_by_name),
        e2e::trial(
            "kernel_refusal_is_read_back",
            &c,
            kernel_refusal_is_read_back,
        ),
        e2e::trial(
            "dotnet_string_filter_is_refused",
            &dotnet,
            dotnet_string_filter_is_refused,
        ),
    ]);
}
