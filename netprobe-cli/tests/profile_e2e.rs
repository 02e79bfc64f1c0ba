//! End-to-end tests of `netprobe profile` on real programs sampled by the kernel, with known
//! truths:
//!
//! - `fixtures/c/profile_target.c` spends 75% of its CPU in `hot()` and 25% in `warm()` (the
//!   same loop, called 3:1 from `work()` from `main`): the profile attributes them within a few
//!   percentage points, every stack holds `main` and names every frame from `main` on, no sample is lost;
//!   a thread started after netprobe attached is sampled too (`-c`, from the first instruction).
//! - `fixtures/c/prologue_target.c` samples mostly where a frame-pointer walk skips the caller (a
//!   frameless leaf, a function's first instruction and `ret`): every stack is still exact.
//! - The flame graph SVG renders in headless Chromium (PNG kept under
//!   `target/profile-artifacts/`) and holds the frames' titles.
//! - `--dry-run` prints perf's command line; a missing pid is a one-line error.
//!
//! - Off-CPU and wall-clock profiles: `profile_off_cpu/trials.rs`.
//! - `--pprof` files read by `go tool pprof` and by speedscope in Chromium:
//!   `profile_pprof/trials.rs`.
//!
//! Go and .NET programs: `profile_go_e2e.rs`, `profile_dotnet_e2e.rs`.

use fixtures::e2e::{self, err, succeeded, text, Need};
use fixtures::live::Waiting;
use fixtures::CProgram;
use fixtures::{netprobe, profile};
use serde_json::Value as Json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "profile_off_cpu/trials.rs"]
mod off_cpu;
#[path = "profile_pprof/trials.rs"]
mod pprof;

type R = Result<(), String>;

/// A C fixture built for frame-pointer walks: frame pointers kept and no tail calls (a function
/// must keep its frame while it calls; see the sources).
fn c_program(name: &str) -> PathBuf {
    CProgram::new(name)
        .flags(&[
            "-O1",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-pthread",
        ])
        .build()
}

fn target_c() -> PathBuf {
    c_program("profile_target")
}

/// `netprobe profile --json -p PID --duration D -F 1999` and `extra` arguments; its JSON.
fn profile_pid(pid: u32, duration: &str, extra: &[&std::ffi::OsStr]) -> Result<Json, String> {
    let out = netprobe::command()
        .args(["profile", "-p", &pid.to_string(), "--duration", duration])
        .args(["-F", "1999", "--json"])
        .args(extra)
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile -p")?;
    serde_json::from_slice(&out.stdout).map_err(err)
}

/// File offset ranges of `bin`'s PLT sections (`.plt`, `.plt.got`, `.plt.sec`), from `readelf -SW`.
fn plt_ranges(bin: &Path) -> Result<Vec<(u64, u64)>, String> {
    let out = Command::new("readelf")
        .args(["-SW"])
        .arg(bin)
        .output()
        .map_err(err)?;
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| {
            // `  [13] .plt  PROGBITS  0000000000001020 001020 000080 10 AX 0 0 16`
            let f: Vec<&str> = l.split(']').nth(1)?.split_whitespace().collect();
            if !f.first()?.starts_with(".plt") {
                return None;
            }
            let off = u64::from_str_radix(f.get(3)?, 16).ok()?;
            let size = u64::from_str_radix(f.get(4)?, 16).ok()?;
            Some((off, off + size))
        })
        .collect())
}

/// Whether frame name `f` is `[unknown] (BIN+0xOFF)` with OFF inside one of `plt`.
fn in_plt(bin: &Path, f: &str, plt: &[(u64, u64)]) -> bool {
    let Some(name) = bin.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    f.strip_prefix(&format!("[unknown] ({name}+0x"))
        .and_then(|r| r.strip_suffix(')'))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .is_some_and(|off| plt.iter().any(|&(a, b)| off >= a && off < b))
}

