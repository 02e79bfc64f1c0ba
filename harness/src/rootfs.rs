//! A root file system assembled from host files, written as a tar (for `docker import`) or as a
//! newc cpio archive (for a kernel's initramfs).
//!
//! Both writers are deterministic: entries sorted by path, owner root, mtime 0. The same inputs
//! give the same bytes, so [`Rootfs::content_hash`] names the content and Docker stores identical
//! imports as one layer.

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

#[derive(Clone, Debug)]
enum Entry {
    Dir { mode: u32 },
    File { src: PathBuf, mode: u32 },
    Bytes { data: Vec<u8>, mode: u32 },
    Symlink { target: String },
}

/// Files, folders and symlinks keyed by their path inside the root (no leading `/`).
#[derive(Clone, Debug, Default)]
pub struct Rootfs {
    entries: BTreeMap<String, Entry>,
}

/// `dest` as a relative, normalised path inside the root; an error for `..` components.
fn inner_path(dest: &str) -> Result<String> {
    let mut parts = Vec::new();
    for c in Path::new(dest).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                bail!("path {dest:?} leaves the root file system")
            }
        }
    }
    if parts.is_empty() {
        bail!("empty path {dest:?} in a root file system");
    }
    Ok(parts.join("/"))
}

impl Rootfs {
    /// An empty root.
    pub fn new() -> Rootfs {
        Rootfs::default()
    }

    /// A folder (parents of every entry are added implicitly with mode 0755).
    pub fn dir(&mut self, dest: &str, mode: u32) -> Result<&mut Rootfs> {
        self.entries.insert(
            inner_path(dest)?,
            Entry::Dir {
                mode: mode & 0o7777,
            },
        );
        Ok(self)
    }

    /// The host file `src` (symlinks followed) at `dest`, keeping its permission bits.
    pub fn file(&mut self, src: &Path, dest: &str) -> Result<&mut Rootfs> {
        let meta = std::fs::metadata(src).with_context(|| format!("{}", src.display()))?;
        if !meta.is_file() {
            bail!("{} is not a regular file", src.display());
        }
        self.entries.insert(
            inner_path(dest)?,
            Entry::File {
                src: src.to_path_buf(),
                mode: meta.permissions().mode() & 0o7777,
            },
        );
        Ok(self)
    }

    /// A file with the given contents at `dest`.
    pub fn bytes(
        &mut self,
        data: impl Into<Vec<u8>>,
        dest: &str,
        mode: u32,
    ) -> Result<&mut Rootfs> {
        self.entries.insert(
            inner_path(dest)?,
            Entry::Bytes {
                data: data.into(),
                mode: mode & 0o7777,
            },
        );
        Ok(self)
    }

    /// A symlink at `dest` pointing to `target` (kept verbatim).
    pub fn symlink(&mut self, target: &str, dest: &str) -> Result<&mut Rootfs> {
        self.entries.insert(
            inner_path(dest)?,
            Entry::Symlink {
                target: target.to_string(),
            },
        );
        Ok(self)
    }

