//! `--filter`, `--tid`, `--comm` and `--container` on the command line, before anything is
//! placed (`--dry-run` or an early refusal; no root needed): bad filters are one-line errors
//! with exit status 1 that say what is wrong and how to write it, and `--dry-run` shows the
//! kernel filter text netprobe would write.

use fixtures::netprobe;
use fixtures::CProgram;

fn target() -> String {
    CProgram::new("filtered")
        .flags(&["-O2", "-pthread"])
        .build()
        .display()
        .to_string()
}

/// Runs netprobe expecting failure; returns stderr, checked to be one line without a panic.
fn fails(args: &[&str]) -> String {
    let out = netprobe::command().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} should exit 1: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err}");
    assert!(err.starts_with("netprobe: error: "), "{err}");
    err
}

#[test]
fn bad_filters_are_one_line_errors_that_say_why() {
    let bin = target();
    let value = format!("{bin}:np_value s32");
    let name = format!("{bin}:np_name name=string");
    for (spec, filter, want) in [
        (
            &value,
            "arg0 >",
            "expected a name, number or string, found the end at column 7",
        ),
        (&value, "arg0 => 5", "unexpected '='"),
        (&value, "(arg0 > 5", "missing ')'"),
        (&value, "arg0 > 5 b", "unexpected name b"),
        (
            &value,
            "n > 5",
            "--filter names n, which is no argument of np_value; its values: arg0 (s32)",
        ),
        (
            &value,
            "arg0 == \"5\"",
            "arg0 is a number; compare it with a number",
        ),
        (
            &value,
            "arg0 > 3000000000",
            "arg0 is s32 (-2147483648..=2147483647), so 3000000000 can never be its value",
        ),
        (&value, "arg0 == arg0", "compares two values"),
        (&value, "arg0 ~ \"5*\"", "~ (glob) matches strings"),
        (
            &name,
            "name > \"a\"",
            "strings compare with ==, != and ~ (glob) only",
        ),
        (
            &name,
            "name == 5",
            "name is a string; compare it with a quoted string",
        ),
        (&name, "name == \"a'\\\"\"", "holds both quote characters"),
    ] {
        let err = fails(&["count", "--dry-run", spec, "--filter", filter]);
        assert!(err.contains(want), "--filter {filter:?}: {err}");
    }
    let err = fails(&[
        "count",
        "--dry-run",
        &format!("{bin}:np_value"),
        "--filter",
        "arg0 > 5",
    ]);
    assert!(
        err.contains("netprobe reads no arguments of np_value: declare them in the probe spec"),
        "{err}"
    );
    let err = fails(&[
        "trace",
        "--dry-run",
        &value,
        "--comm",
        "a-name-longer-than-15",
    ]);
    assert!(err.contains("at most 15 bytes (TASK_COMM_LEN)"), "{err}");
}

#[test]
fn dry_run_shows_the_kernel_filter_per_event() {
    let bin = target();
    let out = netprobe::command()
        .args([
            "trace",
            "--dry-run",
            &format!("{bin}:np_name name=string"),
            &format!("r:{bin}:np_name u64"),
            "--filter",
            "name ~ \"tmp*\" && !(name == 'tmp-beta')",
            "--tid",
            "42",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(
            "echo 'name ~ \"tmp*\" && !(name == \"tmp-beta\") && common_pid == 42' > /sys/kernel/tracing/instances/"
        ),
        "{stdout}"
    );
    // The return probe reads ret only: it keeps the --tid part, and the note says so.
    assert!(
        stderr.contains("--filter names only entry arguments of np_name"),
        "{stderr}"
    );
}

#[test]
fn container_errors_need_no_engine_to_be_clear() {
    let out = netprobe::command()
        .args(["count", "--container", "web", "main.Add3"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--container web: no Docker socket at /nonexistent/docker.sock"),
        "{err}"
    );
    let err = fails(&["count", "--container", "../etc", "main.Add3"]);
    assert!(
        err.contains("a container name has letters, digits"),
        "{err}"
    );
    let err = fails(&[
        "count",
        "--container",
        "web",
        "-c",
        "/bin/true",
        "main.Add3",
    ]);
    assert!(
        err.contains("use either -p/--container or -c, not both"),
        "{err}"
    );
}
