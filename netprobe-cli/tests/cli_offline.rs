//! The CLI on files and recorded maps (no root needed): output formats and error messages.

use fixtures::netprobe;
use fixtures::{recorded, CProgram};
use std::path::PathBuf;

fn offsets_program() -> PathBuf {
    CProgram::new("offsets")
        .flags(&["-O1", "-no-pie", "-Wl,--section-start=.farcode=0x800000"])
        .build()
}

/// Runs netprobe expecting failure; returns stderr, checked to be one line without a panic.
fn fails(args: &[&str]) -> String {
    let out = netprobe::command().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} should exit 1");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err}");
    assert!(err.starts_with("netprobe: error: "), "{err}");
    err
}

#[test]
fn offsets_reproduces_calc_offsets_listing_line_for_line() {
    let out = netprobe::command()
        .args(["offsets", "112", "sample-netcore-app.ni.exe", "--maps"])
        .arg(recorded("maps/dotnet22-crossgen-sample-netcore-app.maps"))
        .arg("--map")
        .arg(recorded(
            "mapfiles/crossgen-sample-netcore-app-reconstructed.map",
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    let expected =
        std::fs::read_to_string(recorded("mapfiles/calc-offsets-listing.expected")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
}

#[test]
fn offsets_pattern_selects_type_method_without_signature() {
    let out = netprobe::command()
        .args([
            "offsets",
            "112",
            "sample-netcore-app.ni.exe",
            "EchoProvider::calculateEchoValue",
            "--maps",
        ])
        .arg(recorded("maps/dotnet22-crossgen-sample-netcore-app.maps"))
        .arg("--map")
        .arg(recorded(
            "mapfiles/crossgen-sample-netcore-app-reconstructed.map",
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "offset: 1900 : instance string [sample-netcore-app] sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)\n"
    );
}

#[test]
fn offsets_explain_on_net8_names_the_shared_mapping_trap() {
    let out = netprobe::command()
        .args([
            "offsets",
            "1",
            "System.Private.CoreLib.dll",
            "--explain",
            "--json",
            "--maps",
        ])
        .arg(recorded("maps/net8-sleep.maps"))
        .arg("--map")
        .arg(recorded("mapfiles/crossgen-calculate-echo-value.map"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str::<serde_json::Value>(stdout.trim()).expect("stdout is JSON only");
    insta::assert_snapshot!(format!(
        "stderr:\n{}stdout:\n{stdout}",
        String::from_utf8(out.stderr).unwrap()
    ));
}

#[test]
fn symbols_table_and_json() {
    let bin = offsets_program();
    let out = netprobe::command()
        .arg("symbols")
        .arg(&bin)
        .arg("np_*")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[HEX]"), (r" +[0-9]+ ", " [SIZE] ")]}, {
        insta::assert_snapshot!(text);
    });
    let out = netprobe::command()
        .arg("symbols")
        .arg(&bin)
        .arg("np_far_function")
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], "np_far_function");
    assert_eq!(v["address"]["value"], "0x800000");
    assert_eq!(v["file_offset"], "0x4000");
    assert_eq!(v["kind"], "function");
}

/// `netprobe symbols ... | head`: a reader that stops early ends netprobe quietly with success,
/// in the table and in JSON Lines (serde_json wraps the write error, which hid the broken pipe).
#[test]
fn reader_closing_the_pipe_ends_quietly() {
    use std::io::BufRead;
    // netprobe's own symbol table lists far more than a pipe and the output buffer hold.
    let own = netprobe::bin();
    for json in [false, true] {
        let mut cmd = std::process::Command::new(own);
        cmd.arg("symbols").arg(own);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "json={json}: {:?} {err}", out.status);
        assert!(err.is_empty(), "json={json}: {err}");
    }
}

#[test]
fn errors_are_one_line_with_cause_and_fix() {
    let bin = offsets_program();
    let bin = bin.to_str().unwrap();
    let e = fails(&["symbols", bin, "np_text_ad"]);
    assert!(
        e.contains("no function matches 'np_text_ad'") && e.contains("nearest: np_text_add"),
        "{e}"
    );
    let e = fails(&["symbols", "/etc/hostname"]);
    assert!(e.contains("is not an ELF or PE file"), "{e}");
    let e = fails(&["symbols", "/nonexistent/x"]);
    assert!(e.contains("/nonexistent/x"), "{e}");
    let e = fails(&["symbols", bin, "foo["]);
    assert!(e.contains("unclosed '['"), "{e}");
    let e = fails(&["symbols", bin, "--files"]);
    assert!(e.contains("is not a .NET single-file bundle"), "{e}");
    // pid_max is at most 2^22: this pid never exists.
    let e = fails(&["offsets", "4999999", "libc.so.6"]);
    assert!(e.contains("no process with pid 4999999"), "{e}");
    let e = fails(&[
        "offsets",
        "1",
        "System.Privat.CoreLib.dll",
        "--maps",
        recorded("maps/net8-sleep.maps").to_str().unwrap(),
    ]);
    assert!(
        e.contains("is not mapped in process 1") && e.contains("System.Private.CoreLib.dll"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &std::fs::read(bin).unwrap()[..100]).unwrap();
    let e = fails(&["symbols", truncated.to_str().unwrap()]);
    assert!(e.contains("truncated or corrupt"), "{e}");
    // Host-wide, a bare library name is no file: the fix names both ways to say which.
    let e = fails(&["count", "--dry-run", "libc.so.6:malloc"]);
    assert!(
        e.contains("'libc.so.6' is no file here: without -p, IMAGE is a path")
            && e.contains("with -p PID"),
        "{e}"
    );
}

/// The live path: this test's own process maps libc; `offsets` places libc's functions.
#[test]
fn offsets_live_on_own_process_libc() {
    let pid = std::process::id().to_string();
    let out = netprobe::command()
        .args(["offsets", &pid, "c", "malloc"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("offset: ") && text.contains(" : malloc"),
        "{text}"
    );
}

/// An IL-only assembly is mapped read-only by .NET 8 (recorded): nothing of it is code.
#[test]
fn image_without_executable_mapping() {
    let e = fails(&[
        "offsets",
        "1",
        "sleep.dll",
        "--maps",
        recorded("maps/net8-sleep.maps").to_str().unwrap(),
    ]);
    assert!(e.contains("has no executable mapping in process 1"), "{e}");
}

/// Reading another user's process maps needs ptrace access: as root, drop to nobody first.
#[test]
fn permission_denied_names_the_fix() {
    let np = netprobe::bin();
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    let mut cmd = if is_root {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(np);
        c
    } else {
        std::process::Command::new(np)
    };
    let out = cmd.args(["offsets", "1", "libc.so.6"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("permission denied reading /proc/1/maps")
            && err.contains("run netprobe as root"),
        "{err}"
    );
}

/// A function the compiler put in `.data` has no file offset: `symbols` says why (a footnote in
/// the table, `no_file_offset` in JSON), probing it by name says why, and its raw file offset is
/// refused by the probe-safety gate (not executable code) unless `--unsafe-offset`, which
/// `--dry-run` shows with a warning.
#[test]
fn function_without_file_offset_says_why() {
    use netprobe_core::addr::VirtAddr;
    let bin = CProgram::new("code_in_data").flags(&["-O1"]).build();
    let path = bin.to_str().unwrap();
    let out = netprobe::command()
        .args(["symbols", path, "np_in_data"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text.lines().find(|l| l.ends_with("np_in_data")).unwrap();
    assert!(row.contains(" -[1] "), "{text}");
    assert!(
        text.contains("[1] no file offset: address 0x")
            && text.contains("lies in a segment that is not executable (data)"),
        "{text}"
    );
    let out = netprobe::command()
        .args(["symbols", path, "np_in_data", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["file_offset"], serde_json::Value::Null);
    assert!(v["no_file_offset"]
        .as_str()
        .unwrap()
        .ends_with("lies in a segment that is not executable (data)"));
    let e = fails(&["trace", "--dry-run", &format!("{path}:np_in_data")]);
    assert!(
        e.contains("np_in_data in ")
            && e.contains("has no file offset (address 0x")
            && e.contains("not executable (data)"),
        "{e}"
    );
    // The same in a running process (-p): its mapped file is read the same way.
    let mut child = std::process::Command::new(&bin).arg("20").spawn().unwrap();
    let pid = child.id().to_string();
    let e = fails(&["count", "--dry-run", "-p", &pid, "np_in_data"]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        e.contains("np_in_data in ") && e.contains("has no file offset (address 0x"),
        "{e}"
    );
    // Its bytes, by raw file offset: refused, or placed with a warning under --unsafe-offset.
    let vaddr = u64::from_str_radix(
        v["address"]["value"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let off = netprobe_core::elf::ElfFile::open(&bin)
        .unwrap()
        .segments()
        .unwrap()
        .file_offset(VirtAddr(vaddr))
        .unwrap();
    let raw = format!("{path}:{off}");
    let name = bin.file_name().unwrap().to_str().unwrap();
    let e = fails(&["trace", "--dry-run", &raw]);
    assert!(
        e.contains(&format!("refusing the probe on {name}+{off} at {raw}"))
            && e.contains("lies in no executable segment")
            && e.contains("--unsafe-offset places it anyway"),
        "{e}"
    );
    let out = netprobe::command()
        .args(["trace", "--dry-run", "--unsafe-offset", &raw])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: --unsafe-offset: placing the probe on {name}+"
        )),
        "{stderr}"
    );
    assert!(String::from_utf8(out.stdout).unwrap().contains("echo 'p:"));
}

/// The `NETPROBE_PARSE_STATS` lines of a run: (image, counters), every counter a number.
fn parse_stats(stderr: &str) -> Vec<(String, Vec<(String, u64)>)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("netprobe: parse stats: "))
        .map(|l| {
            let mut words = l.split(' ');
            let image = words.next().unwrap().to_string();
            let counts = words
                .map(|w| {
                    let (k, v) = w.split_once('=').unwrap();
                    (k.to_string(), v.parse().unwrap())
                })
                .collect();
            (image, counts)
        })
        .collect()
}

/// `dev:ino` of `path`, as the parse-stats lines name images.
fn image_id(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    format!("{}:{}", m.dev(), m.ino())
}

/// One run of netprobe resolves, plans and checks each probe (`--dry-run` walks all of it but
/// the kernel) and opens and parses every image it reads once: a C program by path and in a
/// running process (`-p`: every mapped file is searched), a Go binary, .NET CoreLib by path and
/// in a running .NET 8 process.
#[test]
fn each_image_is_opened_and_parsed_once_per_run() {
    let check = |args: &[&str], must_see: &std::path::Path| {
        let out = netprobe::command()
            .args(args)
            .env("NETPROBE_PARSE_STATS", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{args:?}: {stderr}");
        let stats = parse_stats(&stderr);
        let id = image_id(must_see);
        assert!(
            stats.iter().any(|(i, _)| *i == id),
            "{id} not read: {stderr}"
        );
        for (image, counts) in &stats {
            assert!(counts.iter().any(|(k, _)| k == "opens"), "{stderr}");
            for (what, n) in counts {
                assert_eq!(*n, 1, "{image} {what} {n} times in one run: {stderr}");
            }
        }
    };
    let c = CProgram::new("code_in_data").flags(&["-O1"]).build();
    check(
        &["trace", "--dry-run", &format!("{}:main", c.display())],
        &c,
    );
    let mut child = std::process::Command::new(&c).arg("20").spawn().unwrap();
    let pid = child.id().to_string();
    check(&["count", "--dry-run", "-p", &pid, "main"], &c);
    let _ = child.kill();
    let _ = child.wait();

    let cache = std::env::var_os("NETPROBE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/netprobe")
        });
    let go = cache.join("go-binaries/esbuild-0.17.19");
    let corelib =
        cache.join("dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll");
    for needed in [&go, &corelib] {
        assert!(
            needed.exists(),
            "{} is missing: run scripts/install-prereqs.sh (it fetches it)",
            needed.display()
        );
    }
    check(
        &["trace", "--dry-run", &format!("{}:main.main", go.display())],
        &go,
    );
    check(
        &[
            "trace",
            "--dry-run",
            &format!(
                "{}:System.Threading.Thread::Sleep(int32)",
                corelib.display()
            ),
        ],
        &corelib,
    );
    // A running .NET 8 process: every mapped image is searched; among them the 2 TiB sparse
    // memfd .NET 8 maps its JIT code from, which must not push CoreLib out of the cache.
    let run_sh = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sample-app/dotnet/run.sh");
    let built = std::process::Command::new(&run_sh)
        .arg("--build-only")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let dll = String::from_utf8(built.stdout).unwrap().trim().to_string();
    let mut app = std::process::Command::new(cache.join("dotnet/8/dotnet"))
        .args([dll.as_str(), "sleep", "--ms", "200", "--count", "100"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // CoreLib is mapped once the runtime is up.
    let maps = format!("/proc/{}/maps", app.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&maps)
        .unwrap_or_default()
        .contains("System.Private.CoreLib.dll")
    {
        assert!(std::time::Instant::now() < deadline, "CoreLib never mapped");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = app.id().to_string();
    check(
        &[
            "trace",
            "--dry-run",
            "-p",
            &pid,
            "System.Threading.Thread::Sleep",
        ],
        &corelib,
    );
    let _ = app.kill();
    let _ = app.wait();
}

/// `ps` lists this test process (native, its own comm) and no kernel thread (kthreadd is pid 2);
/// the text table has a header and one row per JSON object.
#[test]
fn ps_lists_user_processes_and_skips_kernel_threads() {
    let out = netprobe::command().args(["ps", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let me = entries
        .iter()
        .find(|e| e["pid"] == std::process::id())
        .expect("the test process is listed");
    assert_eq!(me["kind"], "native", "{me}");
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(me["comm"], comm.trim_end(), "{me}");
    assert!(entries.iter().all(|e| e["pid"] != 2), "kthreadd listed");
    let text = netprobe::command().arg("ps").output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["PID", "CONTAINER", "COMMAND", "KIND", "PROBE"]);
    // Processes come and go between the two runs; the counts stay close.
    assert!(lines.count().abs_diff(entries.len()) < 20);
}

/// The stack flags refuse what does not fit, with one line naming the fix, before anything is
/// placed (no root needed to be told).
#[test]
fn stack_flags_bad_inputs_are_one_line_errors() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["count", "--folded", "x.folded", "/bin/true:main"],
            "add --stack",
        ),
        (
            &["trace", "--stack-depth", "3", "/bin/true:main"],
            "add --stack",
        ),
        (
            &["trace", "--stack", "--stack-depth", "0", "/bin/true:main"],
            "give 1 or more",
        ),
        (
            &["latency", "--stack", "/bin/true:main"],
            "works with trace and count",
        ),
        (
            &["count", "--stack", "--interval", "1s", "/bin/true:main"],
            "drop --interval",
        ),
        (
            &[
                "count",
                "--stack",
                "--json",
                "--folded",
                "-",
                "/bin/true:main",
            ],
            "give --folded a FILE",
        ),
    ];
    for (args, fix) in cases {
        let err = fails(args);
        assert!(err.contains(fix), "{args:?}: {err}");
    }
    // clap's own refusals: exit 2, no panic.
    for args in [
        &["trace", "--folded", "f", "/bin/true:main"][..],
        &["count", "--stack", "--unknown-addrs", "/bin/true:main"][..],
        &["trace", "--tiers", "/bin/true:main"][..],
        &["count", "--tiers", "/bin/true:main"][..],
        &["trace", "--stack", "--stack-depth", "x", "/bin/true:main"][..],
    ] {
        let out = netprobe::command().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}

/// `--metrics` refuses what it cannot serve with one line naming the fix, before anything is
/// placed (no root needed to be told).
#[test]
fn metrics_bad_inputs_are_one_line_errors() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["count", "--metrics", "localhost", "/bin/true:main"],
            "'localhost' is not ADDR:PORT",
        ),
        (
            &["latency", "--metrics", "127.0.0.1:99999", "/bin/true:main"],
            "e.g. 127.0.0.1:9464",
        ),
        (
            &[
                "count",
                "--metrics",
                "127.0.0.1:9464",
                "--stack",
                "/bin/true:main",
            ],
            "drop --stack",
        ),
        (
            &[
                "count",
                "--metrics",
                "127.0.0.1:9464",
                "--metrics-max-series",
                "0",
                "/bin/true:main",
            ],
            "give 1 or more",
        ),
        (
            &[
                "count",
                "--metrics-web-config",
                "/nonexistent/web.yml",
                "/bin/true:main",
            ],
            "add --metrics ADDR:PORT",
        ),
        (
            &[
                "count",
                "--metrics",
                "127.0.0.1:9464",
                "--metrics-web-config",
                "/nonexistent/web.yml",
                "/bin/true:main",
            ],
            "--metrics-web-config /nonexistent/web.yml: cannot read it",
        ),
    ];
    for (args, fix) in cases {
        let err = fails(args);
        assert!(err.contains(fix), "{args:?}: {err}");
    }
    // A web configuration with a key netprobe does not implement is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "basic_auth_users: {}\nrate_limit:\n  burst: 20\n").unwrap();
    let err = fails(&[
        "latency",
        "--metrics",
        "127.0.0.1:9464",
        "--metrics-web-config",
        web.to_str().unwrap(),
        "/bin/true:main",
    ]);
    assert!(
        err.contains("rate_limit: this exporter-toolkit setting is not supported"),
        "{err}"
    );
    // trace has no --metrics: clap refuses it (exit 2), no panic.
    let out = netprobe::command()
        .args(["trace", "--metrics", "127.0.0.1:9464", "/bin/true:main"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// `profile --pprof`/`--svg`/`--folded` into a folder that is missing, or naming a folder, is
/// refused in one line naming the fix before anything is sampled (no root needed), and leaves
/// nothing behind.
#[test]
fn profile_output_files_in_bad_places_are_refused_before_sampling() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-folder/cpu.pb.gz");
    let folder = d.path().to_str().unwrap();
    let cases: [(&str, &str, &str); 3] = [
        ("--pprof", missing.to_str().unwrap(), "create it first"),
        ("--pprof", folder, "is a folder: give a file name in it"),
        ("--svg", missing.to_str().unwrap(), "create it first"),
    ];
    for (flag, path, fix) in cases {
        let out = assert_cmd::Command::new(fixtures::netprobe::bin())
            .args(["profile", "--duration", "1s", "-c", "/bin/true", flag, path])
            .assert()
            .code(1)
            .get_output()
            .clone();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err}");
        assert!(
            err.starts_with(&format!("netprobe: error: {flag} {path}: ")) && err.contains(fix),
            "{flag} {path}: {err}"
        );
        assert!(!err.contains("profiling"), "nothing sampled: {err}");
    }
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "nothing left behind"
    );
}
