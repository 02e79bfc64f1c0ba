//! `netprobe symbols --vars FILE FUNCTION` on `fixtures/c/dwarf_args.c` (no root needed): the
//! parameters, their types and locations where the entry probe goes, and how `trace` reads them
//! (a snapshot of the -O2 and -O0 listings); JSON lines; the errors for a file without DWARF and
//! for a missing function.

use fixtures::{netprobe, CProgram};
use std::path::PathBuf;

fn bin(opt: &str) -> PathBuf {
    CProgram::new("dwarf_args").flags(&["-g", opt]).build()
}

fn vars(args: &[&str]) -> std::process::Output {
    netprobe::command()
        .arg("symbols")
        .arg("--vars")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn vars_listing_at_o2_and_o0() {
    let mut text = String::new();
    for opt in ["-O2", "-O0"] {
        let b = bin(opt);
        let out = vars(&[b.to_str().unwrap(), "np_args"]);
        assert!(out.status.success(), "{out:?}");
        text.push_str(&format!(
            "# {opt}\n{}",
            String::from_utf8(out.stdout).unwrap()
        ));
    }
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[ADDR]")]}, {
        insta::assert_snapshot!(text);
    });
}

#[test]
fn vars_json_lines() {
    let b = bin("-O2");
    let out = vars(&[b.to_str().unwrap(), "np_args", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    assert_eq!(lines[0]["name"], "i");
    assert_eq!(lines[0]["type"], "int");
    assert_eq!(lines[0]["location"], "%di");
    assert_eq!(lines[0]["reads"][0], "i=s32 at %di");
    assert_eq!(lines[3]["reads"][0], "s=string at %cx");
    assert_eq!(lines[6]["reads"][1], "pr_b=s64 at +16(%sp)");
    assert!(lines[5]["not_readable"]
        .as_str()
        .unwrap()
        .contains("upper bytes of %r9"));
}

#[test]
fn vars_errors() {
    // Files without DWARF: built without -g, and stripped.
    for flags in [&["-O2"][..], &["-O2", "-g", "-s"]] {
        let plain = CProgram::new("dwarf_args").flags(flags).build();
        let out = vars(&[plain.to_str().unwrap(), "np_args"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("has no DWARF debug info"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // No such function; and --vars without a function.
    let b = bin("-O2");
    let out = vars(&[b.to_str().unwrap(), "no_such_function"]);
    assert_eq!(out.status.code(), Some(1));
    let out = netprobe::command()
        .args(["symbols", "--vars", b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// A stripped copy whose DWARF is only in a debug file beside it (`objcopy --only-keep-debug`,
/// `strip -g`, `objcopy --add-gnu-debuglink`, as distributions split packages) lists the same
/// parameters; with the debug file gone, the error says there is no DWARF.
#[test]
fn vars_from_a_debuglink_file_equal_the_unstripped_listing() {
    let b = bin("-O2");
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("p");
    let debug = dir.path().join("p.debug");
    let run = |cmd: &str, args: &[&std::ffi::OsStr]| {
        let st = std::process::Command::new(cmd).args(args).status().unwrap();
        assert!(st.success(), "{cmd} {args:?}");
    };
    run(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            b.as_os_str(),
            debug.as_os_str(),
        ],
    );
    run(
        "strip",
        &[
            "-g".as_ref(),
            b.as_os_str(),
            "-o".as_ref(),
            stripped.as_os_str(),
        ],
    );
    let link = format!("--add-gnu-debuglink={}", debug.display());
    run("objcopy", &[link.as_ref(), stripped.as_os_str()]);
    let want = vars(&[b.to_str().unwrap(), "np_args"]);
    let got = vars(&[stripped.to_str().unwrap(), "np_args"]);
    assert!(got.status.success(), "{got:?}");
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        String::from_utf8_lossy(&want.stdout)
    );
    std::fs::remove_file(&debug).unwrap();
    let gone = vars(&[stripped.to_str().unwrap(), "np_args"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no debug file was found"));
}