/// hot ≈ 75% and warm ≈ 25% of the samples of the C target's work (within 5 points).
fn check_shares(v: &Json) -> R {
    let samples = v["samples"].as_u64().unwrap_or(0);
    let (hot, warm) = (
        profile::self_samples(v, "hot"),
        profile::self_samples(v, "warm"),
    );
    let (hp, wp) = (profile::pct(hot, samples), profile::pct(warm, samples));
    eprintln!("samples={samples} hot={hot} ({hp:.1}%) warm={warm} ({wp:.1}%)");
    // CPU-clock samples come only while the target runs on a CPU: fewer on a busy machine.
    // From 800 samples on, the sampling error of a 75% share is at most 1.5 points (one
    // standard deviation), so 5 points is more than three.
    if samples < 800 {
        return Err(format!("only {samples} samples"));
    }
    if (hp - 75.0).abs() > 5.0 || (wp - 25.0).abs() > 5.0 {
        return Err(format!(
            "hot {hp:.1}% / warm {wp:.1}%, expected 75% / 25%: {v}"
        ));
    }
    if v["lost"].as_u64() != Some(0) {
        return Err(format!("lost samples: {}", v["lost"]));
    }
    Ok(())
}

/// `netprobe profile -p` on the running C target: the shares, main under every stack, every
/// frame named, the folded line main;work;hot, the SVG written.
fn c_hot_warm_shares_by_pid() -> R {
    let bin = target_c();
    let target = Waiting::start(Command::new(&bin).arg("8")).map_err(err)?;
    let dir = profile::artifacts();
    let (folded, svg) = (dir.join("c.folded"), dir.join("c.svg"));
    let v = profile_pid(
        target.pid(),
        "4s",
        &[
            "--folded".as_ref(),
            folded.as_ref(),
            "--svg".as_ref(),
            svg.as_ref(),
        ],
    )?;
    check_shares(&v)?;
    let plt = plt_ranges(&bin)?;
    // Above main only libc's start code (__libc_start_call_main: Debian's libc has no .symtab,
    // so it may be unknown); from main on every frame is the program's, named. A sample on a
    // function's first instructions or its `ret` keeps its caller (the frame-pointer walk
    // misses it there; netprobe puts it back), so every stack of hot and warm is exact.
    for (frames, n) in profile::stacks(&v) {
        let Some(m) = frames.iter().position(|f| f == "main") else {
            return Err(format!("a stack ({n} samples) without main: {frames:?}"));
        };
        let below = &frames[m..];
        // The one leaf outside any file is clock_gettime in the vDSO (main's time checks); it
        // is named from the vDSO, `[unknown] (0xADDR)` only if that cannot be read. A leaf in
        // the program's PLT stub for it (`.plt`: the call on its way to libc) has no symbol,
        // as perf's `clock_gettime@plt` is synthesized from relocations, which netprobe does not.
        let named = below.iter().enumerate().all(|(i, f)| {
            !f.starts_with("[unknown]")
                || (i + 1 == below.len()
                    && (f.starts_with("[unknown] (0x") || in_plt(&bin, f, &plt)))
        });
        if !named {
            return Err(format!("an unknown frame under main: {frames:?}"));
        }
        if let Some(leaf @ ("hot" | "warm")) = frames.last().map(String::as_str) {
            if below != ["main", "work", leaf] {
                return Err(format!(
                    "hot/warm under an unexpected chain ({n} samples): {frames:?}"
                ));
            }
        }
    }
    let hot = profile::self_samples(&v, "hot");
    let folded = std::fs::read_to_string(&folded).map_err(err)?;
    let line = folded
        .lines()
        .find(|l| l.ends_with(&format!("main;work;hot {hot}")))
        .ok_or_else(|| format!("no main;work;hot {hot} line in\n{folded}"))?;
    let n: u64 = line.rsplit_once(' ').unwrap().1.parse().map_err(err)?;
    if n != hot {
        return Err(format!("folded {line} vs JSON hot {hot}"));
    }
    let svg = std::fs::read_to_string(&svg).map_err(err)?;
    for name in ["hot", "warm", "work", "main"] {
        if !svg.contains(&format!("<title>{name} (")) {
            return Err(format!("the SVG has no frame titled {name}"));
        }
    }
    target.finish();
    Ok(())
}

