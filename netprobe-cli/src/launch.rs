//! `-c 'CMD ARGS'`: start a command paused before its first instruction, so probes and the pid
//! filter are in place when it runs.
//!
//! netprobe forks; the child blocks reading a "gate" pipe; netprobe places the probes with the
//! child's pid in the filter, then writes one byte to the gate and the child execs the command. An
//! exec failure comes back through a close-on-exec pipe (as std's `Command` does). std's `Command`
//! cannot be used: its `spawn` waits for the exec, which is what must not happen yet.
//!
//! With `--user`, the child drops to that user once released, right before the exec
//! ([`crate::run_as`]); a failed drop comes back through the same pipe and nothing is run.

use crate::error::{Error, Result};
use crate::run_as::{self, DropStep, RunAs};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A forked child waiting at the gate, or running after [`PausedChild::release`].
#[derive(Debug)]
pub struct PausedChild {
    pid: libc::pid_t,
    gate: Option<OwnedFd>,
    exec_err: Option<OwnedFd>,
    pub exe: PathBuf,
    /// `--user`: the name the child drops to before the exec.
    user: Option<String>,
    reaped: Option<i32>,
}

/// Splits a command line like a POSIX shell does (quotes, backslashes), without running a shell.
pub fn split_command(cmd: &str) -> Result<Vec<String>> {
    let words = shell_words::split(cmd)
        .map_err(|e| Error::usage(format!("cannot parse -c '{cmd}': {e}")))?;
    if words.is_empty() {
        return Err(Error::usage("-c needs a command"));
    }
    Ok(words)
}

