//! `-c CMD --user NAME`: the user a launched command runs as, looked up in the user database
//! before anything is placed, and the privilege drop its child makes between fork and exec.
//!
//! The drop follows setuid(2) and SEI CERT C rule POS36-C ("Observe correct revocation order
//! while relinquishing privileges"): supplementary groups (setgroups(2)), then the group
//! (setgid(2)), then the user (setuid(2)), since after setuid a process may no longer change its
//! groups. It is then checked (POS37-C, "Ensure that privilege relinquishment is successful"):
//! real and effective ids are the target's, and setuid(0) fails.

use crate::error::{Error, Result};
use netprobe_core::capabilities::{self, CapSet, Capability};
use std::ffi::{CStr, CString};

/// `--user` without `-c` is a usage error: it names who the launched command runs as.
pub fn check_user_with_command(user: Option<&str>, command: Option<&str>) -> Result<()> {
    match (user, command) {
        (Some(u), None) => Err(Error::usage(format!(
            "--user {u} needs -c: it names the user the command netprobe starts runs as (a -p process keeps its own)"
        ))),
        _ => Ok(()),
    }
}

/// Who a launched command runs as: ids and groups from the user database (passwd(5), group(5)),
/// and the variables `sudo -u` and `runuser -u` set for that user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// Supplementary groups, as getgrouplist(3) lists them (the primary group included).
    pub groups: Vec<libc::gid_t>,
    pub home: String,
}

/// One passwd(5) entry, copied out of getpwnam_r(3)/getpwuid_r(3)'s buffer.
struct Passwd {
    name: CString,
    uid: libc::uid_t,
    gid: libc::gid_t,
    home: String,
}

/// Looks `user` up by name, or by uid when it is all digits and no user has that name (as
/// `sudo -u` and `setpriv --reuid` accept either).
fn passwd_entry(user: &str) -> std::result::Result<Option<Passwd>, std::io::Error> {
    let by_name =
        CString::new(user).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    if let Some(p) = passwd_lookup(|pwd, buf, len, res| {
        // SAFETY: all pointers are valid for the duration of the call; `buf` holds `len` bytes.
        unsafe { libc::getpwnam_r(by_name.as_ptr(), pwd, buf, len, res) }
    })? {
        return Ok(Some(p));
    }
    match user.parse::<libc::uid_t>() {
        Ok(uid) if user.bytes().all(|b| b.is_ascii_digit()) => {
            passwd_lookup(|pwd, buf, len, res| {
                // SAFETY: as above.
                unsafe { libc::getpwuid_r(uid, pwd, buf, len, res) }
            })
        }
        _ => Ok(None),
    }
}

/// Calls a getpw*_r function with a buffer grown on ERANGE (getpwnam_r(3)).
fn passwd_lookup(
    call: impl Fn(
        *mut libc::passwd,
        *mut libc::c_char,
        libc::size_t,
        *mut *mut libc::passwd,
    ) -> libc::c_int,
) -> std::result::Result<Option<Passwd>, std::io::Error> {
    let mut len = 1024usize;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        // SAFETY: an all-zero passwd is a valid value of this plain C struct.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut pwd, buf.as_mut_ptr(), len, &mut res);
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 4;
            continue;
        }
        // "not found" is rc 0 with a null result, or (some NSS modules) ENOENT, ESRCH, EBADF
        // or EPERM (getpwnam_r(3), RETURN VALUE).
        if res.is_null() {
            return match rc {
                0 | libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => Ok(None),
                e => Err(std::io::Error::from_raw_os_error(e)),
            };
        }
        // SAFETY: on success the strings point into `buf`, alive until the end of this scope.
        let (name, home) = unsafe {
            (
                CStr::from_ptr(pwd.pw_name).to_owned(),
                CStr::from_ptr(pwd.pw_dir).to_string_lossy().into_owned(),
            )
        };
        return Ok(Some(Passwd {
            name,
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            home,
        }));
    }
}

/// The groups of `name` whose primary group is `gid`, by getgrouplist(3) (grown until they fit).
fn group_list(name: &CStr, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let mut n: libc::c_int = 32;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let mut got = n;
        // SAFETY: `groups` holds `got` entries; getgrouplist writes at most that many and sets
        // `got` to the number it found.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut got) };
        if rc >= 0 {
            groups.truncate(got.max(0) as usize);
            return groups;
        }
        // -1: too small; `got` holds the number needed (glibc), else try twice the size.
        n = if got > n { got } else { n.saturating_mul(2) };
        if n > 65536 {
            return vec![gid];
        }
    }
}