    /// The host folder `src` and everything below it at `dest`. Symlinks are kept as symlinks.
    pub fn tree(&mut self, src: &Path, dest: &str) -> Result<&mut Rootfs> {
        let dest = inner_path(dest)?;
        let meta = std::fs::metadata(src).with_context(|| format!("{}", src.display()))?;
        self.entries.insert(
            dest.clone(),
            Entry::Dir {
                mode: meta.permissions().mode() & 0o7777,
            },
        );
        let mut names: Vec<_> = std::fs::read_dir(src)
            .with_context(|| format!("reading {}", src.display()))?
            .collect::<std::io::Result<Vec<_>>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let path = e.path();
            let inner = format!("{dest}/{}", e.file_name().to_string_lossy());
            let ft = e.file_type()?;
            if ft.is_symlink() {
                let target = std::fs::read_link(&path)?;
                self.symlink(&target.to_string_lossy(), &inner)?;
            } else if ft.is_dir() {
                self.tree(&path, &inner)?;
            } else if ft.is_file() {
                self.file(&path, &inner)?;
            }
        }
        Ok(self)
    }

    /// The host ELF `src` at `dest`, plus every shared library the dynamic loader resolves for it
    /// (including the loader itself) at the same path as on the host.
    pub fn elf_with_libs(&mut self, src: &Path, dest: &str) -> Result<&mut Rootfs> {
        self.file(src, dest)?;
        self.libs_of(src)
    }

    /// The shared libraries `elf` needs (see [`shared_libs`]), at their host paths.
    pub fn libs_of(&mut self, elf: &Path) -> Result<&mut Rootfs> {
        for lib in shared_libs(elf)? {
            let dest = lib.to_string_lossy().into_owned();
            if !self.entries.contains_key(&inner_path(&dest)?) {
                self.file(&lib, &dest)?;
            }
        }
        Ok(self)
    }

    /// True when `dest` is in the root.
    pub fn contains(&self, dest: &str) -> bool {
        inner_path(dest)
            .map(|p| self.entries.contains_key(&p))
            .unwrap_or(false)
    }

    /// Every entry with implied parent folders added, sorted so that parents come first.
    fn complete(&self) -> BTreeMap<String, Entry> {
        let mut all = self.entries.clone();
        for path in self.entries.keys() {
            let mut p = Path::new(path.as_str());
            while let Some(parent) = p.parent() {
                if parent.as_os_str().is_empty() {
                    break;
                }
                all.entry(parent.to_string_lossy().into_owned())
                    .or_insert(Entry::Dir { mode: 0o755 });
                p = parent;
            }
        }
        all
    }

    fn data(entry: &Entry) -> Result<Vec<u8>> {
        Ok(match entry {
            Entry::File { src, .. } => {
                std::fs::read(src).with_context(|| format!("reading {}", src.display()))?
            }
            Entry::Bytes { data, .. } => data.clone(),
            Entry::Symlink { target } => target.as_bytes().to_vec(),
            Entry::Dir { .. } => Vec::new(),
        })
    }

    /// SHA-256 (hex) over every path, kind, mode and content: equal hashes mean equal archives.
    pub fn content_hash(&self) -> Result<String> {
        let mut h = Sha256::new();
        for (path, entry) in self.complete() {
            let (kind, mode) = match &entry {
                Entry::Dir { mode } => ("d", *mode),
                Entry::File { mode, .. } | Entry::Bytes { mode, .. } => ("f", *mode),
                Entry::Symlink { .. } => ("l", 0o777),
            };
            let data = Self::data(&entry)?;
            h.update(format!("{kind} {mode:o} {} {path}\0", data.len()));
            h.update(&data);
        }
        Ok(h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>())
    }

    /// Total bytes of file contents.
    pub fn size(&self) -> Result<u64> {
        let mut n = 0;
        for e in self.entries.values() {
            n += match e {
                Entry::File { src, .. } => std::fs::metadata(src)?.len(),
                Entry::Bytes { data, .. } => data.len() as u64,
                _ => 0,
            };
        }
        Ok(n)
    }

    /// Writes a POSIX tar of the root (for `docker import`).
    pub fn write_tar<W: Write>(&self, out: W) -> Result<()> {
        let mut tar = tar::Builder::new(out);
        tar.mode(tar::HeaderMode::Deterministic);
        for (path, entry) in self.complete() {
            let mut header = tar::Header::new_gnu();
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
            match &entry {
                Entry::Dir { mode } => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(*mode);
                    header.set_size(0);
                    tar.append_data(&mut header, format!("{path}/"), std::io::empty())?;
                }
                Entry::File { mode, .. } | Entry::Bytes { mode, .. } => {
                    let data = Self::data(&entry)?;
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(*mode);
                    header.set_size(data.len() as u64);
                    tar.append_data(&mut header, &path, data.as_slice())?;
                }
                Entry::Symlink { target } => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    tar.append_link(&mut header, &path, target)?;
                }
            }
        }
        tar.into_inner()?.flush()?;
        Ok(())
    }

    /// Writes the root as an uncompressed newc ("070701") cpio archive, the initramfs format the
    /// kernel unpacks (Documentation/driver-api/early-userspace/buffer-format.rst).
    pub fn write_newc<W: Write>(&self, mut out: W) -> Result<()> {
        let mut written: u64 = 0;
        let mut emit = |out: &mut W, name: &str, mode: u32, ino: u32, data: &[u8]| -> Result<()> {
            let namesize = name.len() + 1;
            let header = format!(
                "070701{ino:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{namesize:08x}{:08x}",
                0, // uid
                0, // gid
                if mode & 0o170000 == 0o040000 { 2 } else { 1 }, // nlink
                0, // mtime
                data.len(),
                0, // devmajor
                0, // devminor
                0, // rdevmajor
                0, // rdevminor
                0, // check
            );
            out.write_all(header.as_bytes())?;
            out.write_all(name.as_bytes())?;
            out.write_all(&[0])?;
            written += (header.len() + namesize) as u64;
            let pad = (4 - (written % 4) as usize) % 4;
            out.write_all(&[0u8; 3][..pad])?;
            written += pad as u64;
            out.write_all(data)?;
            written += data.len() as u64;
            let pad = (4 - (written % 4) as usize) % 4;
            out.write_all(&[0u8; 3][..pad])?;
            written += pad as u64;
            Ok(())
        };
        for (ino, (path, entry)) in self.complete().into_iter().enumerate() {
            let ino = ino as u32 + 1;
            let (mode, data) = match &entry {
                Entry::Dir { mode } => (0o040000 | mode, Vec::new()),
                Entry::File { mode, .. } | Entry::Bytes { mode, .. } => {
                    (0o100000 | mode, Self::data(&entry)?)
                }
                Entry::Symlink { target } => (0o120777, target.as_bytes().to_vec()),
            };
            if data.len() > u32::MAX as usize {
                bail!("{path} is too large for a newc cpio archive");
            }
            emit(&mut out, &path, mode, ino, &data)?;
        }
        emit(&mut out, "TRAILER!!!", 0, 0, &[])?;
        out.flush()?;
        Ok(())
    }
}

