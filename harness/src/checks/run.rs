//! Running one check: netprobe with the row's arguments and a time limit (SIGINT first, so it
//! cleans up), the traced program in the background when the row asks for it.

use super::{evaluate, evaluate_offsets, CheckResult, Expected, KernelCheck, Reading};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `check` with `netprobe` on this system; `target` is the traced program's path here.
pub fn run_check(
    netprobe: &Path,
    check: &KernelCheck,
    target: Option<&Path>,
    expected: &Expected,
) -> CheckResult {
    let subcommands = crate::binaries::subcommands(netprobe);
    if !crate::binaries::has_subcommand(netprobe, check.subcommand) {
        return CheckResult::failed(
            check.name,
            format!(
                "netprobe has no `{}` subcommand yet (it has: {})",
                check.subcommand,
                if subcommands.is_empty() {
                    "none".to_string()
                } else {
                    subcommands.join(", ")
                }
            ),
        );
    }
    // A background target runs while netprobe looks at it, and is killed afterwards.
    let mut background = None;
    if let (Some(bg_args), Some(t)) = (check.background, target) {
        match Background::start(t, bg_args) {
            Ok(b) => background = Some(b),
            Err(e) => return CheckResult::failed(check.name, e),
        }
    }
    let target_path = target.map(|t| t.to_string_lossy().into_owned());
    let target_name = target
        .and_then(|t| t.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let pid = background.as_ref().map(|b| b.pid().to_string());
    let args: Vec<String> = check
        .args
        .iter()
        .map(|a| {
            let mut a = a.to_string();
            if let Some(p) = &target_path {
                a = a.replace("{target}", p);
            }
            if let Some(n) = &target_name {
                a = a.replace("{target_name}", n);
            }
            if let Some(p) = &pid {
                a = a.replace("{pid}", p);
            }
            a
        })
        .collect();
    let started = Instant::now();
    let out = run_with_timeout(netprobe, &args, Duration::from_secs(check.timeout_secs));
    let seconds = started.elapsed().as_secs_f64();
    drop(background);
    let out = match out {
        Ok(out) => out,
        Err(e) => return CheckResult::failed(check.name, e),
    };
    let mut result = if check.reading == Reading::JsonOffsets {
        match expected.get(check.name) {
            Some(want) => evaluate_offsets(check, &out, want),
            None => CheckResult::failed(
                check.name,
                "no expected offsets (nm/readelf on the host could not compute them)",
            ),
        }
    } else {
        evaluate(check, &out)
    };
    result.seconds = seconds;
    result
}

/// A target running in the background; killed (SIGKILL) and reaped on drop.
struct Background {
    child: std::process::Child,
}

impl Background {
    /// Starts `program args` and waits until its own code is mapped (exec done).
    fn start(program: &Path, args: &[&str]) -> Result<Background, String> {
        let child = Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        let b = Background { child };
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let maps =
                std::fs::read_to_string(format!("/proc/{}/maps", b.pid())).unwrap_or_default();
            if maps.lines().any(|l| l.ends_with(&name)) {
                return Ok(b);
            }
            if Instant::now() >= deadline {
                return Err(format!("{} never mapped its own file", program.display()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished (or killed) netprobe run left.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    /// Exit code; None when killed by a signal (the time limit included).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// True when the time limit killed it.
    pub timed_out: bool,
}

/// Runs `prog args` and kills it (SIGINT first, so netprobe cleans up; SIGKILL 5 s later) after
/// `limit`.
pub fn run_with_timeout(
    prog: &Path,
    args: &[String],
    limit: Duration,
) -> Result<RunOutput, String> {
    use std::io::Read;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", prog.display()))?;
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = so.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = se.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let mut sent_int = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for netprobe: {e}")),
        }
        let now = Instant::now();
        if now >= deadline && sent_int.is_none() {
            timed_out = true;
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            sent_int = Some(now);
        }
        if let Some(t) = sent_int {
            if now.duration_since(t) > Duration::from_secs(5) {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(RunOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned(),
        timed_out,
    })
}
