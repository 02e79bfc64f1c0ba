//! An image as a tarball in the layout `docker save` writes (Docker's image spec v1.2 archive:
//! `manifest.json`, the image config, one `layer.tar` per layer; moby `image/spec/v1.2.md`), made
//! from a [`Rootfs`] without any engine: `ctr images import` and `podman load` both read it, and
//! no registry is needed.
//!
//! The bytes are deterministic ([`Rootfs::write_tar`] is), so the tag is the layer's digest and
//! the file is cached in `$NETPROBE_CACHE/images/` between runs: made once, imported anywhere.

use crate::rootfs::Rootfs;
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The repository every archive of the harness is tagged in.
pub const REPOSITORY: &str = "netprobe-harness";

/// An image archive on disk and the name it carries.
#[derive(Clone, Debug)]
pub struct ImageArchive {
    /// The `.tar` file.
    pub path: PathBuf,
    /// The tag in the archive, `netprobe-harness/<role>:<first 16 hex digits of the layer
    /// digest>`; each runtime puts its default registry before it (`docker.io/` for containerd,
    /// `localhost/` for Podman), and says so when it imports.
    pub name: String,
}

/// The Go sample app (`sample-app/go`, default build flags) at `/app/sampleapp`, FROM scratch, as
/// an archive (the same root file system `harness::images::go_sample_app_image` imports into
/// Docker). Made once per content and cached.
pub fn go_sample_app() -> Result<ImageArchive> {
    let go_bin = fixtures::go::sample_app_variants().join("sampleapp-default");
    let rootfs = crate::images::program_rootfs(&go_bin, "sampleapp")?;
    write(
        &rootfs,
        "go-sampleapp",
        &fixtures::cache_dir().join("images"),
    )
}

/// Writes `rootfs` as the one-layer image `<role>` into `dir` unless the same content is already
/// there. The image has no command of its own: every container is given one.
pub fn write(rootfs: &Rootfs, role: &str, dir: &Path) -> Result<ImageArchive> {
    let mut layer = Vec::new();
    rootfs.write_tar(&mut layer)?;
    let layer_digest = hex(&Sha256::digest(&layer));
    let tag = &layer_digest[..16];
    let name = format!("{REPOSITORY}/{role}:{tag}");
    let path = dir.join(format!("{role}-{tag}.tar"));
    if path.is_file() {
        return Ok(ImageArchive { path, name });
    }
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/app:/bin"], "WorkingDir": "/app"},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
    });
    let config = serde_json::to_vec(&config)?;
    let config_name = format!("{}.json", hex(&Sha256::digest(&config)));
    let layer_name = format!("{layer_digest}/layer.tar");
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name,
        "RepoTags": [name],
        "Layers": [layer_name],
    }]))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Written beside under a name no other writer has, then renamed: a concurrent run never
    // reads half a file, and two tests of one process writing the same image (the same pid)
    // never rename each other's file away.
    let partial = tempfile::Builder::new()
        .prefix(&format!(".{role}-{tag}."))
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("creating a partial image in {}", dir.display()))?;
    let mut out = tar::Builder::new(std::io::BufWriter::new(partial.as_file()));
    for (name, data) in [
        (config_name.as_str(), config.as_slice()),
        (layer_name.as_str(), layer.as_slice()),
        ("manifest.json", manifest.as_slice()),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_size(data.len() as u64);
        out.append_data(&mut header, name, data)?;
    }
    out.into_inner()?.flush()?;
    let written = partial.path().to_path_buf();
    partial
        .persist(&path)
        .with_context(|| format!("renaming {} to {}", written.display(), path.display()))?;
    Ok(ImageArchive { path, name })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The archive holds what `docker save` writes: a manifest naming the config and the layer,
    /// the layer's digest as its folder and as the config's diff id, and the tag; written again,
    /// the same content gives the same file.
    #[test]
    fn archive_is_a_docker_save_layout_named_by_its_layer() {
        let dir = tempfile::tempdir().unwrap();
        let mut root = Rootfs::new();
        root.bytes(b"hello\n".to_vec(), "/app/hello.txt", 0o644)
            .unwrap();
        let a = write(&root, "unit", dir.path()).unwrap();
        let mut files = std::collections::BTreeMap::new();
        let mut tar = tar::Archive::new(std::fs::File::open(&a.path).unwrap());
        for e in tar.entries().unwrap() {
            let mut e = e.unwrap();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            files.insert(e.path().unwrap().to_string_lossy().into_owned(), data);
        }
        let manifest: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
        let layer_path = manifest[0]["Layers"][0].as_str().unwrap();
        let layer_digest = hex(&Sha256::digest(&files[layer_path]));
        assert_eq!(layer_path, format!("{layer_digest}/layer.tar"));
        let config_path = manifest[0]["Config"].as_str().unwrap();
        assert_eq!(
            config_path,
            format!("{}.json", hex(&Sha256::digest(&files[config_path])))
        );
        let config: serde_json::Value = serde_json::from_slice(&files[config_path]).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            format!("sha256:{layer_digest}")
        );
        assert_eq!(
            manifest[0]["RepoTags"][0],
            format!("netprobe-harness/unit:{}", &layer_digest[..16])
        );
        assert_eq!(a.name, manifest[0]["RepoTags"][0]);
        let bytes = std::fs::read(&a.path).unwrap();
        std::fs::remove_file(&a.path).unwrap();
        let again = write(&root, "unit", dir.path()).unwrap();
        assert_eq!(std::fs::read(&again.path).unwrap(), bytes);
    }

    /// Tests of one process write the same image at once (the container runtimes' trials run
    /// in parallel threads): every writer gets the archive, whole, and no partial file is left.
    #[test]
    fn writers_of_one_image_in_one_process_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let mut root = Rootfs::new();
        root.bytes(vec![7; 16 << 20], "/app/blob", 0o644).unwrap();
        let archives: Vec<ImageArchive> = std::thread::scope(|s| {
            let writers: Vec<_> = (0..8)
                .map(|_| s.spawn(|| write(&root, "unit", dir.path()).unwrap()))
                .collect();
            writers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let bytes = std::fs::read(&archives[0].path).unwrap();
        for a in &archives {
            assert_eq!(a.path, archives[0].path);
        }
        let mut tar = tar::Archive::new(bytes.as_slice());
        assert_eq!(tar.entries().unwrap().count(), 3);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
