//! The root file systems of the harness's images, assembled from host files (no registry, no
//! base image): the machines this runs on reach no image registry (see `scripts/docker-up.sh`).
//!
//! | image            | contents                                                                  |
//! |------------------|---------------------------------------------------------------------------|
//! | `dotnet8`/`dotnet31` | a .NET runtime root at `/usr/share/dotnet` (from `$NETPROBE_CACHE/dotnet/<v>/`, made by `sample-app/dotnet/fetch-runtimes.sh`), the host libraries ldd names for its host and native libraries, the app under `/app` |
//! | `go`             | the static Go binary under `/app` (FROM scratch equivalent)               |
//! | `sidecar`        | the release `netprobe` binary at `/usr/local/bin/netprobe`, its libraries, and busybox (a shell to exec into, `mount`, `ls`) |
//! | `fixture`        | a C fixture program under `/app` (its libraries if it is dynamic)         |

use crate::rootfs::Rootfs;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Where the .NET runtime root sits inside the app images (as in Microsoft's images).
pub const DOTNET_ROOT: &str = "/usr/share/dotnet";
/// Where netprobe sits inside the sidecar image.
pub const SIDECAR_NETPROBE: &str = "/usr/local/bin/netprobe";

/// Busybox applets linked into the sidecar image: what a person exec'ing into it, or the tests,
/// use around netprobe.
const BUSYBOX_APPLETS: &[&str] = &[
    "sh",
    "ls",
    "cat",
    "mount",
    "umount",
    "sleep",
    "ps",
    "grep",
    "head",
    "tail",
    "wc",
    "echo",
    "test",
    "readlink",
    "stat",
    "env",
    "true",
    "false",
    "kill",
    "timeout",
    "id",
    "uname",
    "find",
    "sha256sum",
];

/// The .NET runtime root for a major version (`"8"`, `"3.1"`) in the cache:
/// `$NETPROBE_CACHE/dotnet/<major>/` holding `dotnet` and `shared/Microsoft.NETCore.App/<ver>/`.
pub fn dotnet_runtime_root(major: &str) -> PathBuf {
    fixtures::cache_dir().join("dotnet").join(major)
}

/// The versions under `<root>/shared/Microsoft.NETCore.App/`, sorted.
pub fn dotnet_runtime_versions(root: &Path) -> Result<Vec<String>> {
    let dir = root.join("shared/Microsoft.NETCore.App");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| {
            format!(
                "{} (run sample-app/dotnet/fetch-runtimes.sh)",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

/// Adds the host's busybox (static) at `/bin/busybox` with `applets` as symlinks in `/bin`.
pub fn add_busybox(root: &mut Rootfs, applets: &[&str]) -> Result<()> {
    let busybox =
        find_program("busybox").context("busybox is missing: apt-get install busybox-static")?;
    if !crate::rootfs::shared_libs(&busybox)?.is_empty() {
        bail!(
            "{} is dynamically linked: install busybox-static",
            busybox.display()
        );
    }
    root.file(&busybox, "/bin/busybox")?;
    for a in applets {
        root.symlink("busybox", &format!("/bin/{a}"))?;
    }
    Ok(())
}

/// The sidecar's root: netprobe, its libraries, busybox, `/tmp`.
pub fn sidecar_rootfs(netprobe: &Path) -> Result<Rootfs> {
    let mut root = Rootfs::new();
    root.elf_with_libs(netprobe, SIDECAR_NETPROBE)?;
    add_busybox(&mut root, BUSYBOX_APPLETS)?;
    root.dir("/tmp", 0o1777)?;
    root.dir("/sys/kernel/tracing", 0o755)?;
    Ok(root)
}

/// Dockerfile instructions for the sidecar image.
pub fn sidecar_changes() -> Vec<String> {
    vec![
        "ENV PATH=/usr/local/bin:/bin".into(),
        // Keeps the container up for `docker exec`; the tests and users run netprobe through it.
        r#"ENTRYPOINT ["/bin/sleep", "2147483647"]"#.into(),
    ]
}

/// A .NET app image's root: the runtime `runtime_root` at [`DOTNET_ROOT`], every library the
/// runtime's host and native libraries link against, and the files of `app_dir` under `/app`.
pub fn dotnet_rootfs(runtime_root: &Path, app_dir: Option<&Path>) -> Result<Rootfs> {
    let host = runtime_root.join("dotnet");
    if !host.is_file() {
        bail!(
            "no .NET host at {}: run sample-app/dotnet/fetch-runtimes.sh",
            host.display()
        );
    }
    let mut root = Rootfs::new();
    root.tree(runtime_root, DOTNET_ROOT)?;
    root.libs_of(&host)?;
    for so in find_files(runtime_root, ".so")? {
        root.libs_of(&so)?;
    }
    if let Some(app) = app_dir {
        root.tree(app, "/app")?;
    }
    root.dir("/tmp", 0o1777)?;
    Ok(root)
}

/// Dockerfile instructions for a .NET app image.
pub fn dotnet_changes() -> Vec<String> {
    vec![
        format!("ENV DOTNET_ROOT={DOTNET_ROOT}"),
        format!("ENV PATH={DOTNET_ROOT}:/bin"),
        // No ICU in the image; the runtime needs invariant globalization without it
        // (dotnet/runtime `docs/design/features/globalization-invariant-mode.md`).
        "ENV DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1".into(),
        "WORKDIR /app".into(),
    ]
}

/// An image root holding the program `binary` at `/app/<name>` (plus its libraries when it is
/// dynamically linked; none for a static Go or `-static` C program: a FROM scratch image).
pub fn program_rootfs(binary: &Path, name: &str) -> Result<Rootfs> {
    let mut root = Rootfs::new();
    root.elf_with_libs(binary, &format!("/app/{name}"))?;
    root.dir("/tmp", 0o1777)?;
    Ok(root)
}

/// The Go sample app (`sample-app/go`, built once by `fixtures::go`, default build flags) at
/// `/app/sampleapp` in an image imported as `owner`'s `role`; removed when the guard drops.
pub fn go_sample_app_image(
    owner: &crate::owner::Owner,
    role: &str,
) -> Result<crate::docker::ImageGuard> {
    let go_bin = fixtures::go::sample_app_variants().join("sampleapp-default");
    let rootfs = program_rootfs(&go_bin, "sampleapp")?;
    crate::docker::import(&rootfs, &owner.image_ref(role), &[])
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn find_files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let ft = e.file_type()?;
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && e.file_name().to_string_lossy().ends_with(suffix) {
                found.push(e.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `name` resolved on PATH (or as given when it contains a `/`).
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or(None)
}
