//! Files another user controls (RELIABILITY.md, "Hostile targets"): a file shrunk and regrown
//! while netprobe maps it, a FIFO or `/dev/zero` where a file was expected (named on the command
//! line, by a deleted mapping's path, by a process's `--runtimeconfig`), and an ELF file whose
//! symbols all name one long string. netprobe must answer each with an exit code (0, or 1 and one
//! line), in bounded time and memory, never by dying of a signal.
//!
//! The hostile processes run as uid 65534 (nobody) in a directory it owns. They are small Python
//! programs (`python3`): they map a file (so `netprobe ps` reads it) and then change it.

use fixtures::e2e::{self, err, text, Need};
use fixtures::netprobe;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// What a hostile process does with the file it maps: `MODE SRC DST [...]`. `shrink` cuts DST to
/// one page and writes SRC's bytes back, in a loop; `fifo` deletes DST and makes a FIFO at its
/// path; `keep` only holds the mapping. SRC `-` is 64 KiB of zeros. With `NP_EXEC=1` in its
/// environment the mapping is executable (so `trace -p` and `profile -p` read the file as code).
const HOSTILE: &str = r#"
import mmap, os, sys, time
mode, src, dst = sys.argv[1:4]
data = open(src, 'rb').read() if src != '-' else bytes(65536)
fd = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
prot = mmap.PROT_READ | (mmap.PROT_EXEC if os.environ.get('NP_EXEC') else 0)
m = mmap.mmap(fd, len(data), prot=prot)
if mode == 'fifo':
    os.unlink(dst)
    os.mkfifo(dst)
print('ready', flush=True)
while True:
    if mode == 'shrink':
        os.ftruncate(fd, 4096)
        time.sleep(0.003)
        os.pwrite(fd, data, 0)
        time.sleep(0.01)
    else:
        time.sleep(1)
"#;

/// A directory owned by nobody, readable by all.
fn nobodys_dir(tag: &str) -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix(&format!("np-hostile-{tag}-"))
        .tempdir()
        .map_err(err)?;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).map_err(err)?;
    std::os::unix::fs::chown(d.path(), Some(NOBODY), Some(NOBODY)).map_err(err)?;
    Ok(d)
}

/// A copy of a large ELF file (netprobe's own binary) in `dir`, readable by nobody.
fn large_elf_in(dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let orig = dir.join("orig");
    std::fs::copy(netprobe::bin(), &orig).map_err(err)?;
    std::fs::set_permissions(&orig, std::fs::Permissions::from_mode(0o644)).map_err(err)?;
    Ok(orig)
}

/// A hostile process running as nobody (`python` is the interpreter to run it with), killed when
/// dropped. Returns once it has set its file up.
struct Hostile(Child);

impl Hostile {
    fn start(python: &Path, args: &[&str]) -> Result<Hostile, String> {
        Hostile::start_with(Command::new(python), args)
    }

    /// [`Hostile::start`] with its file mapped executable.
    fn start_exec(python: &Path, args: &[&str]) -> Result<Hostile, String> {
        let mut cmd = Command::new(python);
        cmd.env("NP_EXEC", "1");
        Hostile::start_with(cmd, args)
    }

    fn start_with(mut cmd: Command, args: &[&str]) -> Result<Hostile, String> {
        let mut child = cmd
            .arg("-c")
            .arg(HOSTILE)
            .args(args)
            .uid(NOBODY)
            .gid(NOBODY)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(err)?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        BufReader::new(stdout).read_line(&mut line).map_err(err)?;
        if line.trim() != "ready" {
            let _ = child.kill();
            return Err(format!("the hostile process did not start: {line:?}"));
        }
        Ok(Hostile(child))
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs netprobe with `args`, killing it after `limit`: `Err` when it took longer.
fn np_within(args: &[&str], limit: Duration) -> Result<Output, String> {
    let child = netprobe::command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let done = done.clone();
        std::thread::spawn(move || {
            let end = Instant::now() + limit;
            while Instant::now() < end {
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            true
        })
    };
    let out = child.wait_with_output().map_err(err);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let killed = watch.join().unwrap_or(false);
    if killed {
        return Err(format!(
            "netprobe {args:?} still ran after {limit:?}: killed"
        ));
    }
    out
}

/// An answer: exit 0, or exit 1 with exactly one `netprobe: error:` line; never a signal.
fn answered(out: &Output, what: &str) -> Result<(), String> {
    let stderr = text(&out.stderr);
    if let Some(sig) = out.status.signal() {
        return Err(format!("{what}: netprobe died of signal {sig}: {stderr}"));
    }
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) if stderr.lines().count() == 1 && stderr.starts_with("netprobe: error: ") => Ok(()),
        _ => Err(format!("{what}: {:?} {stderr}", out.status)),
    }
}

