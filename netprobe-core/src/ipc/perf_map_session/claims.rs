//! Which netprobe sessions use a .NET process's perf map that netprobe turned on, so that the
//! last one to end turns it off and none turns it off under another: one claim file per target
//! process in a folder only root can write (`/run/netprobe/perf-map/PID-STARTTIME`: the host
//! pid and its start time, so a reused pid is another file), each session holding a shared
//! `flock(2)` on it for its whole life. The kernel drops a lock when its holder exits however it
//! exits, so a crashed session leaves a file nobody holds; the next session finds it and, from
//! what it says, knows that the perf map is on because of netprobe.
//!
//! The file records which of the runtime's files netprobe made appear (they did not exist
//! before the first session turned the map on), so that the last session removes exactly those.
//!
//! Lock upgrades are not atomic (`flock(2)`: "the existing lock is first removed"), so ending
//! tries an exclusive lock without waiting: of two sessions ending together at least one gets
//! it, and the one that does is the last holder.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The folder of claim files.
pub const CLAIMS_DIR: &str = "/run/netprobe/perf-map";

/// What the first session recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The perf map file did not exist before netprobe turned the map on.
    pub perf_map_created: bool,
    /// Nor did the runtime's image-load file beside it.
    pub perf_info_created: bool,
}

impl Record {
    fn text(&self) -> String {
        format!(
            "perf_map_created={}\nperf_info_created={}\n",
            u8::from(self.perf_map_created),
            u8::from(self.perf_info_created)
        )
    }

    /// `None` for an empty or foreign file.
    fn parse(text: &str) -> Option<Record> {
        let mut r = Record::default();
        let mut seen = 0;
        for line in text.lines() {
            let (k, v) = line.split_once('=')?;
            let v = match v {
                "0" => false,
                "1" => true,
                _ => return None,
            };
            match k {
                "perf_map_created" => r.perf_map_created = v,
                "perf_info_created" => r.perf_info_created = v,
                _ => return None,
            }
            seen += 1;
        }
        (seen == 2).then_some(r)
    }
}

/// How a session came to hold its claim.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// No other session holds the process's claim and no earlier one left a record: the caller
    /// decides, then [`Claim::record`]s what it found.
    First,
    /// An earlier session that is gone (it crashed or was killed) left this record: the perf map
    /// is on because of netprobe.
    Orphaned(Record),
    /// Another session holds the claim: the perf map is on and stays on until the last ends.
    Shared(Record),
}

/// One session's claim on one process's perf map.
#[derive(Debug)]
pub struct Claim {
    file: File,
    path: PathBuf,
}

/// The claims folder, made if missing, and refused unless it is a folder (not a symlink) owned
/// by this user and writable by nobody else: a local user who could write there could make a
/// session believe another still uses the perf map.
fn claims_dir(dir: &Path) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if meta.uid() != current_euid() || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a folder of this user's that only it can write",
                dir.display()
            ),
        ));
    }
    Ok(file)
}

/// This process's effective user id, as `/proc/self` is owned by it.
fn current_euid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

impl Claim {
    /// Takes the claim of the process `pid` started at `start_time` in [`CLAIMS_DIR`].
    pub fn take(pid: u32, start_time: u64) -> std::io::Result<(Claim, Taken)> {
        Claim::take_in(Path::new(CLAIMS_DIR), pid, start_time)
    }

