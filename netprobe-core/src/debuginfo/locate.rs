//! Finding the DWARF of an image the way distributions ship it, in gdb's order ("Separate Debug
//! Files", <https://sourceware.org/gdb/current/onlinedocs/gdb.html/Separate-Debug-Files.html>):
//!
//! 1. the image itself, when it has `.debug_info`;
//! 2. by build-id: `/usr/lib/debug/.build-id/XX/REST.debug`, `XX` the first byte of the
//!    `NT_GNU_BUILD_ID` note in hex and `REST` the others (Debian's `-dbgsym` and `-dbg`
//!    packages install there);
//! 3. by `.gnu_debuglink` (a file name, padding to 4 bytes, the CRC-32 of the debug file): that
//!    name in the image's folder, in its `.debug/` folder and under `/usr/lib/debug/` + the
//!    image's folder, used only when its CRC-32 matches;
//! 4. from a debuginfod server ([`crate::ipc::debuginfod`]), only when `DEBUGINFOD_URLS` is set.
//!
//! Every name read from the image is hostile: a debuglink name with `/`, or that is `.` or `..`,
//! is refused, and a build-id path is made of hex digits only, so neither leaves the folders
//! above. A debug file counts only when its build-id equals the image's (when the image has
//! one): a stale file from another build would give wrong lines. For an image of a container,
//! the paths are opened inside the process's root ([`Process::open_in_root`]: no symlink or `..`
//! there reaches the host's files).

use super::sections::DebugSections;
use crate::bytes::FileBytes;
use crate::elf::parser::ElfView;
use crate::process::Process;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the build-id and debuglink folders are (gdb's default `debug-file-directory`).
pub const DEBUG_DIR: &str = "/usr/lib/debug";

/// Where an image's separate debug files are looked for.
#[derive(Clone, Debug)]
pub struct DebugSearch {
    /// The image as the process (or the user) names it: its folder is where a debuglink is
    /// looked for. `None`: only the image's own DWARF is read (code read from memory).
    image: Option<PathBuf>,
    /// The process whose root the paths are opened in; `None` for netprobe's own root.
    root: Option<Process>,
}

/// Which file the DWARF was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DebugOrigin {
    Image,
    BuildId(PathBuf),
    DebugLink(PathBuf),
    Debuginfod(PathBuf),
}

/// What [`locate`] found.
#[derive(Debug, Default)]
pub struct Located {
    /// The DWARF sections and the file they came from; `None` when no file has them.
    pub found: Option<(DebugSections, DebugOrigin)>,
    /// Said to the user when a debuginfod server was asked (`DEBUGINFOD_URLS` is set) and none
    /// had the debug file: what is missing and how to get it. Without `DEBUGINFOD_URLS` nothing
    /// is said: most images of a system have no debug file installed, and a note for each
    /// library of every stack would drown the output.
    pub note: Option<String>,
}

impl DebugSearch {
    /// For a file netprobe opens by `image` itself.
    pub fn host(image: &Path) -> DebugSearch {
        DebugSearch {
            image: Some(image.to_path_buf()),
            root: None,
        }
    }

    /// For the file `image` (as the maps of `process` name it): opened in the process's root
    /// unless it shares netprobe's.
    pub fn in_process(process: &Process, image: &Path) -> DebugSearch {
        DebugSearch {
            image: Some(image.to_path_buf()),
            root: (!process.shares_our_root()).then(|| process.clone()),
        }
    }

    /// Only the image's own DWARF.
    pub fn image_only() -> DebugSearch {
        DebugSearch {
            image: None,
            root: None,
        }
    }

    fn open(&self, path: &Path) -> Option<FileBytes> {
        match &self.root {
            None => FileBytes::open(path).ok(),
            Some(p) => {
                let file = p.open_in_root(path).ok()?;
                FileBytes::from_file(file, &p.root().join(path.strip_prefix("/").ok()?)).ok()
            }
        }
    }
}

/// The `NT_GNU_BUILD_ID` note of an ELF file (binutils `ld --build-id`), from its SHT_NOTE
/// sections; `None` without one or when it is shorter than 2 or longer than 64 bytes.
pub fn build_id(view: &ElfView<'_>) -> Option<Vec<u8>> {
    const SHT_NOTE: u32 = 7;
    const NT_GNU_BUILD_ID: u32 = 3;
    for sh in view
        .section_headers
        .iter()
        .filter(|s| s.sh_type == SHT_NOTE)
    {
        let mut notes = view.section_bytes(sh)?;
        // Elf64_Nhdr: namesz, descsz, type; name and desc each padded to 4 bytes.
        while notes.len() >= 12 {
            let word = |i: usize| crate::bytes::u32_at(notes, i);
            let (namesz, descsz, ty) = (word(0)? as usize, word(4)? as usize, word(8)?);
            let desc_at = 12usize.checked_add(namesz.checked_add(3)? & !3)?;
            let end = desc_at.checked_add(descsz.checked_add(3)? & !3)?;
            let name = notes.get(12..12 + namesz)?;
            let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
            if ty == NT_GNU_BUILD_ID && name == b"GNU\0" && (2..=64).contains(&desc.len()) {
                return Some(desc.to_vec());
            }
            notes = notes.get(end.min(notes.len())..)?;
        }
    }
    None
}

/// The `.gnu_debuglink` section: the debug file's name and its CRC-32; `None` without one, or
/// when the name is not one plain file name (empty, `.`, `..`, holds `/` or is not UTF-8).
pub fn debuglink(view: &ElfView<'_>) -> Option<(String, u32)> {
    let sh = view
        .section_headers
        .iter()
        .find(|s| view.section_name(s) == Some(".gnu_debuglink"))?;
    let data = view.section_bytes(sh)?;
    let name = crate::bytes::cstr_at(data, 0usize)?;
    let crc_at = (name.len() + 1 + 3) & !3;
    let crc = crate::bytes::u32_at(data, crc_at)?;
    let name = std::str::from_utf8(name).ok()?;
    plain_file_name(name).then(|| (name.to_string(), crc))
}

