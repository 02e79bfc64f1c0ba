//! .NET's additions to spec resolution:
//! - a `-c` command that runs a .NET app (`dotnet app.dll`, an app host, a self-contained app)
//!   is not running yet, so its framework assemblies cannot be found in its maps: they are found
//!   the way the host finds them (the app's runtimeconfig.json names the framework and version,
//!   `DOTNET_ROOT`/the `dotnet` beside the host holds `shared/<framework>/<version>/`), and bare
//!   patterns and assembly names (`System.Private.CoreLib.dll:...`) resolve there;
//! - a pattern that names a method which exists but has no precompiled code (its assembly is
//!   IL-only, or crossgen left the method to the JIT) gets that explanation instead of "no
//!   match".

use super::runtime::{
    parse_product_version, read_runtimeconfig, runtimeconfig_of_command, version_from_path,
    version_from_sccsid, RuntimeVersion,
};
use crate::error::{Error, Result};
use crate::spec::{Location, ProbeSpec, SpecTarget, Targeting};
use netprobe_core::dotnet::Assembly;
use netprobe_core::matching::Pattern;
use netprobe_core::normalize::MappedImage;
use netprobe_core::process::Process;
use netprobe_core::resolve::{find_image, open_path, ProbeTarget};
use netprobe_core::symbol::{Address, Symbol, SymbolKind, SymbolOrigin};
use serde_json::Value as Json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A `-c` command that runs a .NET app, and where its managed code lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotnetCommand {
    /// The app's main assembly (`app.dll`), when the command names one.
    pub app: Option<PathBuf>,
    pub runtimeconfig: Option<PathBuf>,
    /// Folders holding the framework assemblies, `Microsoft.NETCore.App` first (for a
    /// self-contained app: the app's folder).
    pub framework_dirs: Vec<PathBuf>,
    pub version: Option<RuntimeVersion>,
    /// A single-file app's runtimeconfig.json, read from inside its bundle, with the path it is
    /// shown under (its assemblies are searched through the bundle, not `framework_dirs`).
    pub bundled_config: Option<(PathBuf, Json)>,
}

/// Where a framework-dependent app host looks for the runtime (dotnet/runtime
/// `docs/design/features/host-probing.md`, "global install location").
fn install_locations() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(r) = std::env::var_os("DOTNET_ROOT") {
        out.push(PathBuf::from(r));
    }
    if let Ok(s) = std::fs::read_to_string("/etc/dotnet/install_location") {
        if let Some(l) = s.lines().map(str::trim).find(|l| l.starts_with('/')) {
            out.push(PathBuf::from(l));
        }
    }
    out.push("/usr/share/dotnet".into());
    out.push("/usr/lib/dotnet".into());
    out
}

/// The folder of framework `name` at `version` under `root`, with the host's default roll-forward
/// (`Minor`: the same major, the lowest minor at or above the requested one, its highest patch);
/// `None` when no installed version fits.
pub fn framework_dir(root: &Path, name: &str, version: &str) -> Option<PathBuf> {
    let want = parse_product_version(version)?;
    let want_minor = want.minor.unwrap_or(0);
    let base = root.join("shared").join(name);
    let mut best: Option<(u32, u32, String)> = None;
    for e in std::fs::read_dir(&base).ok()?.flatten() {
        let v = e.file_name().to_string_lossy().into_owned();
        let mut parts = v.split(['.', '-']);
        let (Some(Ok(major)), Some(Ok(minor)), patch) = (
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<u32>),
            parts
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0),
        ) else {
            continue;
        };
        if major != want.major || minor < want_minor || v.contains('-') {
            continue;
        }
        let better = match &best {
            None => true,
            Some((bm, bp, _)) => minor < *bm || (minor == *bm && patch > *bp),
        };
        if better {
            best = Some((minor, patch, v));
        }
    }
    best.map(|(_, _, v)| base.join(v))
}

/// The frameworks a runtimeconfig.json references (`framework` or `frameworks`), as
/// `(name, version)`.
fn referenced_frameworks(config: &Json) -> Vec<(String, String)> {
    let opts = &config["runtimeOptions"];
    let mut list: Vec<&Json> = Vec::new();
    if opts["framework"].is_object() {
        list.push(&opts["framework"]);
    }
    if let Some(a) = opts["frameworks"].as_array() {
        list.extend(a);
    }
    list.iter()
        .filter_map(|f| {
            Some((
                f["name"].as_str()?.to_string(),
                f["version"].as_str()?.to_string(),
            ))
        })
        .collect()
}

