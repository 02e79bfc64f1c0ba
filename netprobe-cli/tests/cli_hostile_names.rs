//! What netprobe prints about files and processes others control: a library whose symbol names
//! hold shell metacharacters, newlines and terminal escapes, at a path holding more of them
//! (`fixtures::hostile`). Offline: no root, no tracefs.

use fixtures::hostile::{hostile_names_library, HOSTILE_NAMES};
use fixtures::netprobe;
use std::path::{Path, PathBuf};

/// The hostile library copied to `dir/NAME/libhostile.so`.
fn library_in(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let lib = d.join("libhostile.so");
    std::fs::copy(hostile_names_library(), &lib).unwrap();
    lib
}

/// Stub `perf` and `bpftrace` executables in `dir/bin` that record their arguments,
/// NUL-separated, in `dir/TOOL.args`.
fn stub_tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["perf", "bpftrace"] {
        let log = dir.join(format!("{tool}.args"));
        let stub = bin.join(tool);
        std::fs::write(
            &stub,
            format!("#!/bin/sh\nprintf '%s\\0' \"$@\" >> '{}'\n", log.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The arguments a stub tool was called with, over all its calls.
fn stub_args(dir: &Path, tool: &str) -> Vec<String> {
    let raw = std::fs::read(dir.join(format!("{tool}.args"))).unwrap_or_default();
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8(a.to_vec()).unwrap())
        .collect()
}

/// `--dry-run` prints a shell script. Replayed whole through `sh` (with `perf` and `bpftrace`
/// stubbed and tracefs moved to a temporary folder), no name or path of the library runs as a
/// command: no marker file appears, and each tool receives the path and the probe lines intact.
#[test]
fn dry_run_script_replayed_through_sh_runs_no_name_or_path() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = library_in(tmp.path(), "d'$(touch${IFS}mpath)'`touch${IFS}mtick`;x");
    let lib_text = lib.to_str().unwrap();
    for mode in ["trace", "count", "latency"] {
        let out = netprobe::command()
            .args([mode, "--dry-run", &format!("{lib_text}:*")])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        let script = String::from_utf8(out.stdout).unwrap();
        let run = tmp.path().join(mode);
        let cwd = run.join("cwd");
        let tracefs = run.join("tracefs");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&tracefs).unwrap();
        let bin = stub_tools(&run);
        let replayed = script.replace("/sys/kernel/tracing", tracefs.to_str().unwrap());
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let sh = std::process::Command::new("sh")
            .arg("-c")
            .arg(&replayed)
            .current_dir(&cwd)
            .env("PATH", path)
            .output()
            .unwrap();
        assert!(
            sh.status.success(),
            "{mode}: sh: {}\n{script}",
            String::from_utf8_lossy(&sh.stderr)
        );
        let made: Vec<_> = std::fs::read_dir(&cwd)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            made.is_empty(),
            "{mode}: the replay created {made:?}:\n{script}"
        );
        assert!(
            !tmp.path().join("mpath").exists() && !tmp.path().join("mtick").exists(),
            "{mode}"
        );
        // uprobe_events got the probe lines, each whole, with the path as it is.
        let events = std::fs::read_to_string(tracefs.join("uprobe_events")).unwrap();
        let adds: Vec<&str> = events.lines().filter(|l| !l.starts_with("-:")).collect();
        assert!(adds.len() > HOSTILE_NAMES.len(), "every function: {events}");
        for l in &adds {
            assert!(
                (l.starts_with("p:") || l.starts_with("r:"))
                    && l.contains(&format!(" {lib_text}:0x")),
                "{mode}: {l:?}"
            );
        }
        assert!(events.lines().any(|l| l.starts_with("-:")), "{events}");
        let perf = stub_args(&run, "perf");
        assert!(
            perf.windows(2).any(|w| w[0] == "-x" && w[1] == lib_text),
            "{mode}: {perf:?}"
        );
        // bpftrace gets one program: the path in double quotes (its grammar takes `'`, `$`,
        // backquotes and `;` only so), names it can hold escaped, the others left out saying why.
        let bpf = stub_args(&run, "bpftrace");
        let program = bpf
            .iter()
            .skip_while(|a| *a != "-e")
            .nth(1)
            .unwrap_or_else(|| panic!("{mode}: {bpf:?}"));
        assert!(
            program.contains(&format!("uprobe:\"{lib_text}\":")),
            "{program}"
        );
        assert!(program.contains("np_d\\\"$(touch md)\\\""), "{program}");
        assert!(program.contains("np_q'$(touch mq)'"), "{program}");
        assert!(
            program.contains("left out: the function name \"np_n\\ntouch mn\\n\""),
            "{program}"
        );
        assert!(!program.contains('\u{1b}'), "{program}");
        assert!(
            program
                .lines()
                .filter(|l| l.contains("np_p%s"))
                .all(|l| l.trim_start().starts_with("// ") && l.contains("left out")),
            "{program}"
        );
    }
}

/// `symbols` of a library whose names hold ESC, BEL and newlines: the table shows them as
/// visible escapes, and no control byte but the lines' own newlines reaches the terminal.
#[test]
fn symbols_table_escapes_control_characters_of_names() {
    let lib = hostile_names_library();
    let out = netprobe::command()
        .arg("symbols")
        .arg(&lib)
        .output()
        .unwrap();
    assert!(out.status.success());
    let bad: Vec<u8> = out
        .stdout
        .iter()
        .copied()
        .filter(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
        .collect();
    assert!(bad.is_empty(), "control bytes {bad:x?} in the output");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("  np_e\\x1b]0;t\\x07\\x1b[31m\n"), "{text}");
    assert!(text.contains("  np_n\\x0atouch mn\\x0a\n"), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("touch")),
        "a name's newline started a line:\n{text}"
    );
    // A pattern that matches nothing: the error names the nearest functions, escaped too.
    let out = netprobe::command()
        .arg("symbols")
        .arg(&lib)
        .arg("np_e]0")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("np_e\\x1b]0;t\\x07\\x1b[31m"), "{err}");
    assert!(!err.contains(['\u{1b}', '\u{7}']), "{err:?}");
}

/// The one-line error of `MODE --dry-run` on `np_plain` of the hostile library copied into a
/// folder named `dir`, checked to be a failure (exit 1) that printed nothing on stdout.
fn dry_run_error(mode: &str, dir: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let lib = library_in(tmp.path(), dir);
    let spec = format!("{}:np_plain", lib.display());
    let out = netprobe::command()
        .args([mode, "--dry-run", &spec])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("netprobe: error: "), "{err}");
    err
}

/// The kernel splits a `uprobe_events` line on the bytes its `isspace()` is true for, 0xA0
/// among them (lib/ctype.c), and `à` is 0xC3 0xA0 in UTF-8: the real run and the dry run both
/// refuse the path, in one line, exit 1.
#[test]
fn path_with_a_byte_the_kernel_reads_as_space_is_refused_by_the_dry_run() {
    let err = dry_run_error("trace", "là");
    assert!(err.contains("byte 0xa0"), "{err}");
}

/// Where the real run refuses a probe line (here a path with `#`, which starts a comment in
/// `uprobe_events`), the dry run fails the same way instead of printing a comment and exiting 0.
#[test]
fn dry_run_fails_where_the_run_refuses_the_probe_line() {
    let err = dry_run_error("count", "a#b");
    assert!(err.contains("it contains '#'"), "{err}");
}
