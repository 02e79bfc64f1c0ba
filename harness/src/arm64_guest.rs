//! The arm64 guest of the kernel matrix: an initramfs whose `/init` is a busybox shell script
//! that runs every check of [`checks::ARM64_CHECKS`] with the aarch64 netprobe and prints each
//! run's exit status, time, standard output and error on the console; the host then judges those
//! runs with the very same code as the x86-64 rows ([`checks::evaluate`]).
//!
//! Why a shell agent: the x86-64 rows' agent is the `harness` binary itself, which for arm64
//! would be a second cross build (testcontainers, tokio and all) for a few dozen lines of
//! process handling; busybox has `timeout`, `/proc` and `sed`, which is all it takes. The guest
//! runs, the host judges; nothing in the guest needs the expected values.
//!
//! Console protocol (one line each, ids are indexes into the table, `v`/`s` the plumbing runs):
//! `NPOUT <id> o|e <line>` (stdout/stderr), `NPRC <id> <exit> <t0> <t1>` (`/proc/uptime` before
//! and after), `NPTRACEFS <path>`, `NPLEFT <line>` (what uprobe_events still holds at the end),
//! `NPDONE`.

use crate::checks::{self, CheckResult, Expected, KernelCheck, Reading, RunOutput};
use crate::guest_arch::GuestArch;
use crate::rootfs::Rootfs;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Columns only the arm64 agent reports: `clean` (nothing left in uprobe_events afterwards).
pub const EXTRA_COLUMNS: &[&str] = &["clean"];

/// Where the netprobe under test lives in the guest.
const NETPROBE: &str = "/usr/local/bin/netprobe";

/// The busybox applets the agent uses.
const APPLETS: &[&str] = &[
    "sh", "mount", "mkdir", "poweroff", "uname", "echo", "cat", "sleep", "timeout", "sed", "grep",
    "kill", "wc", "test", "[", "true",
];