impl RunAs {
    /// The user `user` names (a name, or a numeric uid that has a passwd entry); a one-line
    /// error when the user database has no such user.
    pub fn lookup(user: &str) -> Result<RunAs> {
        let p = match passwd_entry(user) {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Err(Error::usage(format!(
                    "--user {user}: no such user in the user database (getent passwd {user} finds nothing): give an existing user name or uid"
                )))
            }
            Err(e) => {
                return Err(Error::usage(format!(
                    "--user {user}: looking the user up failed ({e}): check /etc/nsswitch.conf and the user database"
                )))
            }
        };
        let groups = group_list(&p.name, p.gid);
        let who = RunAs {
            name: p.name.to_string_lossy().into_owned(),
            uid: p.uid,
            gid: p.gid,
            groups,
            home: p.home,
        };
        who.check_can_switch(CapSet::effective())?;
        Ok(who)
    }

    /// The capabilities the drop needs, checked before anything is placed: setgroups(2) always
    /// needs CAP_SETGID; setuid(2) to another uid than netprobe's needs CAP_SETUID.
    fn check_can_switch(&self, have: CapSet) -> Result<()> {
        // SAFETY: getuid(2) has no preconditions and cannot fail.
        let same_uid = unsafe { libc::getuid() == self.uid && libc::geteuid() == self.uid };
        let mut needed = vec![Capability::SetUid, Capability::SetGid];
        if same_uid {
            needed.remove(0);
        }
        let missing = have.missing(&needed);
        if missing.is_empty() {
            return Ok(());
        }
        Err(Error::usage(format!(
            "--user {}: switching the command to that user needs {}, which this process lacks: run netprobe as root or grant it {}",
            self.name,
            capabilities::names(&missing),
            capabilities::names(&missing)
        )))
    }

    /// HOME, USER and LOGNAME for the command, as `sudo -u` (sudoers(5), env_reset) and
    /// `runuser -u` (su(1): HOME, and USER and LOGNAME for a target other than root) set them.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), self.home.clone()),
            ("USER".into(), self.name.clone()),
            ("LOGNAME".into(), self.name.clone()),
        ]
    }
}

/// What failed in the child while dropping privileges, sent back over the exec-error pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DropStep {
    Exec = 0,
    ClearAmbient = 1,
    Setgroups = 2,
    Setgid = 3,
    Setuid = 4,
    ClearCapabilities = 5,
    /// The ids are not the target's after the calls, or setuid(0) succeeded.
    Verify = 6,
}

impl DropStep {
    pub fn from_code(code: i32) -> DropStep {
        match code {
            1 => DropStep::ClearAmbient,
            2 => DropStep::Setgroups,
            3 => DropStep::Setgid,
            4 => DropStep::Setuid,
            5 => DropStep::ClearCapabilities,
            6 => DropStep::Verify,
            _ => DropStep::Exec,
        }
    }

    /// The call that failed, and the capability it needs when it is one.
    pub fn describe(self) -> &'static str {
        match self {
            DropStep::Exec => "execve",
            DropStep::ClearAmbient => "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            DropStep::Setgroups => "setgroups (needs CAP_SETGID)",
            DropStep::Setgid => "setgid (needs CAP_SETGID)",
            DropStep::Setuid => "setuid (needs CAP_SETUID)",
            DropStep::ClearCapabilities => "capset (clearing the capabilities left)",
            DropStep::Verify => {
                "checking the drop (the ids are not the target's, or setuid(0) still succeeds)"
            }
        }
    }
}

/// capset(2)'s header and data, version 3 (linux/capability.h: two 32-bit words per set).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3` of linux/capability.h.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Drops to `who` in the forked child: ambient capabilities cleared (else a non-root netprobe's
/// ambient set would pass to the command: capabilities(7), "Transformation of capabilities
/// during execve()"), then setgroups, setgid, setuid, then every capability left cleared (a
/// non-root netprobe keeps its permitted set across a setuid to its own uid), then checked.
///
/// # Safety
/// Only for the child between fork and exec: it makes async-signal-safe system calls only and
/// allocates nothing (`who.groups` was allocated before the fork).
pub unsafe fn drop_privileges(who: &RunAs) -> std::result::Result<(), (DropStep, i32)> {
    let errno = || *libc::__errno_location();
    if libc::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL,
        0,
        0,
        0,
    ) != 0
        && errno() != libc::EINVAL
    {
        return Err((DropStep::ClearAmbient, errno()));
    }
    if libc::setgroups(who.groups.len(), who.groups.as_ptr()) != 0 {
        return Err((DropStep::Setgroups, errno()));
    }
    if libc::setgid(who.gid) != 0 {
        return Err((DropStep::Setgid, errno()));
    }
    if libc::setuid(who.uid) != 0 {
        return Err((DropStep::Setuid, errno()));
    }
    if who.uid != 0 {
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) != 0
        {
            return Err((DropStep::ClearCapabilities, errno()));
        }
    }
    let ids_right = libc::getuid() == who.uid
        && libc::geteuid() == who.uid
        && libc::getgid() == who.gid
        && libc::getegid() == who.gid;
    if !ids_right || (who.uid != 0 && libc::setuid(0) != -1) {
        return Err((DropStep::Verify, 0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_by_name_and_by_uid() {
        let by_name = RunAs::lookup("root").unwrap();
        assert_eq!((by_name.uid, by_name.gid), (0, 0));
        assert_eq!(by_name.name, "root");
        assert!(by_name.groups.contains(&0));
        assert_eq!(RunAs::lookup("0").unwrap(), by_name);
        let env = by_name.env();
        assert!(env.contains(&("USER".into(), "root".into())));
        assert!(env.contains(&("LOGNAME".into(), "root".into())));
        assert!(env.iter().any(|(k, _)| k == "HOME"));
    }

    #[test]
    fn an_unknown_user_is_one_line_naming_it() {
        let e = RunAs::lookup("no-such-user-np").unwrap_err().to_string();
        assert!(e.contains("--user no-such-user-np: no such user"), "{e}");
        assert!(!e.contains('\n'));
        let e = RunAs::lookup("4000000000").unwrap_err().to_string();
        assert!(e.contains("no such user"), "{e}");
    }
}