/// `fixtures/c/prologue_target.c`: main -> outer -> step -> leaf, where leaf() makes no frame
/// and step() is little more than its prologue and `ret`. The kernel's frame-pointer walk
/// skips step() under every sample of leaf() and outer() under step()'s first instruction and
/// `ret` (`perf record -g` of this program: ~75% of its stacks lack a frame); netprobe puts the
/// caller back from the sampled user stack, so every stack is exact. Without that, this fails.
fn c_prologue_and_leaf_samples_keep_their_caller() -> R {
    let bin = c_program("prologue_target");
    let target = Waiting::start(Command::new(&bin).arg("6")).map_err(err)?;
    let v = profile_pid(target.pid(), "3s", &[])?;
    let (mut leaf, mut step, mut outer) = (0u64, 0u64, 0u64);
    for (frames, n) in profile::stacks(&v) {
        let Some(m) = frames.iter().position(|f| f == "main") else {
            return Err(format!("a stack ({n} samples) without main: {frames:?}"));
        };
        match &frames[m..] {
            [_, _, _, l] if l == "leaf" => {
                leaf += n;
                if frames[m..] != ["main", "outer", "step", "leaf"] {
                    return Err(format!(
                        "leaf under a wrong chain ({n} samples): {frames:?}"
                    ));
                }
            }
            [.., s] if s == "step" => {
                step += n;
                if frames[m..] != ["main", "outer", "step"] {
                    return Err(format!(
                        "step under a wrong chain ({n} samples): {frames:?}"
                    ));
                }
            }
            [.., l] if l == "leaf" => {
                return Err(format!(
                    "leaf under a wrong chain ({n} samples): {frames:?}"
                ))
            }
            // outer()'s own loop around step() (about a tenth of the time).
            [.., o] if o == "outer" => {
                outer += n;
                if frames[m..] != ["main", "outer"] {
                    return Err(format!(
                        "outer under a wrong chain ({n} samples): {frames:?}"
                    ));
                }
            }
            _ => {}
        }
    }
    let samples = v["samples"].as_u64().unwrap_or(0);
    eprintln!("samples={samples} leaf={leaf} step={step} outer={outer}");
    // leaf, step and outer's loop run nearly all the time, each checked above (a stack missing
    // a frame shows there); leaf and step, whose callers the kernel's walk loses, must be most.
    if samples < 800 || (leaf + step + outer) * 10 < samples * 9 || (leaf + step) * 10 < samples * 7
    {
        return Err(format!(
            "{samples} samples, {leaf} in leaf, {step} in step, {outer} in outer: too few to judge: {v}"
        ));
    }
    target.finish();
    Ok(())
}

/// `netprobe profile -c`: sampled from the first instruction, and a thread the target starts
/// one second in (after the events were opened) is sampled too, with the same shares.
fn c_command_and_late_thread() -> R {
    let bin = target_c();
    let out = netprobe::command()
        .args(["profile", "-F", "1999", "--json", "-c"])
        .arg(format!("{} 3 1", bin.display()))
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile -c")?;
    let v = profile::json_of(&out)?;
    check_shares(&v)?;
    let in_thread: u64 = profile::stacks(&v)
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "thread_main"))
        .map(|(_, n)| n)
        .sum();
    let samples = v["samples"].as_u64().unwrap_or(0);
    // The thread runs for 2 of the 3 seconds beside main on two CPUs: about 40% of samples.
    if profile::pct(in_thread, samples) < 20.0 {
        return Err(format!(
            "{in_thread} of {samples} samples in the late thread: {v}"
        ));
    }
    let in_main: u64 = profile::stacks(&v)
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "main"))
        .map(|(_, n)| n)
        .sum();
    if in_main + in_thread < samples * 98 / 100 {
        return Err(format!(
            "{in_main} + {in_thread} of {samples} samples under main or thread_main"
        ));
    }
    Ok(())
}