/// A refusal: exit 1, one line holding every `needles`.
fn refused(out: &Output, needles: &[&str]) -> Result<(), String> {
    let stderr = text(&out.stderr);
    if out.status.code() != Some(1) || stderr.lines().count() != 1 {
        return Err(format!(
            "expected exit 1 and one line: {:?} {stderr}",
            out.status
        ));
    }
    match needles.iter().find(|n| !stderr.contains(*n)) {
        Some(n) => Err(format!("expected {n:?} in: {stderr}")),
        None => Ok(()),
    }
}

fn python() -> PathBuf {
    PathBuf::from("/usr/bin/python3")
}

const LIVE: &[Need] = &[Need::Root, Need::Program("python3")];

/// `netprobe symbols` of a file nobody shrinks and regrows in a loop, run `runs` times.
fn symbols_of_a_shrinking_file(runs: usize) -> Result<(), String> {
    let dir = nobodys_dir("shrink")?;
    let orig = large_elf_in(dir.path())?;
    let copy = dir.path().join("copy");
    let (o, c) = (orig.display().to_string(), copy.display().to_string());
    let _hostile = Hostile::start(&python(), &["shrink", &o, &c])?;
    for i in 0..runs {
        let out = np_within(&["symbols", &c], Duration::from_secs(120))?;
        answered(&out, &format!("run {i} of symbols"))?;
    }
    Ok(())
}

/// `netprobe ps` while nobody's process maps a file named `libcoreclr.so` (so `ps` takes it for
/// .NET and scans the file for the runtime's version) and shrinks and regrows it.
fn ps_while_a_mapped_file_shrinks(runs: usize) -> Result<(), String> {
    let dir = nobodys_dir("ps-shrink")?;
    let orig = large_elf_in(dir.path())?;
    let lib = dir.path().join("libcoreclr.so");
    let (o, l) = (orig.display().to_string(), lib.display().to_string());
    let _hostile = Hostile::start(&python(), &["shrink", &o, &l])?;
    for i in 0..runs {
        let out = np_within(&["ps"], Duration::from_secs(120))?;
        answered(&out, &format!("run {i} of ps"))?;
    }
    Ok(())
}

/// `trace -p` (planned with `--dry-run`, `runs` times, then `count -p` placed for a second) and
/// `profile -p` of a process of nobody's that maps a large ELF file executable and shrinks and
/// regrows it in a loop: each run answers (exit 0, or one line and exit 1), never a signal.
fn trace_and_profile_while_a_mapped_file_shrinks(runs: usize) -> Result<(), String> {
    let dir = nobodys_dir("trace-shrink")?;
    let orig = large_elf_in(dir.path())?;
    let copy = dir.path().join("copy");
    let (o, c) = (orig.display().to_string(), copy.display().to_string());
    let hostile = Hostile::start_exec(&python(), &["shrink", &o, &c])?;
    let pid = hostile.0.id().to_string();
    for i in 0..runs {
        let out = np_within(
            &["trace", "--dry-run", "-p", &pid, "copy:main"],
            Duration::from_secs(120),
        )?;
        answered(&out, &format!("run {i} of trace --dry-run -p"))?;
    }
    let live = ["count", "-p", &pid, "copy:main", "--duration", "1s"];
    answered(&np_within(&live, Duration::from_secs(120))?, "count -p")?;
    let profile = ["profile", "-p", &pid, "--duration", "1s"];
    answered(
        &np_within(&profile, Duration::from_secs(120))?,
        "profile -p",
    )?;
    Ok(())
}