/// `name` is one path component that names a file in the folder it is joined to.
pub fn plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `/usr/lib/debug/.build-id/XX/REST.debug` for a build-id of at least 2 bytes (hex digits only,
/// so the path stays under [`DEBUG_DIR`]).
pub fn build_id_path(id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    Some(PathBuf::from(format!(
        "{DEBUG_DIR}/.build-id/{first:02x}/{}.debug",
        hex(rest)
    )))
}

/// The DWARF for the image whose bytes are `image` (named `shown` in notes), searched as the
/// module docs say.
pub fn locate(image: &[u8], shown: &Path, search: &DebugSearch) -> Located {
    let Ok(view) = ElfView::parse(shown, image) else {
        return Located::default();
    };
    if let Ok(own) = DebugSections::parse(shown, image) {
        if own.has_debug_info() {
            return Located {
                found: Some((own, DebugOrigin::Image)),
                note: None,
            };
        }
    }
    let id = build_id(&view);
    let link = debuglink(&view);
    let matches_id = |bytes: &[u8], path: &Path| -> Option<DebugSections> {
        let v = ElfView::parse(path, bytes).ok()?;
        if id.is_some() && build_id(&v) != id {
            return None;
        }
        let s = DebugSections::parse(path, bytes).ok()?;
        s.has_debug_info().then_some(s)
    };
    if search.image.is_some() {
        if let Some(path) = id.as_deref().and_then(build_id_path) {
            if let Some(s) = search.open(&path).and_then(|b| matches_id(&b, &path)) {
                return found(s, DebugOrigin::BuildId(path));
            }
        }
    }
    if let (Some((name, crc)), Some(dir)) = (&link, search.image.as_deref().and_then(Path::parent))
    {
        let under_debug = Path::new(DEBUG_DIR).join(dir.strip_prefix("/").unwrap_or(dir));
        for folder in [dir.to_path_buf(), dir.join(".debug"), under_debug] {
            let path = folder.join(name);
            let Some(bytes) = search.open(&path) else {
                continue;
            };
            let mut sum = flate2::Crc::new();
            sum.update(&bytes);
            if sum.sum() != *crc {
                continue;
            }
            if let Some(s) = matches_id(&bytes, &path) {
                return found(s, DebugOrigin::DebugLink(path));
            }
        }
    }
    let mut fetch_error = None;
    if let (Some(id), Some(client)) = (&id, crate::ipc::debuginfod::Client::from_env()) {
        match client.debuginfo(&hex(id)) {
            Ok(path) => match FileBytes::open(&path) {
                Ok(bytes) => match matches_id(&bytes, &path) {
                    Some(s) => return found(s, DebugOrigin::Debuginfod(path)),
                    None => {
                        fetch_error = Some(format!(
                            "{} is not the debug file of this build",
                            path.display()
                        ))
                    }
                },
                Err(e) => fetch_error = Some(e.to_string()),
            },
            Err(e) => fetch_error = Some(e),
        }
    }
    Located {
        found: None,
        note: fetch_error.map(|e| missing_note(shown, id.as_deref(), link.as_ref(), e)),
    }
}

fn found(s: DebugSections, origin: DebugOrigin) -> Located {
    Located {
        found: Some((s, origin)),
        note: None,
    }
}

/// What is missing for `image` and how to get it.
fn missing_note(
    image: &Path,
    id: Option<&[u8]>,
    link: Option<&(String, u32)>,
    fetch_error: String,
) -> String {
    let mut s = format!(
        "{}: no debug file found, so its frames have no file:line",
        image.display()
    );
    match id {
        Some(id) => {
            let path = build_id_path(id).unwrap_or_default();
            let _ = write!(
                s,
                " (build-id {}): install the debug package that provides {} (Debian: the \
                 package's -dbgsym or -dbg), or set DEBUGINFOD_URLS to a debuginfod server that \
                 has it",
                hex(id),
                path.display()
            );
        }
        None => {
            let name = link.map_or("", |l| l.0.as_str());
            let _ = write!(
                s,
                ": put its debug file {name} beside it, in its .debug/ folder or under {DEBUG_DIR}/ \
                 + its folder"
            );
        }
    }
    let _ = write!(s, " (debuginfod: {fetch_error})");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn debuglink_names_that_leave_the_folder_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x.debug",
            "a/b.debug",
            "/etc/shadow",
            "x\0y",
        ] {
            assert!(!plain_file_name(bad), "{bad:?}");
        }
        assert!(plain_file_name("libc.so.6.debug"));
        assert!(plain_file_name("..debug"));
    }

    proptest! {
        /// Whatever bytes a build-id note holds, its path is two hex folders under
        /// `/usr/lib/debug/.build-id/` and nothing else.
        #[test]
        fn a_build_id_path_never_leaves_the_debug_folder(id in proptest::collection::vec(any::<u8>(), 0..80)) {
            match build_id_path(&id) {
                None => prop_assert!(id.len() < 2),
                Some(p) => {
                    let rest = p.strip_prefix("/usr/lib/debug/.build-id/").unwrap();
                    let parts: Vec<_> = rest.components().collect();
                    prop_assert_eq!(parts.len(), 2);
                    for c in parts {
                        let c = c.as_os_str().to_str().unwrap();
                        prop_assert!(c.trim_end_matches(".debug").bytes().all(|b| b.is_ascii_hexdigit()));
                    }
                }
            }
        }
    }
}