impl DotnetCommand {
    /// What `argv` (with `argv[0]` resolved to `exe`) runs, when it is a .NET app: the `dotnet`
    /// muxer with an app, an app host with its runtimeconfig.json, or a self-contained app
    /// (`libcoreclr.so` beside it). `None` for anything else.
    pub fn detect(argv: &[String], exe: &Path) -> Option<DotnetCommand> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let is_muxer = exe.file_name().is_some_and(|n| n == "dotnet");
        let exe_dir = exe.parent().unwrap_or(Path::new("/"));
        let runtimeconfig = runtimeconfig_of_command(argv, exe, &cwd);
        let app = if is_muxer {
            argv.iter()
                .skip(1)
                .find(|a| a.ends_with(".dll") || a.ends_with(".exe"))
                .map(|a| {
                    let p = Path::new(a);
                    if p.is_absolute() {
                        p.to_path_buf()
                    } else {
                        cwd.join(p)
                    }
                })
        } else {
            let dll = exe.with_extension("dll");
            dll.exists().then_some(dll)
        };
        let mut framework_dirs = Vec::new();
        let self_contained = !is_muxer && exe_dir.join("libcoreclr.so").exists();
        if self_contained {
            framework_dirs.push(exe_dir.to_path_buf());
        } else if let Some(cfg) = runtimeconfig.as_deref().and_then(read_runtimeconfig) {
            let roots: Vec<PathBuf> = if is_muxer {
                vec![exe_dir.to_path_buf()]
            } else {
                install_locations()
            };
            let mut frameworks = referenced_frameworks(&cfg);
            // The core framework first: CoreLib answers most patterns.
            frameworks.sort_by_key(|(n, _)| n != "Microsoft.NETCore.App");
            for (name, version) in frameworks {
                if let Some(d) = roots.iter().find_map(|r| framework_dir(r, &name, &version)) {
                    framework_dirs.push(d);
                }
            }
        }
        if !is_muxer && runtimeconfig.is_none() && !self_contained {
            // A single-file app: the runtime is linked into its host and its runtimeconfig is
            // bundled (dotnet/runtime `src/native/corehost/apphost/static/`).
            let bundled_config = super::runtime::bundled_runtimeconfig(exe)?;
            return Some(DotnetCommand {
                app: None,
                runtimeconfig: None,
                framework_dirs: Vec::new(),
                version: super::runtime::single_file_runtime(exe),
                bundled_config: Some(bundled_config),
            });
        }
        if is_muxer && app.is_none() {
            return None;
        }
        let version = framework_dirs.first().and_then(|d| {
            version_from_path(&d.join("libcoreclr.so")).or_else(|| {
                let lib = d.join("libcoreclr.so");
                netprobe_core::regular_file::read_capped(
                    &lib,
                    netprobe_core::regular_file::cap::LIBRARY,
                    "libcoreclr.so",
                )
                .ok()
                .and_then(|b| version_from_sccsid(&b))
            })
        });
        Some(DotnetCommand {
            app,
            runtimeconfig,
            framework_dirs,
            version,
            bundled_config: None,
        })
    }

    /// The assemblies a bare pattern is searched in: the app, the other assemblies of its folder,
    /// then each framework folder's (CoreLib first).
    pub fn assemblies(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let add_dir = |dir: &Path, out: &mut Vec<PathBuf>| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "dll"))
                        .collect()
                })
                .unwrap_or_default();
            files.sort_by_key(|p| {
                (
                    p.file_name()
                        .is_none_or(|n| n != "System.Private.CoreLib.dll"),
                    p.clone(),
                )
            });
            for f in files {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        };
        if let Some(app) = &self.app {
            out.push(app.clone());
            if let Some(dir) = app.parent() {
                add_dir(dir, &mut out);
            }
        }
        for d in &self.framework_dirs {
            add_dir(d, &mut out);
        }
        out
    }

    /// The assembly `name` names among [`DotnetCommand::assemblies`]: a file name
    /// (`System.Console.dll`) or a simple name (`System.Console`). `None` when there is none.
    pub fn find_assembly(&self, name: &str) -> Option<PathBuf> {
        let all = self.assemblies();
        all.iter()
            .find(|p| p.file_name().is_some_and(|n| n == name))
            .or_else(|| {
                all.iter()
                    .find(|p| p.file_stem().is_some_and(|n| n == name))
            })
            .cloned()
    }
}

fn location_of(path: &Path, s: &Symbol) -> Option<Location> {
    Some(Location::from(ProbeTarget {
        image: path.to_path_buf(),
        probe_path: path.to_path_buf(),
        file_offset: s.file_offset?,
        symbol: s.clone(),
        runtime_addr: None,
    }))
}

