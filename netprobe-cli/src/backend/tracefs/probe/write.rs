//! Writing `uprobe_events`: lines appended in batches below the kernel's write buffer, each
//! probe file checked again right before, and a refused write explained by the kernel's reason
//! from `error_log` (`super`'s "Writes").

use super::read::parse_error_log;
use super::{ProbeLine, MAX_BATCH_BYTES};
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Appends `lines` to `uprobe_events`, several per write (up to [`MAX_BATCH_BYTES`]).
///
/// On failure returns the kernel's reason for the first refused line ([`Error::ProbeRejected`]);
/// lines before it in the same write (and all earlier writes) have taken effect, lines after it
/// have not. Removal of a probe still enabled somewhere fails with EBUSY ([`Error::Busy`]).
pub fn append_lines(tracefs: &Tracefs, lines: &[ProbeLine]) -> Result<()> {
    let path = tracefs.path("uprobe_events");
    let mut file = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let mut batch = String::new();
    let mut batch_lines: Vec<&ProbeLine> = Vec::new();
    for line in lines {
        let text = format!("{line}\n");
        if !batch.is_empty() && batch.len() + text.len() > MAX_BATCH_BYTES {
            write_batch(tracefs, &mut file, &batch, &batch_lines)?;
            batch.clear();
            batch_lines.clear();
        }
        batch.push_str(&text);
        batch_lines.push(line);
    }
    if !batch.is_empty() {
        write_batch(tracefs, &mut file, &batch, &batch_lines)?;
    }
    Ok(())
}

fn write_batch(
    tracefs: &Tracefs,
    file: &mut std::fs::File,
    batch: &str,
    lines: &[&ProbeLine],
) -> Result<()> {
    // Right before the kernel looks the paths up: each must still name the file whose bytes the
    // offsets were computed from (a target could have put another file at a path it controls).
    let mut checked: Vec<&str> = Vec::new();
    for line in lines {
        if let ProbeLine::Add(def) = line {
            let path = def.path().as_str();
            if !checked.contains(&path) {
                netprobe_core::resolve::verify_probe_file(Path::new(path))?;
                checked.push(path);
            }
        }
    }
    // One write() per batch: write_all would retry the rest after a short write, but the kernel
    // either consumes everything or fails on a line.
    match file.write(batch.as_bytes()) {
        Ok(n) if n == batch.len() => Ok(()),
        Ok(n) => Err(Error::ProbeRejected {
            line: batch.lines().next().unwrap_or_default().to_string(),
            reason: format!(
                "short write to uprobe_events ({n} of {} bytes)",
                batch.len()
            ),
        }),
        Err(e) => Err(rejection(tracefs, lines, e)),
    }
}

/// Turns a failed write into an error naming the line and the kernel's reason.
fn rejection(tracefs: &Tracefs, lines: &[&ProbeLine], e: std::io::Error) -> Error {
    let path = tracefs.path("uprobe_events");
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => return Error::io(path, e),
        Some(libc::EBUSY) => {
            return Error::Busy {
                path,
                why: format!(
                    "a probe among `{}` is enabled or in use",
                    lines
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join("`, `")
                ),
                fix: "stop the perf/bpftrace/netprobe session using it, then retry".into(),
            }
        }
        _ => {}
    }
    let log = tracefs.read("error_log").unwrap_or_default();
    let entries = parse_error_log(&log);
    // The newest entry whose command is one of ours explains the failure.
    let ours = entries.iter().rev().find_map(|entry| {
        lines
            .iter()
            .find(|l| l.to_string() == entry.command)
            .map(|l| (l.to_string(), entry))
    });
    match ours {
        Some((line, entry)) => Error::ProbeRejected {
            line,
            reason: format!("{} ({e})", entry.message),
        },
        None => Error::ProbeRejected {
            line: lines
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("; "),
            reason: match e.raw_os_error() {
                Some(libc::ENOENT) => format!(
                    "{e}: the file or probe does not exist (check the path, or that the probe was not already removed)"
                ),
                Some(libc::EEXIST) => format!("{e}: an event of that name already exists in the group"),
                _ => format!("{e} (no reason in error_log)"),
            },
        },
    }
}
