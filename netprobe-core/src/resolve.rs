//! Resolution: from what a user types (an image and a name pattern, in a file or a live process)
//! to where each probe goes ([`ProbeTarget`]).

use crate::addr::{FileOffset, RuntimeAddr};
use crate::error::{Error, Result};
use crate::image;
use crate::maps::{Device, MapsEntry};
use crate::matching::Pattern;
use crate::normalize::{rva_to_file_offset_at, MappedImage};
use crate::process::Process;
use crate::symbol::{Address, Symbol};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where one probe goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeTarget {
    /// The file as the target process (or the user) names it.
    #[serde(serialize_with = "ser_path")]
    pub image: PathBuf,
    /// The path to write into `uprobe_events`: the same file, opened from netprobe's own mount
    /// namespace (`/proc/PID/root/...` for a process in a container, `/proc/PID/map_files/...` for
    /// a file deleted since it was mapped).
    #[serde(serialize_with = "ser_path")]
    pub probe_path: PathBuf,
    pub file_offset: FileOffset,
    pub symbol: Symbol,
    /// Where the code is in the process (live resolution only).
    pub runtime_addr: Option<RuntimeAddr>,
}

fn ser_path<S: serde::Serializer>(p: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// The functions of the file at `path` that `pattern` selects (exact matches if any, else glob
/// matches; see [`Pattern::select`]). Symbols without a file offset are left out.
///
/// Errors: [`Error::NoMatch`] with the nearest names when nothing matches; the file's own errors
/// ([`Error::NotAnObjectFile`], [`Error::Malformed`], I/O).
///
/// A .NET single-file bundle is searched in its own symbols and in every assembly the runtime
/// maps from it ([`image::load_image_symbols`]); a bundled method's target names the assembly as
/// `BUNDLE/ASSEMBLY` in `image`, and the bundle in `probe_path` with the offset in the bundle.
/// A path naming a bundled assembly (`BUNDLE/System.Private.CoreLib.dll`) searches only it.
pub fn resolve_file(path: &Path, pattern: &str) -> Result<Vec<ProbeTarget>> {
    let pattern = Pattern::parse(pattern)?;
    let member = crate::dotnet::bundle::split_member_path(path);
    let is_member = member.is_some();
    let (probe_path, images) = match member {
        Some((bundle, _)) => (
            bundle,
            vec![image::ImageSymbols {
                image: path.to_path_buf(),
                file_base: crate::addr::FileOffset(0),
                symbols: image::load_symbols(path)?,
            }],
        ),
        // Only what can match is named ([`image::load_image_symbols_matching`]: the same
        // symbols `select` would pick from the whole listing); the listing is read only to
        // explain a name that matches nothing.
        None => (
            path.to_path_buf(),
            image::load_image_symbols_matching(path, &pattern)?,
        ),
    };
    let mut targets = Vec::new();
    for img in &images {
        targets.extend(pattern.select(&img.symbols).into_iter().filter_map(|s| {
            Some(ProbeTarget {
                image: img.image.clone(),
                probe_path: probe_path.clone(),
                file_offset: s.file_offset?,
                symbol: s.clone(),
                runtime_addr: None,
            })
        }));
    }
    if targets.is_empty() {
        // Selected, but nothing has a file offset: say why rather than "no match".
        let offsetless = images.iter().find_map(|img| {
            let s = pattern
                .select(&img.symbols)
                .into_iter()
                .find(|s| s.file_offset.is_none())?;
            Some((s.clone(), img.image.clone()))
        });
        if let Some(e) = offsetless.and_then(|(s, img)| no_file_offset(s, &img)) {
            return Err(e);
        }
        let all: Vec<Symbol> = match is_member {
            true => images.into_iter().flat_map(|i| i.symbols).collect(),
            false => image::load_image_symbols(path)?
                .into_iter()
                .flat_map(|i| i.symbols)
                .collect(),
        };
        return Err(no_match_in(&pattern, path, &all));
    }
    Ok(targets)
}

/// [`Error::NoMatch`], or for a bundle with compressed assemblies [`Error::NoMatchInBundle`]
/// (the method may well be in one of them).
fn no_match_in(pattern: &Pattern, path: &Path, symbols: &[Symbol]) -> Error {
    match image::bundle_notes(path).into_iter().next() {
        Some(note) => Error::NoMatchInBundle {
            pattern: pattern.as_str().to_string(),
            image: path.display().to_string(),
            note,
        },
        None => no_match(pattern, &path.display().to_string(), symbols),
    }
}

/// [`Error::NoFileOffset`] for `s`, read from `path`, when the file's headers say why it has no
/// file offset; `None` when they do not.
fn no_file_offset(s: Symbol, path: &Path) -> Option<Error> {
    let why = crate::probe_safety::missing_offset_reasons(path, std::slice::from_ref(&s))
        .into_iter()
        .next()
        .flatten()?;
    Some(Error::NoFileOffset {
        name: s.name,
        image: path.display().to_string(),
        why,
    })
}

fn no_match(pattern: &Pattern, image: &str, symbols: &[Symbol]) -> Error {
    Error::NoMatch {
        pattern: pattern.as_str().to_string(),
        image: image.to_string(),
        nearest: pattern.nearest(symbols, 5),
    }
}

/// The functions `pattern` selects in process `pid`: in the mapped file `image` names, or, when
/// `image` is `None`, in every file the process maps executable. Each target is checked against
/// the live maps: its file offset must be mapped executable (else it is left out), and a method
/// known by RVA must land at the same file offset by the PE formula and by the live maps (else
/// [`Error::OffsetMismatch`]: no probe is placed on a disagreement).
///
/// Errors: [`Error::NoSuchProcess`], [`Error::PermissionDenied`], [`Error::ImageNotMapped`] (with
/// similar mapped names), [`Error::AmbiguousImage`], [`Error::NoExecutableMapping`],
/// [`Error::NoMatch`] (with the nearest names), and the image's own errors when `image` is given.
pub fn resolve_in_process(
    pid: u32,
    image: Option<&str>,
    pattern: &str,
) -> Result<Vec<ProbeTarget>> {
    let process = Process::open(pid)?;
    let maps = process.maps()?;
    resolve_in_maps(pid, &maps, |img| open_path(&process, img), image, pattern)
}

/// [`resolve_in_process`] over a maps listing given by the caller (live or recorded):
/// `open` says where netprobe opens each mapped file.
pub fn resolve_in_maps(
    pid: u32,
    maps: &[MapsEntry],
    open: impl Fn(&MappedImage) -> Result<PathBuf>,
    image: Option<&str>,
    pattern: &str,
) -> Result<Vec<ProbeTarget>> {
    let pattern = Pattern::parse(pattern)?;
    let images = MappedImage::group(maps);
    // Each candidate: a mapped file, and for an assembly inside a mapped single-file bundle
    // its path in the bundle.
    let (candidates, explicit): (Vec<(&MappedImage, Option<String>)>, bool) = match image {
        Some(spec) => match find_image(pid, &images, spec) {
            Ok(img) => (vec![(img, None)], true),
            Err(e @ Error::ImageNotMapped { .. }) => match find_bundled(&images, &open, spec) {
                Some((img, entry)) => (vec![(img, Some(entry.path))], true),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        },
        None => (
            images
                .iter()
                .filter(|i| i.exec_mappings().next().is_some())
                .map(|i| (i, None))
                .collect(),
            false,
        ),
    };
    let mut targets = Vec::new();
    let mut seen: Vec<Symbol> = Vec::new();
    // The first selected symbol without a file offset, and where it was read.
    let mut offsetless: Option<(Symbol, PathBuf)> = None;
    let mut searched: Vec<PathBuf> = Vec::new();
    // Files of which only the matching symbols were loaded (their `seen` share comes later).
    let mut unlisted: Vec<PathBuf> = Vec::new();
    // Why the first mapped file that could not be opened as mapped was skipped.
    let mut unopened: Option<Error> = None;
    for (img, entry) in candidates {
        if img.exec_mappings().next().is_none() {
            return Err(Error::NoExecutableMapping {
                pid,
                path: img.path.clone(),
            });
        }
        let open_path = match open(img) {
            Ok(p) => p,
            // Searching every mapped file: one that cannot be opened as mapped is skipped, and
            // named if nothing matches elsewhere (the function may well be in it).
            Err(e) if !explicit => {
                unopened.get_or_insert(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let loaded = match &entry {
            Some(e) => {
                let member = open_path.join(e);
                let file_base = bundled_base(&open_path, &member).unwrap_or_default();
                image::load_symbols(&member).map(|symbols| {
                    vec![image::ImageSymbols {
                        image: member,
                        file_base,
                        symbols,
                    }]
                })
            }
            // Only what can match is named ([`image::load_image_symbols_matching`]); the
            // whole listing is read again only to suggest names when nothing matches.
            None => image::load_image_symbols_matching(&open_path, &pattern),
        };
        let loaded = match loaded {
            Ok(s) => s,
            // Searching every mapped file: one unreadable or non-ELF file is no reason to fail.
            Err(_) if !explicit => continue,
            Err(e) => return Err(e),
        };
        searched.push(open_path.clone());
        if entry.is_none() {
            unlisted.push(open_path.clone());
        }
        for part in loaded {
            let name = if part.image == open_path {
                img.path.clone()
            } else {
                part.image.clone()
            };
            let selected = pattern.select(&part.symbols);
            if offsetless.is_none() {
                offsetless = selected
                    .iter()
                    .find(|s| s.file_offset.is_none())
                    .map(|s| ((*s).clone(), part.image.clone()));
            }
            targets.extend(place_symbols_at(
                img,
                &open_path,
                &name,
                part.file_base,
                selected,
            )?);
            if entry.is_some() {
                seen.extend(part.symbols);
            }
        }
    }
    if targets.is_empty() {
        if let Some(e) = offsetless.and_then(|(s, path)| no_file_offset(s, &path)) {
            return Err(e);
        }
        // Not "no match" when a mapped file could not be searched: why it could not.
        if let Some(e) = unopened {
            return Err(e);
        }
        let where_ = image.map_or_else(|| format!("process {pid}"), str::to_string);
        // A single-file bundle among the searched files may explain why (compressed assemblies).
        let note = searched
            .iter()
            .find_map(|p| image::bundle_notes(p).into_iter().next());
        if let Some(note) = note {
            return Err(Error::NoMatchInBundle {
                pattern: pattern.as_str().to_string(),
                image: where_,
                note,
            });
        }
        for path in unlisted {
            if let Ok(all) = image::load_image_symbols(&path) {
                seen.extend(all.into_iter().flat_map(|part| part.symbols));
            }
        }
        return Err(no_match(&pattern, &where_, &seen));
    }
    Ok(targets)
}

/// The entry offset of the bundled assembly `member` inside the bundle `bundle` (opened at
/// `bundle`); `None` when `member` is not a mapped assembly of it.
fn bundled_base(bundle: &Path, member: &Path) -> Option<crate::addr::FileOffset> {
    let rel = member.strip_prefix(bundle).ok()?;
    let b = crate::dotnet::bundle::Bundle::open(bundle).ok()??;
    let e = b.entry(&rel.to_string_lossy()).ok()?;
    Some(e.offset)
}

/// A mapped single-file bundle holding an assembly `spec` names (`System.Private.CoreLib.dll`
/// or `System.Private.CoreLib`), and that assembly's entry; `None` when no mapped bundle has
/// one. `open` says where netprobe opens each mapped file.
pub fn find_bundled<'a>(
    images: &'a [MappedImage],
    open: &impl Fn(&MappedImage) -> Result<PathBuf>,
    spec: &str,
) -> Option<(&'a MappedImage, crate::dotnet::bundle::BundleEntry)> {
    if spec.contains('/') {
        return None;
    }
    images
        .iter()
        .filter(|i| i.exec_mappings().next().is_some())
        .find_map(|img| {
            let bundle = crate::dotnet::bundle::Bundle::open(open(img).ok()?).ok()??;
            let entry = bundle
                .manifest()
                .entry(spec)
                .or_else(|| bundle.manifest().entry(&format!("{spec}.dll")))?;
            Some((img, entry.clone()))
        })
}

/// Places symbols of one mapped image: each must have a file offset that is mapped executable
/// (others are left out), and a method known by RVA must land at the same file offset by the PE
/// formula and by the live maps, else [`Error::OffsetMismatch`].
pub fn place_symbols<'a>(
    img: &MappedImage,
    probe_path: &Path,
    symbols: impl IntoIterator<Item = &'a Symbol>,
) -> Result<Vec<ProbeTarget>> {
    place_symbols_at(
        img,
        probe_path,
        &img.path,
        crate::addr::FileOffset(0),
        symbols,
    )
}

/// [`place_symbols`] for the image whose byte 0 lies at `file_base` in the mapped file (a
/// bundled assembly: its entry offset in the single-file bundle; 0 otherwise), named `image`
/// in the targets. An RVA is checked against the live maps from that image's own base
/// ([`rva_to_file_offset_at`]).
pub fn place_symbols_at<'a>(
    img: &MappedImage,
    probe_path: &Path,
    image: &Path,
    file_base: crate::addr::FileOffset,
    symbols: impl IntoIterator<Item = &'a Symbol>,
) -> Result<Vec<ProbeTarget>> {
    let mut out = Vec::new();
    for s in symbols {
        let Some(off) = s.file_offset else { continue };
        let Some(runtime) = img.runtime_addr_of(off) else {
            continue;
        };
        if let Address::Rva(rva) = s.address {
            let live = rva_to_file_offset_at(img, rva, file_base).map(|(o, _)| o);
            if live != Some(off) {
                return Err(Error::OffsetMismatch {
                    name: s.name.clone(),
                    image: image.display().to_string(),
                    file_offset: off,
                    live,
                });
            }
        }
        out.push(ProbeTarget {
            image: image.to_path_buf(),
            probe_path: probe_path.to_path_buf(),
            file_offset: off,
            symbol: s.clone(),
            runtime_addr: Some(runtime),
        });
    }
    Ok(out)
}

/// The path at which netprobe opens, and the kernel finds, the file `img` maps in `process`:
/// `/proc/PID/map_files/START-END` of its first executable mapping (or its first mapping). That
/// link opens the mapped file itself (proc(5), map_files), whatever the process did to the path it
/// mapped it from since: a symlink put in its place, a mount over its folder, a deletion. The path
/// from the maps line, through the process's root, is a path the process controls: an absolute
/// symlink there is followed from netprobe's own root and can name any file of the host.
///
/// Checked either way: the file opened must have the device and inode of the maps line. Where
/// map_files cannot be opened (it needs CAP_SYS_ADMIN), the path through `/proc/PID/root` is used
/// only when it passes that check. Errors: [`Error::MappedFileReplaced`] naming both files when
/// neither opens the mapped file; [`Error::NoSuchProcess`] when the process exited.
pub fn open_path(process: &Process, img: &MappedImage) -> Result<PathBuf> {
    let Some(m) = img.exec_mappings().next().or(img.mappings.first()) else {
        return Ok(process.host_path(&img.path));
    };
    let is_mapped = |meta: &std::fs::Metadata| {
        use std::os::unix::fs::MetadataExt;
        // Device 0:0 with inode 0 is no identity (pseudo files); nothing to compare.
        img.inode == 0 || (Device::from_st_dev(meta.dev()), meta.ino()) == (img.dev, img.inode)
    };
    let describe = |meta: &std::fs::Metadata| {
        use std::os::unix::fs::MetadataExt;
        format!(
            "device:inode {} {}",
            Device::from_st_dev(meta.dev()),
            meta.ino()
        )
    };
    let link = process.map_file(m.start, m.end);
    let link_error = match std::fs::metadata(&link) {
        Ok(meta) if is_mapped(&meta) => return Ok(link),
        Ok(meta) => describe(&meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !process.dir().exists() => {
            return Err(Error::NoSuchProcess { pid: process.pid() })
        }
        // Unmapped since the maps were read, or no CAP_SYS_ADMIN: the path below, if it is the
        // same file.
        Err(e) => e.to_string(),
    };
    let via_root = process.host_path(&img.path);
    let opened_file = match std::fs::metadata(&via_root) {
        Ok(meta) if is_mapped(&meta) => return Ok(via_root),
        Ok(meta) => describe(&meta),
        Err(e) => format!("nothing that opens ({e}); map_files: {link_error}"),
    };
    Err(Error::MappedFileReplaced {
        pid: process.pid(),
        mapped_path: img.path.clone(),
        mapped: format!("{} {}", img.dev, img.inode),
        opened: via_root,
        opened_file,
    })
}

/// A path to read (never to probe) the file `img` maps in `process` by, that still opens it after
/// the process exits when one can be checked: the path of the maps line itself when the process
/// shares netprobe's root and that path opens the maps line's device and inode (frames of a `-c`
/// command are named after it ended); else [`open_path`]'s. Only frame names come of what is read
/// here, so a swap between the check and the read misnames frames at worst, and every read is
/// of a regular file with the guards of [`crate::bytes`].
pub fn read_path(process: &Process, img: &MappedImage) -> Result<PathBuf> {
    if !img.deleted && img.inode != 0 && process.shares_our_root() {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(&img.path) {
            if (Device::from_st_dev(meta.dev()), meta.ino()) == (img.dev, img.inode) {
                return Ok(img.path.clone());
            }
        }
    }
    open_path(process, img)
}

/// Right before a probe on `path` is written: `path` must still name the file this run read
/// there ([`crate::cache::ImageCache::identity_read_at`] of the process-wide cache: same device,
/// inode, size and modification time), since its offsets were computed from those bytes. A path
/// never read (a raw offset placed with `--unsafe-offset`) has nothing to compare and passes.
/// Errors:
/// [`Error::ProbeFileChanged`] naming what the path is now and what was read.
pub fn verify_probe_file(path: &Path) -> Result<()> {
    let Some(read) = crate::cache::ImageCache::shared().identity_read_at(path) else {
        return Ok(());
    };
    match crate::file_id::FileId::of(path) {
        Some(now) if now == read => Ok(()),
        now => Err(Error::ProbeFileChanged {
            path: path.to_path_buf(),
            was: read.to_string(),
            now: now.map_or_else(|| "gone".to_string(), |n| n.to_string()),
        }),
    }
}

/// The mapped file that `spec` names: a full path (as the process sees it, or through
/// `/proc/PID/root`), a file name (`libc.so.6`, `System.Console.dll`), or a short library name as
/// bcc takes it (`c` for `libc.so.6`, `System.Console` for `System.Console.dll`).
///
/// Errors: [`Error::ImageNotMapped`] with up to five similar mapped names;
/// [`Error::AmbiguousImage`] when several files match equally well.
pub fn find_image<'a>(pid: u32, images: &'a [MappedImage], spec: &str) -> Result<&'a MappedImage> {
    let root_prefix = format!("/proc/{pid}/root");
    let spec_path = spec.strip_prefix(&root_prefix).unwrap_or(spec);
    let name_of = |img: &MappedImage| {
        img.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    // The same file under another path (`/proc/self/root/...`, a bind mount): the device and
    // inode that maps shows for it.
    let identity = spec
        .contains('/')
        .then(|| std::fs::metadata(spec).ok())
        .flatten()
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (Device::from_st_dev(m.dev()), m.ino())
        });
    // Ranked tiers: the first tier with any match decides.
    let tiers: [&dyn Fn(&MappedImage) -> bool; 4] = [
        &|img| img.path == Path::new(spec_path),
        &|img| identity == Some((img.dev, img.inode)),
        &|img| !spec.contains('/') && name_of(img) == spec,
        &|img| {
            let n = name_of(img);
            !spec.contains('/')
                && (n == format!("{spec}.dll")
                    || n == format!("{spec}.exe")
                    || n == format!("lib{spec}.so")
                    || n.starts_with(&format!("lib{spec}.so."))
                    || n.starts_with(&format!("{spec}.so.")))
        },
    ];
    for tier in tiers {
        let hits: Vec<&MappedImage> = images.iter().filter(|i| tier(i)).collect();
        match hits.len() {
            0 => continue,
            1 => return Ok(hits[0]),
            _ => {
                return Err(Error::AmbiguousImage {
                    pid,
                    image: spec.to_string(),
                    candidates: hits.iter().map(|i| i.path.display().to_string()).collect(),
                })
            }
        }
    }
    Err(Error::ImageNotMapped {
        pid,
        image: spec.to_string(),
        similar: similar_images(images, spec),
    })
}

fn similar_images(images: &[MappedImage], spec: &str) -> Vec<String> {
    let want = Path::new(spec)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let stem = want.split('.').next().unwrap_or(&want).to_string();
    let mut scored: Vec<(usize, String)> = images
        .iter()
        .map(|i| {
            let name = i
                .path
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let score = if !stem.is_empty() && name.contains(&stem) {
                0
            } else {
                1 + crate::matching::edit_distance(&want, &name)
            };
            (score, i.path.display().to_string())
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_file_replaced_after_it_was_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"first contents").unwrap();
        // Never read: nothing to compare.
        verify_probe_file(&path).unwrap();
        crate::cache::ImageCache::shared().open(&path).unwrap();
        verify_probe_file(&path).unwrap();
        // Another file put at the path (as a target can do to a path in a folder it owns).
        let other = dir.path().join("other");
        std::fs::write(&other, b"other contents, longer").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let e = verify_probe_file(&path).unwrap_err();
        assert!(matches!(e, Error::ProbeFileChanged { .. }), "{e}");
        assert!(
            e.to_string().contains("not the file netprobe read there"),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        let e = verify_probe_file(&path).unwrap_err();
        assert!(e.to_string().contains("it is now gone"), "{e}");
    }
}