/// The shared libraries the dynamic loader resolves for `elf`, the loader included, as `ldd`
/// prints them (absolute host paths). Empty for a statically linked file. Libraries ldd reports
/// as "not found" are left out: they are optional `dlopen` targets or the program cannot run
/// anyway, which the image's own test then shows.
pub fn shared_libs(elf: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(elf)
        .output()
        .context("running ldd (Debian package libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        if all.contains("not a dynamic executable") || all.contains("statically linked") {
            return Ok(Vec::new());
        }
        bail!("ldd {} failed: {all}", elf.display());
    }
    Ok(parse_ldd(&text))
}

/// The absolute library paths in ldd's output (see [`shared_libs`]).
pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let path_part = match line.split_once("=>") {
            Some((_, right)) => right.trim(),
            None => line,
        };
        let path = path_part.split(" (").next().unwrap_or("").trim();
        if path.starts_with('/') && !libs.iter().any(|l: &PathBuf| l == Path::new(path)) {
            libs.push(PathBuf::from(path));
        }
    }
    libs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_absolute_paths_only() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f01)\n\
                    \tliblttng-ust.so.0 => not found\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f03)\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tstatically linked\n").is_empty());
    }

    #[test]
    fn paths_cannot_leave_the_root() {
        let mut r = Rootfs::new();
        assert!(r.bytes("x", "../etc/passwd", 0o644).is_err());
        assert!(r.bytes("x", "/", 0o644).is_err());
        r.bytes("x", "/a/./b", 0o644).unwrap();
        assert!(r.contains("a/b"));
    }

    #[test]
    fn archives_are_deterministic_and_complete() {
        let mut r = Rootfs::new();
        r.bytes("#!/bin/sh\n", "/init", 0o755).unwrap();
        r.symlink("busybox", "/bin/sh").unwrap();
        r.dir("/tmp", 0o1777).unwrap();
        let mut a = Vec::new();
        let mut b = Vec::new();
        r.write_newc(&mut a).unwrap();
        r.clone().write_newc(&mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len() % 4, 0);
        let text = String::from_utf8_lossy(&a);
        // The implied parent "bin" comes before "bin/sh"; the trailer closes the archive.
        assert!(text.find("bin\0").unwrap() < text.find("bin/sh\0").unwrap());
        assert!(text.contains("TRAILER!!!\0"));
        // A tar of the same root lists the same entries.
        let mut t = Vec::new();
        r.write_tar(&mut t).unwrap();
        let mut ar = tar::Archive::new(t.as_slice());
        let names: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["bin/", "bin/sh", "init", "tmp/"]);
        assert_eq!(r.content_hash().unwrap(), r.clone().content_hash().unwrap());
        r.bytes("#!/bin/sh\necho\n", "/init", 0o755).unwrap();
        assert_ne!(r.content_hash().unwrap().len(), 0);
    }
}