/// `trace -p`, `count -p` and `profile -p` of a process of nobody's that maps a file executable,
/// then deletes it and puts a FIFO at its path: each finishes with an answer.
fn trace_and_profile_with_a_fifo_at_a_deleted_mapping() -> Result<(), String> {
    let dir = nobodys_dir("trace-fifo")?;
    let lib = dir.path().join("libnp.so");
    let hostile = Hostile::start_exec(&python(), &["fifo", "-", &lib.display().to_string()])?;
    let pid = hostile.0.id().to_string();
    for args in [
        &["trace", "--dry-run", "-p", &pid, "libnp.so:np_add"][..],
        &["count", "-p", &pid, "np_add", "--duration", "1s"],
        &["profile", "-p", &pid, "--duration", "1s"],
    ] {
        answered(&np_within(args, Duration::from_secs(60))?, &args.join(" "))?;
    }
    Ok(())
}

/// `netprobe ps` while nobody's process maps a `libcoreclr.so` it deleted and put a FIFO in place
/// of.
fn ps_with_a_fifo_at_a_deleted_mapping() -> Result<(), String> {
    let dir = nobodys_dir("ps-fifo")?;
    let lib = dir.path().join("libcoreclr.so");
    let _hostile = Hostile::start(&python(), &["fifo", "-", &lib.display().to_string()])?;
    ps_finishes()
}

/// `netprobe ps` while a process that looks like `dotnet --runtimeconfig /dev/zero ...` runs: a
/// copy of the Python interpreter named `dotnet` that maps a `libcoreclr.so` under a versioned
/// framework folder.
fn ps_with_runtimeconfig_dev_zero() -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let dir = nobodys_dir("ps-zero")?;
    let dotnet = dir.path().join("dotnet");
    std::fs::copy(python(), &dotnet).map_err(err)?;
    std::fs::set_permissions(&dotnet, std::fs::Permissions::from_mode(0o755)).map_err(err)?;
    let fw = dir.path().join("shared/Microsoft.NETCore.App/8.0.4");
    std::fs::create_dir_all(&fw).map_err(err)?;
    for d in [
        dir.path().join("shared"),
        dir.path().join("shared/Microsoft.NETCore.App"),
        fw.clone(),
    ] {
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).map_err(err)?;
    }
    let lib = fw.join("libcoreclr.so").display().to_string();
    let _hostile = Hostile::start(
        &dotnet,
        &["keep", "-", &lib, "--runtimeconfig", "/dev/zero"],
    )?;
    ps_finishes()
}

/// `netprobe ps` lists every process (exit 0) within a minute.
fn ps_finishes() -> Result<(), String> {
    let out = np_within(&["ps"], Duration::from_secs(60))?;
    answered(&out, "ps")?;
    if !out.status.success() {
        return Err(format!("ps failed: {}", text(&out.stderr)));
    }
    Ok(())
}

/// `netprobe symbols` of a FIFO and of `/dev/zero`: refused at once, unread.
fn symbols_of_special_files() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().map_err(err)?;
    if !made.success() {
        return Err("mkfifo failed".into());
    }
    let out = np_within(
        &["symbols", &fifo.display().to_string()],
        Duration::from_secs(10),
    )?;
    refused(&out, &["is a FIFO", "not a regular file"])?;
    let out = np_within(&["symbols", "/dev/zero"], Duration::from_secs(10))?;
    refused(
        &out,
        &["/dev/zero is a character device", "not a regular file"],
    )
}