/// The SVG of a profile rendered by headless Chromium: the page loads (a non-empty PNG, kept as
/// an artifact) and its text has the frame titles.
fn svg_renders_in_chromium() -> R {
    let bin = target_c();
    let dir = profile::artifacts();
    let svg = dir.join("chromium.svg");
    let png = dir.join("flamegraph.png");
    let _ = std::fs::remove_file(&png);
    let out = netprobe::command()
        .args(["profile", "-F", "199", "--svg"])
        .arg(&svg)
        .arg("-c")
        .arg(format!("{} 2", bin.display()))
        .output()
        .map_err(err)?;
    succeeded(out, "profile --svg")?;
    let profile_dir = tempfile::tempdir().map_err(err)?;
    let out = profile::headless_chromium(profile_dir.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", svg.display()))
        .output()
        .map_err(err)?;
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    if size < 1000 {
        return Err(format!(
            "chromium wrote no screenshot ({size} bytes, {}): {}",
            out.status,
            text(&out.stderr)
        ));
    }
    let mut sig = [0u8; 8];
    std::fs::File::open(&png)
        .and_then(|mut f| f.read_exact(&mut sig))
        .map_err(err)?;
    if &sig != b"\x89PNG\r\n\x1a\n" {
        return Err(format!("{} is not a PNG", png.display()));
    }
    // The DOM Chromium loaded: the frames' <title>s as the page holds them.
    let dom = profile::headless_chromium(profile_dir.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", svg.display()))
        .output()
        .map_err(err)?;
    let dom = text(&dom.stdout);
    for name in ["hot", "warm", "main"] {
        if !dom.contains(&format!("<title>{name} (")) {
            return Err(format!("Chromium's DOM has no frame titled {name}"));
        }
    }
    eprintln!("flame graph screenshot: {} ({size} bytes)", png.display());
    Ok(())
}

fn dry_run_prints_perf_record() -> R {
    let out = netprobe::command()
        .args(["profile", "-p", "1", "--duration", "10s", "--dry-run"])
        .output()
        .map_err(err)?;
    let out = succeeded(out, "--dry-run")?;
    if text(&out.stdout) != "perf record -F 99 -g -p 1 -- sleep 10\n" {
        return Err(format!("dry run printed {:?}", text(&out.stdout)));
    }
    let out = netprobe::command()
        .args([
            "profile",
            "-p",
            "1",
            "--off-cpu",
            "--off-cpu-every",
            "4",
            "--dry-run",
        ])
        .output()
        .map_err(err)?;
    let out = succeeded(out, "--off-cpu --dry-run")?;
    if text(&out.stdout) != "perf record -e context-switches/period=4/ --switch-events -g -p 1\n" {
        return Err(format!("off-CPU dry run printed {:?}", text(&out.stdout)));
    }
    // Off-CPU options without an off-CPU profile, both kinds at once, or a ratio of 0: one
    // line naming the fix.
    for args in [
        &["--off-cpu-every", "3"][..],
        &["--min-block", "1ms"],
        &["--off-cpu", "--wall"],
        &["--off-cpu", "--off-cpu-every", "0"],
        &["--goroutines"],
        // pid 1 is no Go program.
        &["--off-cpu", "--goroutines"],
    ] {
        let out = netprobe::command()
            .args(["profile", "-p", "1", "--duration", "1s"])
            .args(args)
            .output()
            .map_err(err)?;
        let e = text(&out.stderr);
        if out.status.success() || !e.lines().next().unwrap_or("").contains("error") {
            return Err(format!("{args:?}: expected an error line, got {e:?}"));
        }
    }
    Ok(())
}

fn missing_pid_is_one_line_error() -> R {
    let out = netprobe::command()
        .args(["profile", "-p", "999999999", "--duration", "1s"])
        .output()
        .map_err(err)?;
    let e = text(&out.stderr);
    let last: Vec<&str> = e.lines().filter(|l| l.contains("error")).collect();
    if out.status.code() != Some(1) || last.len() != 1 || !last[0].contains("999999999") {
        return Err(format!("expected one error line naming the pid, got {e:?}"));
    }
    let out = netprobe::command()
        .args(["profile", "-p", "1", "-F", "0"])
        .output()
        .map_err(err)?;
    if out.status.code() != Some(1) || !text(&out.stderr).contains("--frequency") {
        return Err(format!("-F 0: {:?}", text(&out.stderr)));
    }
    Ok(())
}

/// `--folded FILE` and `--svg FILE` as root into a folder another user can write: a symlink
/// they left at FILE is replaced by a new file, and what it pointed to is not written.
fn output_files_replace_a_planted_symlink() -> R {
    let bin = target_c();
    let dir = tempfile::tempdir().map_err(err)?;
    let outside = dir.path().join("outside");
    std::fs::write(&outside, "keep\n").map_err(err)?;
    let (folded, svg) = (dir.path().join("p.folded"), dir.path().join("p.svg"));
    for link in [&folded, &svg] {
        std::os::unix::fs::symlink(&outside, link).map_err(err)?;
    }
    let out = netprobe::command()
        .args(["profile", "-F", "999", "-c"])
        .arg(format!("{} 1", bin.display()))
        .arg("--folded")
        .arg(&folded)
        .arg("--svg")
        .arg(&svg)
        .output()
        .map_err(err)?;
    succeeded(out, "profile --folded --svg")?;
    if std::fs::read_to_string(&outside).map_err(err)? != "keep\n" {
        return Err("the symlinks' target was written".into());
    }
    for file in [&folded, &svg] {
        let meta = std::fs::symlink_metadata(file).map_err(err)?;
        if !meta.file_type().is_file() || meta.len() == 0 {
            return Err(format!(
                "{} is not a new regular file: {meta:?}",
                file.display()
            ));
        }
    }
    Ok(())
}

fn main() {
    let root = [Need::Root, Need::CCompiler];
    e2e::run(vec![
        e2e::trial("c_hot_warm_shares_by_pid", &root, c_hot_warm_shares_by_pid),
        e2e::trial(
            "c_prologue_and_leaf_samples_keep_their_caller",
            &root,
            c_prologue_and_leaf_samples_keep_their_caller,
        ),
        e2e::trial("c_off_cpu_shares_match_the_programs_clock", &root, || {
            off_cpu::c_off_cpu_shares_match_the_programs_clock(&c_program("off_cpu_waits"))
        }),
        e2e::trial("c_wall_half_computing_half_sleeping", &root, || {
            off_cpu::c_wall_half_computing_half_sleeping(&c_program("off_cpu_waits"))
        }),
        e2e::trial("c_trigger_counts_only_under_the_function", &root, || {
            off_cpu::c_trigger_counts_only_under_the_function(&c_program("off_cpu_waits"))
        }),
        e2e::trial(
            "c_command_and_late_thread",
            &root,
            c_command_and_late_thread,
        ),
        e2e::trial(
            "svg_renders_in_chromium",
            &[Need::Root, Need::CCompiler, Need::Program("chromium")],
            svg_renders_in_chromium,
        ),
        e2e::trial(
            "pprof_top_matches_the_table",
            &[Need::Root, Need::CCompiler, Need::Go],
            || pprof::pprof_top_matches_the_table(&target_c()),
        ),
        e2e::trial(
            "pprof_opens_in_speedscope",
            &[
                Need::Root,
                Need::CCompiler,
                Need::Program("chromium"),
                Need::Program("base64"),
                Need::Path(pprof::speedscope_index()),
            ],
            || pprof::pprof_opens_in_speedscope(&target_c()),
        ),
        e2e::trial(
            "output_files_replace_a_planted_symlink",
            &root,
            output_files_replace_a_planted_symlink,
        ),
        e2e::trial(
            "dry_run_prints_perf_record",
            &[],
            dry_run_prints_perf_record,
        ),
        e2e::trial(
            "missing_pid_is_one_line_error",
            &[],
            missing_pid_is_one_line_error,
        ),
    ]);
}