/// Resolves `spec` in the assemblies of a `.NET` `-c` command.
fn resolve_in_command(
    spec: &ProbeSpec,
    pattern: &str,
    cmd: &DotnetCommand,
) -> Result<Vec<Location>> {
    let pat = Pattern::parse(pattern)?;
    let (images, explicit) = match spec.image.as_deref() {
        Some(name) => {
            let p = cmd.find_assembly(name).ok_or_else(|| Error::BadSpec {
                spec: spec.text.clone(),
                why: format!(
                    "no assembly '{name}' in the app's folder or its framework ({}); name one of their .dll files or give a path",
                    cmd.framework_dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
            (vec![p], true)
        }
        None => (cmd.assemblies(), false),
    };
    let mut out = Vec::new();
    let mut seen: Vec<Symbol> = Vec::new();
    for img in &images {
        let symbols = match netprobe_core::image::load_symbols(img) {
            Ok(s) => s,
            Err(e) if explicit => return Err(e.into()),
            Err(_) => continue,
        };
        out.extend(
            pat.select(&symbols)
                .into_iter()
                .filter_map(|s| location_of(img, s)),
        );
        if out.is_empty() {
            seen.extend(
                symbols
                    .into_iter()
                    .filter(|s| s.kind == SymbolKind::ManagedMethod),
            );
        }
    }
    if out.is_empty() {
        if let Some(e) = explain(&pat, &images) {
            return Err(e);
        }
        return Err(netprobe_core::Error::NoMatch {
            pattern: pattern.to_string(),
            image: match spec.image.as_deref() {
                Some(i) => i.to_string(),
                None => "the app and its framework".into(),
            },
            nearest: pat.nearest(&seen, 5),
        }
        .into());
    }
    Ok(out)
}

/// Resolves `spec` among the assemblies of the .NET `-c` command `cmd` (the app's folder and
/// its framework, found as the host finds them); `None` when the spec is resolved like any other
/// (it names the executable or a path, or the app is a single-file bundle, whose assemblies the
/// core's resolution searches inside it: `netprobe_core::resolve::resolve_file`).
pub fn resolve_in_dotnet_command(
    spec: &ProbeSpec,
    targeting: &Targeting,
    cmd: &DotnetCommand,
) -> Option<Result<Vec<Location>>> {
    let (Targeting::Command { exe }, SpecTarget::Pattern(p)) = (targeting, &spec.target) else {
        return None;
    };
    let names_exe = spec
        .image
        .as_deref()
        .is_some_and(|i| Some(std::ffi::OsStr::new(i)) == exe.file_name());
    let is_path = spec.image.as_deref().is_some_and(|i| i.contains('/'));
    if names_exe || is_path || cmd.bundled_config.is_some() || is_bundle(exe) {
        return None;
    }
    Some(resolve_in_command(spec, p, cmd))
}

fn is_bundle(exe: &Path) -> bool {
    netprobe_core::dotnet::bundle::Bundle::open(exe)
        .ok()
        .flatten()
        .is_some()
}

/// The managed assemblies mapped by the target processes (paths netprobe opens), restricted to
/// `image` when given.
fn mapped_assemblies(pids: &[u32], image: Option<&str>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(process) = Process::open(pid) else {
            continue;
        };
        let Ok(maps) = process.maps() else { continue };
        let images = MappedImage::group(&maps);
        let chosen: Vec<&MappedImage> = match image {
            Some(i) => find_image(pid, &images, i).into_iter().collect(),
            None => images.iter().collect(),
        };
        for img in chosen {
            // A file that no longer opens as the process maps it is not searched.
            let Ok(opened) = open_path(&process, img) else {
                continue;
            };
            let bundled = bundled_assemblies(&opened);
            if !bundled.is_empty() {
                out.extend(
                    bundled
                        .into_iter()
                        .filter(|p| !out.contains(p))
                        .collect::<Vec<_>>(),
                );
                continue;
            }
            let is_pe = img
                .path
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("dll") || x.eq_ignore_ascii_case("exe"));
            if is_pe && !out.contains(&opened) {
                out.push(opened);
            }
        }
    }
    out
}

/// Turns a "no match" / "not code" failure into the JIT explanation when the pattern names a
/// method that exists without precompiled code in one of the target's assemblies; any other
/// error comes back unchanged.
pub fn explain_failure(e: Error, spec: &ProbeSpec, targeting: &Targeting) -> Error {
    let relevant = matches!(
        e,
        Error::Core(netprobe_core::Error::NoMatch { .. })
            | Error::Core(netprobe_core::Error::NoExecutableMapping { .. })
    );
    let (true, SpecTarget::Pattern(p)) = (relevant, &spec.target) else {
        return e;
    };
    let Ok(pat) = Pattern::parse(p) else { return e };
    let images = match targeting {
        Targeting::Pids(pids) => mapped_assemblies(pids, spec.image.as_deref()),
        // A single-file app: the assemblies inside it (its own code is usually IL-only).
        Targeting::Command { exe } => bundled_assemblies(exe),
        Targeting::SystemWide => return e,
    };
    explain(&pat, &images).unwrap_or(e)
}

/// The member paths of the assemblies a .NET single-file bundle at `path` maps (empty for any
/// other file).
fn bundled_assemblies(path: &Path) -> Vec<PathBuf> {
    match netprobe_core::dotnet::bundle::Bundle::open(path) {
        Ok(Some(b)) => b.mapped_assembly_paths(),
        _ => Vec::new(),
    }
}

/// Why `pattern` selects no probe-able method in `assemblies` although it names a method there:
/// the assembly is IL-only ([`netprobe_core::Error::JitOnlyMethod`]) or has no precompiled code
/// for that method ([`netprobe_core::Error::NotPrecompiled`]). `None` when the pattern names no
/// method of theirs.
pub fn explain(pattern: &Pattern, assemblies: &[PathBuf]) -> Option<Error> {
    for path in assemblies {
        let Ok(asm) = Assembly::open(path) else {
            continue;
        };
        let precompiled: HashSet<u32> = match asm.r2r() {
            None => HashSet::new(),
            Some(_) => match asm.methods() {
                Ok(m) => m.iter().map(|m| m.token).collect(),
                Err(_) => continue,
            },
        };
        let without_code: Vec<Symbol> = asm
            .method_def_names()
            .into_iter()
            .filter(|(token, _)| !precompiled.contains(token))
            .map(|(_, name)| Symbol {
                name,
                kind: SymbolKind::ManagedMethod,
                origin: SymbolOrigin::ReadyToRun,
                address: Address::Rva(netprobe_core::addr::Rva(0)),
                size: None,
                file_offset: None,
            })
            .collect();
        let Some(hit) = pattern.select(&without_code).into_iter().next() else {
            continue;
        };
        let method = hit.name.clone();
        let path = asm.path().to_path_buf();
        return Some(Error::Core(if asm.r2r().is_none() {
            netprobe_core::Error::JitOnlyMethod { method, path }
        } else {
            netprobe_core::Error::NotPrecompiled { method, path }
        }));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_roll_forward_takes_the_latest_patch_of_the_lowest_minor() {
        let root = tempfile::tempdir().unwrap();
        for v in ["8.0.1", "8.0.4", "8.1.0", "9.0.0", "8.0.5-preview.1"] {
            std::fs::create_dir_all(root.path().join("shared/Microsoft.NETCore.App").join(v))
                .unwrap();
        }
        let d = framework_dir(root.path(), "Microsoft.NETCore.App", "8.0.0").unwrap();
        assert!(d.ends_with("8.0.4"), "{}", d.display());
        let d = framework_dir(root.path(), "Microsoft.NETCore.App", "8.1.0").unwrap();
        assert!(d.ends_with("8.1.0"));
        assert_eq!(
            framework_dir(root.path(), "Microsoft.NETCore.App", "7.0.0"),
            None
        );
    }

    #[test]
    fn detects_a_muxer_command_and_its_framework() {
        let root = tempfile::tempdir().unwrap();
        let fw = root.path().join("shared/Microsoft.NETCore.App/8.0.4");
        std::fs::create_dir_all(&fw).unwrap();
        std::fs::write(fw.join("System.Private.CoreLib.dll"), b"").unwrap();
        std::fs::write(fw.join("System.Console.dll"), b"").unwrap();
        let app_dir = tempfile::tempdir().unwrap();
        let app = app_dir.path().join("app.dll");
        std::fs::write(&app, b"").unwrap();
        std::fs::write(
            app_dir.path().join("app.runtimeconfig.json"),
            br#"{"runtimeOptions":{"tfm":"net8.0","framework":{"name":"Microsoft.NETCore.App","version":"8.0.0"}}}"#,
        )
        .unwrap();
        let exe = root.path().join("dotnet");
        let argv = vec![
            "dotnet".to_string(),
            app.display().to_string(),
            "serve".into(),
        ];
        let cmd = DotnetCommand::detect(&argv, &exe).unwrap();
        assert_eq!(cmd.app.as_deref(), Some(app.as_path()));
        assert_eq!(cmd.framework_dirs, std::slice::from_ref(&fw));
        assert_eq!(cmd.version.as_ref().map(|v| v.major), Some(8));
        let all = cmd.assemblies();
        assert_eq!(all[0], app);
        assert_eq!(all[1], fw.join("System.Private.CoreLib.dll"));
        assert_eq!(
            cmd.find_assembly("System.Console"),
            Some(fw.join("System.Console.dll"))
        );
        // Not a .NET command.
        assert_eq!(
            DotnetCommand::detect(&["ls".into()], Path::new("/bin/ls")),
            None
        );
    }
}