/// Debian's statically linked busybox for `arch` (`busybox-static:<arch>`), downloaded with
/// `apt-get download` (dpkg multiarch: `dpkg --add-architecture arm64`, which
/// `scripts/kernel-apt-sources.sh` does) and unpacked without installing, cached under
/// `$NETPROBE_CACHE/busybox/<arch>/<version>/busybox`.
pub fn busybox_for(arch: GuestArch) -> Result<PathBuf> {
    let pkg = format!("busybox-static:{}", arch.debian());
    let dir = fixtures::cache_dir().join("busybox").join(arch.debian());
    let version = match crate::kernels::resolve_version(&pkg) {
        Ok(v) => v,
        Err(e) => {
            // Offline: any cached version.
            let cached = std::fs::read_dir(&dir).ok().and_then(|mut d| {
                d.find_map(|e| {
                    let p = e.ok()?.path().join("busybox");
                    p.is_file().then_some(p)
                })
            });
            return cached.with_context(|| format!("apt cannot resolve {pkg}: {e:#}"));
        }
    };
    let out = dir.join(version.replace(':', "_")).join("busybox");
    if out.is_file() {
        return Ok(out);
    }
    let tmp = dir.join(format!(".dl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let result = (|| -> Result<()> {
        let deb = crate::kernels::apt_download(&tmp, &pkg, &version)?;
        let x = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(tmp.join("root"))
            .status()?;
        if !x.success() {
            bail!("dpkg-deb -x {} failed", deb.display());
        }
        std::fs::create_dir_all(out.parent().expect("has a parent"))?;
        std::fs::rename(tmp.join("root/bin/busybox"), &out)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    Ok(out)
}

/// `arg` as one shell word: single-quoted, with `{pid}` left to the shell as `$bg`.
fn shell_word(arg: &str) -> String {
    arg.split("{pid}")
        .map(|part| format!("'{}'", part.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join("\"$bg\"")
}

/// `args` of `check` with the target's guest path and `{offset:F+N}` filled in; an error names
/// an offset the host could not compute.
fn expand(check: &KernelCheck, target: Option<&str>, expected: &Expected) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for a in check.args {
        let mut a = a.to_string();
        if let Some(t) = target {
            a = a.replace("{target}", t);
            a = a.replace("{target_name}", t.rsplit('/').next().unwrap_or(t));
        }
        while let Some(start) = a.find("{offset:") {
            let end = start + a[start..].find('}').context("unclosed {offset:")?;
            let spec = &a[start + "{offset:".len()..end];
            let (func, plus) = spec.split_once('+').unwrap_or((spec, "0"));
            let base = expected
                .get(check.name)
                .and_then(|m| m.get(func))
                .with_context(|| format!("no nm+readelf offset for {func}"))?;
            let off = base + plus.parse::<u64>()?;
            a.replace_range(start..=end, &format!("{off:#x}"));
        }
        out.push(a);
    }
    Ok(out)
}

/// The shell lines that run netprobe with `args` as run `id` (a background target first when
/// `background` is given) and print the run on the console.
fn run_lines(
    id: &str,
    args: &[String],
    timeout: u64,
    background: Option<(&str, &[&str])>,
) -> String {
    let mut s = String::new();
    if let Some((prog, bg_args)) = background {
        let words: Vec<String> = bg_args.iter().map(|a| shell_word(a)).collect();
        s.push_str(&format!(
            "{prog} {} </dev/null >/dev/null 2>&1 &\nbg=$!\nn=0\n\
             while ! grep -q '{prog}$' /proc/$bg/maps 2>/dev/null && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n",
            words.join(" ")
        ));
    }
    let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    s.push_str(&format!(
        "read t0 rest </proc/uptime\n\
         timeout -s INT {timeout} {NETPROBE} {} </dev/null >/tmp/o 2>/tmp/e\nrc=$?\n\
         read t1 rest </proc/uptime\n",
        words.join(" ")
    ));
    if background.is_some() {
        s.push_str("kill -9 $bg 2>/dev/null\nwait $bg 2>/dev/null\n");
    }
    s.push_str(&format!(
        "sed 's/^/NPOUT {id} o /' /tmp/o\nsed 's/^/NPOUT {id} e /' /tmp/e\necho \"NPRC {id} $rc $t0 $t1\"\n"
    ));
    s
}

/// The `/init` script: mounts, the plumbing runs, every check, what uprobe_events still holds.
pub fn init_script(expected: &Expected) -> String {
    let mut s = String::from(
        "#!/bin/sh\nexport PATH=/bin:/usr/local/bin\n\
         mount -t proc proc /proc\nmount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev 2>/dev/null\nmount -t tmpfs tmpfs /tmp\n\
         mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || mount -t debugfs nodev /sys/kernel/debug\n\
         echo \"NPGUEST begin $(uname -r)\"\n\
         for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do\n\
         \x20 if [ -e $d/uprobe_events ]; then echo \"NPTRACEFS $d\"; ev=$d/uprobe_events; break; fi\n\
         done\n",
    );
    s.push_str(&run_lines("v", &["--version".into()], 60, None));
    let c = checks::ARM64_CHECKS
        .iter()
        .find_map(|c| c.target.filter(|t| matches!(t, checks::Target::C { .. })))
        .map(|t| format!("/fixtures/{}", t.key()));
    if let Some(c) = c {
        s.push_str(&run_lines(
            "s",
            &["symbols".into(), c, "np_harness_add".into()],
            60,
            None,
        ));
    }
    for (i, check) in checks::ARM64_CHECKS.iter().enumerate() {
        let target = check.target.map(|t| format!("/fixtures/{}", t.key()));
        match expand(check, target.as_deref(), expected) {
            Ok(args) => {
                let bg = check.background.zip(target.as_deref()).map(|(a, t)| (t, a));
                s.push_str(&run_lines(&i.to_string(), &args, check.timeout_secs, bg));
            }
            Err(e) => s.push_str(&format!(
                "echo 'NPOUT {i} e harness: {}'\necho 'NPRC {i} 255 0 0'\n",
                format!("{e:#}").replace('\'', "")
            )),
        }
    }
    s.push_str(
        "[ -n \"$ev\" ] && sed 's/^/NPLEFT /' $ev\necho NPDONE\necho \"NPGUEST end\"\npoweroff -f\n",
    );
    s
}

/// Builds the arm64 initramfs (busybox, the aarch64 `netprobe`, the cross-built targets under
/// `/fixtures/`, the agent as `/init`) into `<target>/harness-kernels/initramfs-arm64-<hash>.cpio`.
pub fn write_initramfs(
    netprobe: &Path,
    built: &BTreeMap<&'static str, PathBuf>,
    expected: &Expected,
) -> Result<PathBuf> {
    let mut root = Rootfs::new();
    root.bytes(init_script(expected), "/init", 0o755)?;
    root.file(&busybox_for(GuestArch::Aarch64)?, "/bin/busybox")?;
    for a in APPLETS {
        root.symlink("busybox", &format!("/bin/{a}"))?;
    }
    // Static (crt-static): no loader, no libraries (crate::binaries::netprobe_cross).
    root.file(netprobe, NETPROBE)?;
    for t in checks::targets(GuestArch::Aarch64) {
        if let Some(p) = built.get(t.key()) {
            root.file(p, &format!("/fixtures/{}", t.key()))?;
        }
    }
    for d in [
        "/proc",
        "/sys",
        "/dev",
        "/tmp",
        "/root",
        "/sys/kernel/tracing",
    ] {
        root.dir(d, 0o755)?;
    }
    let mut bytes = Vec::new();
    root.write_newc(&mut bytes)?;
    let dir = fixtures::build::target_dir().join("harness-kernels");
    std::fs::create_dir_all(&dir)?;
    let hash = &root.content_hash()?[..16];
    let path = dir.join(format!("initramfs-arm64-{hash}.cpio"));
    if !path.exists() {
        let tmp = dir.join(format!(".initramfs-arm64-{}.tmp", std::process::id()));
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    eprintln!(
        "kernels: arm64 initramfs {} ({:.1} MB)",
        path.display(),
        bytes.len() as f64 / 1e6
    );
    Ok(path)
}

/// The runs the agent printed, by id.
fn runs(console: &[String]) -> BTreeMap<String, (RunOutput, f64)> {
    let mut runs: BTreeMap<String, (RunOutput, f64)> = BTreeMap::new();
    for line in console {
        if let Some(rest) = line.split_once("NPOUT ").map(|(_, r)| r) {
            let mut parts = rest.splitn(3, ' ');
            let (Some(id), Some(stream)) = (parts.next(), parts.next()) else {
                continue;
            };
            let text = parts.next().unwrap_or("");
            let run = &mut runs.entry(id.to_string()).or_default().0;
            let buf = if stream == "o" {
                &mut run.stdout
            } else {
                &mut run.stderr
            };
            buf.push_str(text);
            buf.push('\n');
        } else if let Some(rest) = line.split_once("NPRC ").map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            let entry = runs.entry(f[0].to_string()).or_default();
            entry.0.code = f[1].parse().ok();
            let (t0, t1) = (f[2].parse::<f64>(), f[3].parse::<f64>());
            entry.1 = match (t0, t1) {
                (Ok(a), Ok(b)) => b - a,
                _ => 0.0,
            };
        }
    }
    runs
}

/// Judges the agent's console on the host: tracefs, netprobe (`--version` and `symbols` of the
/// C target), every check of [`checks::ARM64_CHECKS`], and `clean`.
pub fn judge_console(console: &[String], expected: &Expected) -> Vec<CheckResult> {
    let runs = runs(console);
    let mut results = Vec::new();
    results.push(
        match console.iter().find_map(|l| l.split_once("NPTRACEFS ")) {
            Some((_, d)) => CheckResult {
                check: "tracefs".into(),
                ok: true,
                hits: None,
                detail: format!("{}/uprobe_events present", d.trim()),
                seconds: 0.0,
            },
            None => CheckResult::failed(
                "tracefs",
                "no uprobe_events under /sys/kernel/tracing or /sys/kernel/debug/tracing",
            ),
        },
    );
    let version = runs.get("v").map(|r| &r.0);
    let symbols = runs.get("s").map(|r| &r.0);
    results.push(match (version, symbols) {
        (Some(v), Some(s))
            if v.code == Some(0) && s.code == Some(0) && s.stdout.contains("np_harness_add") =>
        {
            CheckResult {
                check: "netprobe".into(),
                ok: true,
                hits: None,
                detail: format!("{}; symbols lists np_harness_add", v.stdout.trim()),
                seconds: 0.0,
            }
        }
        (Some(v), s) => CheckResult::failed(
            "netprobe",
            format!(
                "--version exit {:?} {}; symbols exit {:?} {}",
                v.code,
                v.stderr.trim(),
                s.and_then(|s| s.code),
                s.map(|s| s.stderr.trim()).unwrap_or("")
            ),
        ),
        (None, _) => CheckResult::failed("netprobe", "netprobe --version never ran"),
    });
    for (i, check) in checks::ARM64_CHECKS.iter().enumerate() {
        let Some((out, seconds)) = runs.get(&i.to_string()).cloned() else {
            continue;
        };
        let mut out = out;
        out.timed_out = out.code.is_some() && seconds + 0.5 >= check.timeout_secs as f64;
        let mut r = if check.reading == Reading::JsonOffsets {
            match expected.get(check.name) {
                Some(want) => checks::evaluate_offsets(check, &out, want),
                None => CheckResult::failed(
                    check.name,
                    "no expected offsets (nm/readelf on the host could not compute them)",
                ),
            }
        } else {
            checks::evaluate(check, &out)
        };
        r.seconds = seconds;
        results.push(r);
    }
    if console.iter().any(|l| l.contains("NPDONE")) {
        let left: Vec<&str> = console
            .iter()
            .filter_map(|l| l.split_once("NPLEFT ").map(|(_, r)| r.trim()))
            .collect();
        results.push(if left.is_empty() {
            CheckResult {
                check: "clean".into(),
                ok: true,
                hits: None,
                detail: "uprobe_events empty after every check".into(),
                seconds: 0.0,
            }
        } else {
            CheckResult::failed(
                "clean",
                format!("left in uprobe_events: {}", left.join("; ")),
            )
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_and_leave_pid_to_the_shell() {
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("{pid}"), "''\"$bg\"''");
    }

    #[test]
    fn offsets_are_filled_in_from_the_expected_values() {
        let check = checks::ARM64_CHECKS
            .iter()
            .find(|c| c.name == "c mid-insn refused")
            .unwrap();
        let mut expected = Expected::new();
        expected.insert(
            check.name.into(),
            [("np_harness_add".to_string(), 0x9d0)]
                .into_iter()
                .collect(),
        );
        let args = expand(check, Some("/fixtures/x"), &expected).unwrap();
        assert_eq!(args.last().unwrap(), "/fixtures/x:0x9d2");
        assert!(expand(check, Some("/fixtures/x"), &Expected::new()).is_err());
    }

    #[test]
    fn console_runs_are_judged_on_the_host() {
        let check = checks::ARM64_CHECKS
            .iter()
            .position(|c| c.name == "c ret")
            .unwrap();
        let ret = r#"{"comm":"h","event":"return","function":"np_harness_add","retval":42}"#;
        let mut console = vec![
            "NPGUEST begin 6.12.117+deb12-arm64".to_string(),
            "NPTRACEFS /sys/kernel/tracing".into(),
        ];
        for _ in 0..4 {
            console.push(format!("NPOUT {check} o {ret}"));
        }
        console.push(format!("NPOUT {check} e netprobe: 1 probe(s)"));
        console.push(format!("NPRC {check} 0 10.00 12.50"));
        console.push("NPDONE".into());
        let results = judge_console(&console, &Expected::new());
        let r = results.iter().find(|r| r.check == "c ret").unwrap();
        assert!(r.ok, "{r:?}");
        assert_eq!(r.hits, Some(4));
        assert!((r.seconds - 2.5).abs() < 1e-9);
        assert!(results.iter().any(|r| r.check == "clean" && r.ok));
        console.insert(2, "NPLEFT p:netprobe/x /fixtures/x:0x9d0".into());
        let results = judge_console(&console, &Expected::new());
        assert!(results.iter().any(|r| r.check == "clean" && !r.ok));
    }
}