    /// [`Claim::take`] in the folder `dir` (tests use their own).
    pub fn take_in(dir: &Path, pid: u32, start_time: u64) -> std::io::Result<(Claim, Taken)> {
        use rustix::fs::{flock, FlockOperation, Mode, OFlags};
        let dirfd = claims_dir(dir)?;
        let name = format!("{pid}-{start_time}");
        let path = dir.join(&name);
        loop {
            let fd = rustix::fs::openat(
                dirfd.as_fd(),
                name.as_str(),
                OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let mut file = File::from(fd);
            let sole = flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok();
            if !sole {
                flock(&file, FlockOperation::LockShared)?;
            }
            // The last holder of a claim removes its file while holding it: a lock taken on a
            // file that is no longer the one at that name is taken again on the new file.
            let here = rustix::fs::statat(
                dirfd.as_fd(),
                name.as_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            );
            let meta = file.metadata()?;
            match here {
                Ok(st) if st.st_ino == meta.ino() && st.st_dev == meta.dev() => {}
                _ => continue,
            }
            let mut text = String::new();
            file.rewind()?;
            // A claim file is a few bytes; one that is not is no record.
            (&mut file).take(256).read_to_string(&mut text).ok();
            let record = Record::parse(&text);
            let taken = match (sole, record) {
                (true, None) => Taken::First,
                (true, Some(r)) => Taken::Orphaned(r),
                (false, Some(r)) => Taken::Shared(r),
                // Held by a session that has not recorded yet is impossible (it records
                // before it shares), unless the file is not ours: treat it as a first claim,
                // whose record then replaces what is there.
                (false, None) => Taken::First,
            };
            if sole {
                // Keep an exclusive lock until the record is written, then share.
                if taken != Taken::First {
                    flock(&file, FlockOperation::LockShared)?;
                }
            }
            return Ok((Claim { file, path }, taken));
        }
    }

    /// Writes what the first session found (call after [`Taken::First`]), then shares the
    /// claim with sessions that come later.
    pub fn record(&mut self, r: Record) -> std::io::Result<()> {
        use rustix::fs::{flock, FlockOperation};
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(r.text().as_bytes())?;
        flock(&self.file, FlockOperation::LockShared)?;
        Ok(())
    }

    /// Ends this session's claim. `Some(record)`: this was the last session holding it, the
    /// file is gone, and the caller restores what the record says; `None`: another session
    /// still holds it (that one restores at its end).
    pub fn end(self) -> Option<Record> {
        use rustix::fs::{flock, FlockOperation};
        if flock(&self.file, FlockOperation::NonBlockingLockExclusive).is_err() {
            return None;
        }
        let mut text = String::new();
        let mut file = &self.file;
        file.rewind().ok()?;
        file.take(256).read_to_string(&mut text).ok()?;
        // Removed while held exclusively: a session waiting for a shared lock then finds the
        // name gone and takes a new file.
        let _ = std::fs::remove_file(&self.path);
        Record::parse(&text)
    }

    /// Ends a claim whose first session turned nothing on: the file goes (when no other session
    /// holds it), leaving no record.
    pub fn abandon(self) {
        use rustix::fs::{flock, FlockOperation};
        if flock(&self.file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            perf_map_created: true,
            perf_info_created: false,
        }
    }

    #[test]
    fn the_last_of_two_sessions_gets_the_record_and_the_file_goes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("claims");
        let (mut a, taken) = Claim::take_in(&d, 42, 7).unwrap();
        assert_eq!(taken, Taken::First);
        a.record(record()).unwrap();
        let (b, taken) = Claim::take_in(&d, 42, 7).unwrap();
        assert_eq!(taken, Taken::Shared(record()));
        assert_eq!(a.end(), None, "b still holds the claim");
        assert_eq!(b.end(), Some(record()));
        assert!(!d.join("42-7").exists());
        // Another start time is another process.
        let (c, taken) = Claim::take_in(&d, 42, 8).unwrap();
        assert_eq!(taken, Taken::First);
        c.abandon();
        assert!(!d.join("42-8").exists());
    }

    #[test]
    fn a_crashed_sessions_record_is_found_orphaned() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("claims");
        let (mut a, _) = Claim::take_in(&d, 9, 1).unwrap();
        a.record(record()).unwrap();
        // Dropped without ending: as a killed session's lock goes with its process.
        drop(a);
        let (b, taken) = Claim::take_in(&d, 9, 1).unwrap();
        assert_eq!(taken, Taken::Orphaned(record()));
        assert_eq!(b.end(), Some(record()));
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("claims");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Claim::take_in(&d, 1, 1).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        // A symlink in its place is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(Claim::take_in(&link, 1, 1).is_err());
    }

    #[test]
    fn records_round_trip_and_foreign_text_is_none() {
        for r in [
            Record::default(),
            record(),
            Record {
                perf_map_created: true,
                perf_info_created: true,
            },
        ] {
            assert_eq!(Record::parse(&r.text()), Some(r));
        }
        for bad in [
            "",
            "perf_map_created=1\n",
            "x=1\ny=0\n",
            "perf_map_created=2\nperf_info_created=0\n",
        ] {
            assert_eq!(Record::parse(bad), None, "{bad:?}");
        }
    }
}
