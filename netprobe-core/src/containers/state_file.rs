//! Opening a runtime's state files: its BoltDB database mapped, and a pid file read strictly,
//! with each failure turned into the [`RuntimeError`] the user sees (absent, refused, unreadable).

use super::bolt::{BoltError, Db};
use super::RuntimeError;
use crate::bytes::FileBytes;
use crate::error::Error;
use std::path::Path;

/// The longest pid file read: `u32::MAX` is 10 digits, and runc/crun write no more than the
/// digits (and some writers a newline).
const PID_FILE_CAP: u64 = 16;

/// The error a failure to open `path` of `runtime`'s state is.
pub fn runtime_error(runtime: &'static str, path: &Path, e: Error) -> RuntimeError {
    match e {
        Error::Io { source, .. } => RuntimeError::of_io(runtime, path, &source),
        Error::PermissionDenied { .. } => RuntimeError::Refused {
            runtime,
            path: path.to_path_buf(),
            why: "permission denied".into(),
        },
        other => RuntimeError::Unreadable {
            runtime,
            path: path.to_path_buf(),
            why: other.to_string(),
        },
    }
}

/// `runtime`'s BoltDB file at `path`, mapped (regular files only, [`FileBytes::open`]).
pub fn map(runtime: &'static str, path: &Path) -> Result<FileBytes, RuntimeError> {
    FileBytes::open(path).map_err(|e| runtime_error(runtime, path, e))
}

/// What `read` finds in the newest snapshot of the BoltDB file `bytes` (`path` of `runtime`'s
/// state). The runtime keeps writing while we read and holds no lock against us: a commit may
/// reuse a page of the snapshot being read, which the reader's checks catch; the file is then
/// read once more from its newest meta page, and a second failure makes it unreadable.
pub fn read_db<T>(
    runtime: &'static str,
    path: &Path,
    bytes: &FileBytes,
    read: impl Fn(&Db) -> Result<T, BoltError>,
) -> Result<T, RuntimeError> {
    let unreadable = |why: String| RuntimeError::Unreadable {
        runtime,
        path: path.to_path_buf(),
        why,
    };
    let attempt = || Db::open(bytes).and_then(|db| read(&db));
    let found = attempt()
        .or_else(|_| attempt())
        .map_err(|e| unreadable(e.to_string()))?;
    bytes
        .check_unchanged(path)
        .map_err(|e| unreadable(e.to_string()))?;
    Ok(found)
}

/// The labels of a JSON object of strings (Docker's `Config.Labels`, Podman's `labels`), within
/// the caps of [`super::labels_from`]; a member that is not a string is left out.
pub fn labels_in_json(object: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    object
        .as_object()
        .map(|o| {
            super::labels_from(
                o.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))),
            )
        })
        .unwrap_or_default()
}

/// The pid a pid file holds: decimal digits only (a newline after them allowed), not 0, within
/// `u32`; `None` for anything else or an unreadable file.
pub fn read_pid(path: &Path) -> Option<u32> {
    let bytes = crate::regular_file::read_capped(path, PID_FILE_CAP, "pid file").ok()?;
    parse_pid(&bytes)
}

/// [`read_pid`]'s parse.
pub fn parse_pid(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits)
        .ok()?
        .parse::<u32>()
        .ok()
        .filter(|&p| p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_files_are_read_strictly() {
        assert_eq!(parse_pid(b"31413"), Some(31413));
        assert_eq!(parse_pid(b"31413\n"), Some(31413));
        for bad in [
            &b""[..],
            b"0",
            b"-1",
            b"+5",
            b" 5",
            b"5 ",
            b"5\n\n",
            b"4294967296",
            b"12345678901",
            b"0x10",
        ] {
            assert_eq!(parse_pid(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_pid(b"4294967295"), Some(u32::MAX));
    }

    #[test]
    fn a_missing_a_refused_and_a_special_file() {
        let e = map("containerd", Path::new("/nonexistent/meta.db")).unwrap_err();
        assert!(matches!(e, RuntimeError::Absent { .. }), "{e}");
        let e = map("containerd", Path::new("/dev/null")).unwrap_err();
        assert!(matches!(e, RuntimeError::Unreadable { .. }), "{e}");
        assert!(!e.to_string().contains('\n'));
        assert_eq!(read_pid(Path::new("/dev/zero")), None);
    }
}