/// The executable `program` names: a path as given (must exist), else the first match on `PATH`.
pub fn find_program(program: &str) -> Result<PathBuf> {
    let is_exec = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        if is_exec(&p) {
            return std::fs::canonicalize(&p)
                .map_err(|e| Error::Core(netprobe_core::Error::io(&p, e)));
        }
        return Err(Error::usage(format!(
            "-c: {program} is not an executable file"
        )));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(program);
        if is_exec(&p) {
            return std::fs::canonicalize(&p)
                .map_err(|e| Error::Core(netprobe_core::Error::io(&p, e)));
        }
    }
    Err(Error::usage(format!(
        "-c: command '{program}' not found on PATH; give its path"
    )))
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl PausedChild {
    /// Forks a child that will exec `argv` (argv[0] resolved to `exe`) once released.
    ///
    /// The child only makes async-signal-safe calls between fork and exec (everything it needs is
    /// prepared before the fork), so this is safe from a multi-threaded process too.
    pub fn spawn(argv: &[String]) -> Result<PausedChild> {
        PausedChild::spawn_with_env(argv, &[], None)
    }

    /// [`PausedChild::spawn`] with variables added to (or replacing those of) netprobe's own
    /// environment, e.g. `DOTNET_TieredCompilation=0` for `--keep-r2r`, and run as `user` when
    /// given (its HOME, USER and LOGNAME replace netprobe's).
    pub fn spawn_with_env(
        argv: &[String],
        env: &[(String, String)],
        user: Option<&RunAs>,
    ) -> Result<PausedChild> {
        let user_env = user.map(RunAs::env).unwrap_or_default();
        let env: Vec<(String, String)> = env.iter().chain(&user_env).cloned().collect();
        let exe = find_program(
            argv.first()
                .ok_or_else(|| Error::usage("-c needs a command"))?,
        )?;
        let c_exe = CString::new(exe.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::usage("-c: command contains a NUL byte"))?;
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::usage("-c: an argument contains a NUL byte"))?;
        let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
        c_argv.push(std::ptr::null());
        let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(n, _)| k.as_os_str() == n.as_str()))
            .collect();
        vars.extend(env.iter().map(|(k, v)| (k.into(), v.into())));
        let c_env: Vec<CString> = vars
            .iter()
            .filter_map(|(k, v)| {
                let mut kv = k.as_encoded_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_encoded_bytes());
                CString::new(kv).ok()
            })
            .collect();
        let mut c_envp: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
        c_envp.push(std::ptr::null());
        let (gate_r, gate_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        // SAFETY: the child below makes only async-signal-safe calls before exec or _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::io("fork", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // Child.
            // SAFETY: async-signal-safe calls only; all buffers were prepared before fork.
            unsafe {
                // Handlers and ignored signals of netprobe must not leak into the command
                // (Rust ignores SIGPIPE; netprobe handles SIGINT/SIGTERM/SIGHUP).
                for sig in [libc::SIGPIPE, libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                // The parent's ends: with our own copy of the gate's write end open, the read
                // below would never see EOF when netprobe dies before releasing us, and we would
                // wait forever, holding (inherited, until exec) the write end of the watchdog's
                // pipe, so the watchdog would never learn that netprobe died.
                libc::close(gate_w.as_raw_fd());
                libc::close(err_r.as_raw_fd());
                let mut b = [0u8; 1];
                let n = loop {
                    let n = libc::read(gate_r.as_raw_fd(), b.as_mut_ptr().cast(), 1);
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break n;
                };
                if n != 1 {
                    // netprobe went away before releasing us: do not run the command untraced.
                    libc::_exit(126);
                }
                let dropped = match user {
                    Some(u) => run_as::drop_privileges(u),
                    None => Ok(()),
                };
                let (step, errno) = match dropped {
                    Err(failed) => failed,
                    Ok(()) => {
                        libc::execve(c_exe.as_ptr(), c_argv.as_ptr(), c_envp.as_ptr());
                        (DropStep::Exec, *libc::__errno_location())
                    }
                };
                let mut report = [0u8; 8];
                report[..4].copy_from_slice(&(step as i32).to_ne_bytes());
                report[4..].copy_from_slice(&errno.to_ne_bytes());
                libc::write(err_w.as_raw_fd(), report.as_ptr().cast(), report.len());
                libc::_exit(127);
            }
        }
        drop(gate_r);
        drop(err_w);
        Ok(PausedChild {
            pid,
            gate: Some(gate_w),
            exec_err: Some(err_r),
            exe,
            user: user.map(|u| u.name.clone()),
            reaped: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the child exec the command; returns once the exec happened (or failed).
    pub fn release(&mut self) -> Result<()> {
        if let Some(gate) = self.gate.take() {
            let b = [1u8];
            // SAFETY: writing one byte from a valid buffer.
            unsafe { libc::write(gate.as_raw_fd(), b.as_ptr().cast(), 1) };
        }
        if let Some(err) = self.exec_err.take() {
            let mut report = [0u8; 8];
            // SAFETY: reading into a valid buffer; EOF (0) means the exec succeeded. The child
            // writes its 8 bytes at once, below PIPE_BUF, so they arrive whole (pipe(7)).
            let n = unsafe { libc::read(err.as_raw_fd(), report.as_mut_ptr().cast(), 8) };
            if n == 8 {
                let word = |i: usize| i32::from_ne_bytes(report[i..i + 4].try_into().unwrap());
                let (step, errno) = (DropStep::from_code(word(0)), word(4));
                self.wait();
                let why = std::io::Error::from_raw_os_error(errno);
                return Err(match (step, &self.user) {
                    (DropStep::Exec, None) => {
                        Error::usage(format!("-c: could not run {}: {why}", self.exe.display()))
                    }
                    (DropStep::Exec, Some(user)) => Error::usage(format!(
                        "-c: could not run {} as {user}: {why}: the user needs execute permission on it and every folder above it",
                        self.exe.display()
                    )),
                    (step, user) => Error::usage(format!(
                        "--user {}: dropping privileges failed at {} ({why}): nothing was run; run netprobe as root or with CAP_SETUID and CAP_SETGID",
                        user.as_deref().unwrap_or("?"),
                        step.describe()
                    )),
                });
            }
        }
        Ok(())
    }

    /// Reaps the child if it has exited; its exit status (as from `waitpid`).
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.reaped.is_none() {
            let mut status = 0;
            // SAFETY: non-blocking reap of our own child.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                self.reaped = Some(status);
            }
        }
        self.reaped
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self) -> i32 {
        if let Some(s) = self.reaped {
            return s;
        }
        let mut status = 0;
        // SAFETY: blocking reap of our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        self.reaped = Some(status);
        status
    }

    /// Ends the child if it still runs (SIGTERM, then SIGKILL after a grace period) and reaps it.
    pub fn terminate(&mut self) {
        if self.try_wait().is_some() {
            return;
        }
        // Closing the gate makes a paused child exit by itself.
        self.gate.take();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        for _ in 0..100 {
            if self.try_wait().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.wait();
    }
}

impl Drop for PausedChild {
    fn drop(&mut self) {
        if self.reaped.is_none() && self.gate.is_some() {
            self.terminate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_command("prog 'a b' \"c d\" e\\ f").unwrap(),
            ["prog", "a b", "c d", "e f"]
        );
        assert!(split_command("").is_err());
        assert!(split_command("'open").is_err());
    }

    #[test]
    fn paused_child_runs_only_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("touch {}", marker.display()),
        ];
        let mut c = PausedChild::spawn(&argv).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists());
        c.release().unwrap();
        assert_eq!(c.wait(), 0);
        assert!(marker.exists());
    }

    #[test]
    fn added_variables_reach_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("env");
        let argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("echo \"$NP_TEST_VAR\" > {}", out.display()),
        ];
        let mut c =
            PausedChild::spawn_with_env(&argv, &[("NP_TEST_VAR".into(), "kept".into())], None)
                .unwrap();
        c.release().unwrap();
        assert_eq!(c.wait(), 0);
        assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "kept");
    }

    #[test]
    fn exec_failure_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("notexec");
        std::fs::write(&f, "#!/nonexistent/interp\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = PausedChild::spawn(&[f.display().to_string()]).unwrap();
        let e = c.release().unwrap_err();
        assert!(e.to_string().contains("could not run"), "{e}");
    }

    #[test]
    fn unreleased_child_exits_without_running() {
        let c = PausedChild::spawn(&["true".to_string()]).unwrap();
        drop(c);
    }
}
