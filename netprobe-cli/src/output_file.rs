//! Every file netprobe writes for the user (`man --dir`, `profile --folded/--svg/--pprof`,
//! `count --stack --folded`) is made anew and renamed over its destination, so that netprobe,
//! running as root, never writes through a symlink someone else placed there (a link in a
//! world-writable folder pointing at `/etc/shadow` would otherwise be truncated and rewritten).
//!
//! The new file gets a temporary name in the destination's folder, opened with
//! `O_CREAT|O_EXCL|O_NOFOLLOW` (open(2): with both flags the call fails if the name exists, even as
//! a symlink) and mode 0644 (less the umask), and is then renamed over the destination
//! (rename(2): a symlink at the new path is itself replaced, never followed).

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Tries at most this many temporary names (each taken one is someone else's file or a leftover).
const ATTEMPTS: u32 = 100;

/// Writes `path` through `what` as a new regular file (see the module comment). On any error the
/// temporary file is removed and `path` is left as it was.
pub fn replace_file(
    path: &Path,
    what: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it names no file (it ends in '..' or '/')",
        ));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp, file) = create_temporary(dir, &name.to_string_lossy())?;
    let mut w = BufWriter::new(file);
    let written = what(&mut w)
        .and_then(|()| w.flush())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Why `path` cannot become a file [`replace_file`] writes, with what to do instead; `None` when
/// it can as far as can be told without writing (the folder exists, the name is no folder). A
/// command asks before it works for minutes, so a typo costs no profile.
pub fn unwritable_reason(path: &Path) -> Option<String> {
    let shown = path.display();
    if path.file_name().is_none() {
        return Some(format!(
            "{shown} names no file (it ends in '..' or '/'): give a file name"
        ));
    }
    if path.is_dir() {
        return Some(format!(
            "{shown} is a folder: give a file name in it ({})",
            path.join("NAME").display()
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!(
            "{} is not a folder: give a path in a folder",
            dir.display()
        )),
        Err(e) => Some(format!(
            "the folder {} cannot be used ({e}): create it first or give a path in another",
            dir.display()
        )),
    }
}

/// A new file `.NAME.netprobe-PID-N.tmp` in `dir`, created by this call alone.
fn create_temporary(dir: &Path, name: &str) -> io::Result<(PathBuf, std::fs::File)> {
    let mut last = None;
    for n in 0..ATTEMPTS {
        let tmp = dir.join(format!(".{name}.netprobe-{}-{n}.tmp", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn a_symlink_at_the_destination_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let dest = d.path().join("out.folded");
        std::os::unix::fs::symlink(&outside, &dest).unwrap();
        replace_file(&dest, |w| w.write_all(b"main;f 1\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        let meta = std::fs::symlink_metadata(&dest).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(
            meta.permissions().mode() & 0o022,
            0,
            "not group/other-writable"
        );
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "main;f 1\n");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }

    #[test]
    fn an_existing_file_is_replaced_by_a_new_one() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("page.1");
        std::fs::write(&dest, "old contents, longer than the new").unwrap();
        let before = std::fs::metadata(&dest).unwrap().ino();
        replace_file(&dest, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        assert_ne!(std::fs::metadata(&dest).unwrap().ino(), before);
    }

    #[test]
    fn a_failed_write_leaves_the_destination_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("x");
        std::fs::write(&dest, "before").unwrap();
        let e = replace_file(&dest, |_| Err(io::Error::other("renderer failed"))).unwrap_err();
        assert_eq!(e.to_string(), "renderer failed");
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "before");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_destination_in_a_missing_folder_or_naming_a_folder_is_refused_up_front() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(unwritable_reason(&d.path().join("p.pb.gz")), None);
        let missing = d.path().join("no/such/p.pb.gz");
        let why = unwritable_reason(&missing).unwrap();
        assert!(
            why.contains("cannot be used") && why.contains("create it first"),
            "{why}"
        );
        let why = unwritable_reason(d.path()).unwrap();
        assert!(why.contains("is a folder: give a file name in it"), "{why}");
        std::fs::write(d.path().join("f"), "").unwrap();
        let why = unwritable_reason(&d.path().join("f/p")).unwrap();
        assert!(why.contains("is not a folder"), "{why}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_path_naming_no_file_is_refused() {
        let e = replace_file(Path::new("/tmp/.."), |_| Ok(())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