/// A little-endian ELF64 file of `names_len` bytes of one name and `symbols` function symbols
/// naming it: the first at its start, each next one a byte further in (so each name is a
/// different suffix of the one string, and no sharing of equal names could help).
fn elf_with_shared_names(names_len: usize, symbols: usize) -> Vec<u8> {
    let mut strtab = vec![0u8];
    strtab.extend(std::iter::repeat_n(b'n', names_len));
    strtab.push(0);
    let shstrtab = b"\0.symtab\0.strtab\0.shstrtab\0.text\0".to_vec();
    let text_at = 0x1000u64;
    let text_len = 0x1000u64;
    let mut symtab = vec![0u8; 24]; // the null symbol
    for i in 0..symbols {
        let mut s = [0u8; 24];
        s[0..4].copy_from_slice(&(1 + i as u32).to_le_bytes()); // st_name
        s[4] = 0x12; // STB_GLOBAL, STT_FUNC
        s[6..8].copy_from_slice(&4u16.to_le_bytes()); // st_shndx: .text
        s[8..16].copy_from_slice(&(0x401000u64 + i as u64).to_le_bytes()); // st_value
        s[16..24].copy_from_slice(&1u64.to_le_bytes()); // st_size
        symtab.extend_from_slice(&s);
    }
    let mut file = vec![0u8; (text_at + text_len) as usize];
    let symtab_at = file.len();
    file.extend_from_slice(&symtab);
    let strtab_at = file.len();
    file.extend_from_slice(&strtab);
    let shstrtab_at = file.len();
    file.extend_from_slice(&shstrtab);
    while !file.len().is_multiple_of(8) {
        file.push(0);
    }
    let shoff = file.len();
    // Section headers: null, .symtab, .strtab, .shstrtab, .text.
    let sh = |name: u32,
              ty: u32,
              flags: u64,
              addr: u64,
              off: usize,
              size: usize,
              link: u32,
              entsize: u64| {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&ty.to_le_bytes());
        h[8..16].copy_from_slice(&flags.to_le_bytes());
        h[16..24].copy_from_slice(&addr.to_le_bytes());
        h[24..32].copy_from_slice(&(off as u64).to_le_bytes());
        h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
        h[40..44].copy_from_slice(&link.to_le_bytes());
        h[48..56].copy_from_slice(&8u64.to_le_bytes());
        h[56..64].copy_from_slice(&entsize.to_le_bytes());
        h
    };
    file.extend_from_slice(&[0u8; 64]);
    file.extend_from_slice(&sh(1, 2, 0, 0, symtab_at, symtab.len(), 2, 24));
    file.extend_from_slice(&sh(9, 3, 0, 0, strtab_at, strtab.len(), 0, 0));
    file.extend_from_slice(&sh(17, 3, 0, 0, shstrtab_at, shstrtab.len(), 0, 0));
    file.extend_from_slice(&sh(
        27,
        1,
        6,
        0x401000,
        text_at as usize,
        text_len as usize,
        0,
        0,
    ));
    // ELF header.
    let mut h = [0u8; 64];
    h[0..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // ELFCLASS64
    h[5] = 1; // ELFDATA2LSB
    h[6] = 1; // EV_CURRENT
    h[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    h[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[24..32].copy_from_slice(&0x401000u64.to_le_bytes()); // e_entry
    h[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    h[40..48].copy_from_slice(&(shoff as u64).to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    h[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    h[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    h[60..62].copy_from_slice(&5u16.to_le_bytes()); // e_shnum
    h[62..64].copy_from_slice(&3u16.to_le_bytes()); // e_shstrndx
    file[..64].copy_from_slice(&h);
    // One PT_LOAD, R+X, of the code page.
    let mut ph = [0u8; 56];
    ph[0..4].copy_from_slice(&1u32.to_le_bytes());
    ph[4..8].copy_from_slice(&5u32.to_le_bytes());
    ph[8..16].copy_from_slice(&text_at.to_le_bytes());
    ph[16..24].copy_from_slice(&0x401000u64.to_le_bytes());
    ph[24..32].copy_from_slice(&0x401000u64.to_le_bytes());
    ph[32..40].copy_from_slice(&text_len.to_le_bytes());
    ph[40..48].copy_from_slice(&text_len.to_le_bytes());
    ph[48..56].copy_from_slice(&0x1000u64.to_le_bytes());
    file[64..120].copy_from_slice(&ph);
    file
}

/// `netprobe symbols` of a 1 MB ELF file whose 1,000 symbols name successive suffixes of one
/// 1 MiB string, under a 1 GiB address-space limit (`prlimit --as`): refused in bounded time and
/// memory with one line (before the bound: every name copied, 1 GiB of names, killed by the
/// allocation failure).
fn symbols_sharing_one_long_name() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let elf = dir.path().join("shared-names");
    std::fs::write(&elf, elf_with_shared_names(1 << 20, 1000)).map_err(err)?;
    symbols_refused_within_bounds(&elf, &[], &["add up to more than"])
}

/// The NUL terminators of the strings in `bytes[range]` (but the first and last byte's)
/// replaced by `A`: each string then runs on to the end of the range, so every name of a table
/// that names strings there (by offset, as the `#Strings` heap and Go's `funcnametab` are named)
/// becomes a suffix of one long string, as long as the range.
fn join_strings(bytes: &mut [u8], range: std::ops::Range<usize>) {
    let inner = range.start + 1..range.end - 1;
    for b in &mut bytes[inner] {
        if *b == 0 {
            *b = b'A';
        }
    }
}

/// `netprobe symbols FILE [PATTERN]` under a 1 GiB address-space limit (`prlimit --as`):
/// refused with one line that holds one of `needles` (exit 1), within 30 s.
fn symbols_refused_within_bounds(
    file: &Path,
    pattern: &[&str],
    needles: &[&str],
) -> Result<(), String> {
    let start = Instant::now();
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 1u64 << 30))
        .arg(netprobe::bin())
        .arg("symbols")
        .arg(file)
        .args(pattern)
        .stdout(Stdio::null())
        .output()
        .map_err(err)?;
    let took = start.elapsed();
    let stderr = text(&out.stderr);
    if out.status.code() != Some(1) || stderr.lines().count() != 1 {
        return Err(format!(
            "expected exit 1 and one line after {took:?}: {:?} {stderr}",
            out.status
        ));
    }
    if !needles.iter().any(|n| stderr.contains(n)) {
        return Err(format!("expected one of {needles:?} in: {stderr}"));
    }
    if took > Duration::from_secs(30) {
        return Err(format!("took {took:?}"));
    }
    Ok(())
}

fn corelib() -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll")
}

fn esbuild() -> PathBuf {
    fixtures::cache_dir().join("go-binaries/esbuild-0.17.19")
}

/// `netprobe symbols` of .NET 8's CoreLib whose `#Strings` heap (ECMA-335 II.24.2.3) has its
/// first `joined` bytes joined into one string: the type, method and namespace names there are
/// suffixes of it, so each of its 36,000 ReadyToRun methods composes an owner, a name and
/// parameter types of up to `joined` bytes each (GiB in all). Refused with one line holding
/// one of `needles`, in bounded time and memory (before: the type-name cache grew until the allocation
/// failed, SIGABRT at the 1 GiB limit).
fn dotnet_methods_sharing_long_names(joined: usize, needles: &[&str]) -> Result<(), String> {
    let mut bytes = std::fs::read(corelib()).map_err(err)?;
    let range = {
        let asm = netprobe_core::dotnet::Assembly::parse(corelib(), bytes.clone()).map_err(err)?;
        let heap = asm
            .metadata()
            .strings_heap()
            .ok_or("CoreLib has no #Strings heap")?;
        let at = heap.as_ptr() as usize - asm.bytes().as_ptr() as usize;
        at..at + heap.len().min(joined)
    };
    join_strings(&mut bytes, range);
    let dir = tempfile::tempdir().map_err(err)?;
    let dll = dir.path().join("System.Private.CoreLib.dll");
    std::fs::write(&dll, bytes).map_err(err)?;
    symbols_refused_within_bounds(&dll, &[], needles)
}

/// `netprobe symbols GO-BINARY '*packet*'` (the filtered listing) of esbuild whose
/// `funcnametab` (`runtime/symtab.go` `pcHeader.funcnameOffset` up to `cuOffset`) is one
/// 328 KiB string: all 6,840 functions match, each named by a suffix of it (1.1 GB in all).
/// Refused within the name budget (before: SIGABRT at the 1 GiB limit after 39 s).
fn go_filtered_listing_sharing_long_names() -> Result<(), String> {
    let mut bytes = std::fs::read(esbuild()).map_err(err)?;
    let table = {
        let bin = netprobe_core::golang::GoBinary::parse(esbuild(), &bytes)
            .map_err(err)?
            .ok_or("esbuild is not a Go binary")?;
        bin.pclntab_location().file_offset.0 as usize
    };
    // pcHeader: magic (4), pad (2), minLC, ptrSize, then words of 8 bytes: nfunc, nfiles,
    // textStart, funcnameOffset, cuOffset, ... (Go 1.18 and later).
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let names = table + word(table + 32)..table + word(table + 40);
    join_strings(&mut bytes, names);
    let dir = tempfile::tempdir().map_err(err)?;
    let bin = dir.path().join("esbuild");
    std::fs::write(&bin, bytes).map_err(err)?;
    symbols_refused_within_bounds(&bin, &["*packet*"], &["add up to more than"])
}

fn main() {
    let runs = |default: usize| {
        std::env::var("NETPROBE_HOSTILE_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    e2e::run(vec![
        e2e::trial(
            "hostile_file_fifo_and_dev_zero_symbols_refused_unread",
            &[],
            symbols_of_special_files,
        ),
        e2e::trial(
            "hostile_file_shrunk_while_symbols_reads_it_is_an_answer_not_a_signal",
            LIVE,
            move || symbols_of_a_shrinking_file(runs(30)),
        ),
        e2e::trial(
            "hostile_file_shrunk_while_ps_scans_it_is_an_answer_not_a_signal",
            LIVE,
            move || ps_while_a_mapped_file_shrinks(runs(6)),
        ),
        e2e::trial(
            "hostile_file_shrunk_while_trace_and_profile_read_it_is_an_answer_not_a_signal",
            &[Need::Root, Need::Tracefs, Need::Program("python3")],
            move || trace_and_profile_while_a_mapped_file_shrinks(runs(10)),
        ),
        e2e::trial(
            "hostile_file_fifo_at_a_deleted_mapping_trace_and_profile_finish",
            &[Need::Root, Need::Tracefs, Need::Program("python3")],
            trace_and_profile_with_a_fifo_at_a_deleted_mapping,
        ),
        e2e::trial(
            "hostile_file_fifo_at_a_deleted_mapping_ps_finishes",
            LIVE,
            ps_with_a_fifo_at_a_deleted_mapping,
        ),
        e2e::trial(
            "hostile_file_runtimeconfig_dev_zero_ps_finishes",
            LIVE,
            ps_with_runtimeconfig_dev_zero,
        ),
        e2e::trial(
            "hostile_file_symbols_sharing_one_long_name_refused_within_bounds",
            &[Need::Program("prlimit")],
            symbols_sharing_one_long_name,
        ),
        // 192 KiB: names of up to 192 KiB, a few per method; their total passes the budget
        // (4 x 12.8 MB + 64 MiB) after some hundreds of methods.
        e2e::trial(
            "hostile_file_dotnet_methods_sharing_long_names_refused_within_bounds",
            &[Need::Program("prlimit"), Need::Path(corelib())],
            || dotnet_methods_sharing_long_names(192 << 10, &["add up to more than"]),
        ),
        // The whole heap (464 KiB): a method's parameters name types of hundreds of KiB each,
        // and its name alone passes the longest one composed (1 MiB), at CoreLib's third method.
        e2e::trial(
            "hostile_file_dotnet_method_name_past_the_longest_refused_within_bounds",
            &[Need::Program("prlimit"), Need::Path(corelib())],
            || {
                dotnet_methods_sharing_long_names(
                    usize::MAX,
                    // The other naming thread may pass the budget first.
                    &[
                        "a method's name would be longer than",
                        "add up to more than",
                    ],
                )
            },
        ),
        e2e::trial(
            "hostile_file_go_filtered_listing_sharing_long_names_refused_within_bounds",
            &[Need::Program("prlimit"), Need::Path(esbuild())],
            go_filtered_listing_sharing_long_names,
        ),
    ])
}
