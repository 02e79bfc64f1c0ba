//! Hostile paths, ELF files and specs (RELIABILITY.md, "Hostile inputs"): each is refused with
//! one line naming the cause and a non-zero exit, and nothing written to `uprobe_events` names
//! the input. Root, tracefs, a C compiler.
//!
//! Target: `fixtures/c/tracee.c` ([`fixtures::tracee`]).

use fixtures::e2e::{self, err, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::process::Command;

/// ELF64 little-endian: (offset, entry size, count, link) of the section of type `sh_type`.
fn section(elf: &[u8], sh_type: u32) -> Option<(usize, usize, usize, usize)> {
    let u16_at = |o: usize| -> Option<usize> {
        Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?).into())
    };
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?)) };
    let u64_at = |o: usize| -> Option<usize> {
        Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?) as usize)
    };
    let shoff = u64_at(0x28)?;
    let (shentsize, shnum) = (u16_at(0x3a)?, u16_at(0x3c)?);
    (0..shnum).find_map(|i| {
        let sh = shoff + i * shentsize;
        (u32_at(sh + 4)? == sh_type).then_some((
            u64_at(sh + 0x18)?,
            u64_at(sh + 0x38)?,
            u64_at(sh + 0x20)? / u64_at(sh + 0x38)?.max(1),
            u32_at(sh + 0x28)? as usize,
        ))
    })
}

/// Rewrites the value (address) of symbol `name` in `.symtab` (SHT_SYMTAB = 2, its names in
/// the string table its `sh_link` names; ELF64 `Elf64_Sym`: name u32, info, other, shndx u16,
/// value u64 at +8).
fn patch_symbol_value(elf: &mut [u8], name: &str, value: u64) -> Result<(), String> {
    let (off, ent, n, link) = section(elf, 2).ok_or("no .symtab")?;
    let shoff = u64::from_le_bytes(elf[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(elf[0x3a..0x3c].try_into().unwrap()) as usize;
    let strtab = u64::from_le_bytes(
        elf[shoff + link * shentsize + 0x18..shoff + link * shentsize + 0x20]
            .try_into()
            .unwrap(),
    ) as usize;
    for i in 0..n {
        let s = off + i * ent;
        let name_off = u32::from_le_bytes(elf[s..s + 4].try_into().unwrap()) as usize;
        let at = &elf[strtab + name_off..];
        let end = at.iter().position(|&b| b == 0).unwrap_or(0);
        if &at[..end] == name.as_bytes() {
            elf[s + 8..s + 16].copy_from_slice(&value.to_le_bytes());
            return Ok(());
        }
    }
    Err(format!("no symbol {name}"))
}

/// One trial per row of the hostile-input table.
fn hostile_trials() -> Vec<e2e::E2eTrial> {
    let named = |dir_name: &'static str, needles: &'static [&'static str]| {
        move || -> Result<(), String> {
            let dir = tracee::scratch("name")?;
            let sub = dir.path().join(dir_name);
            let bin = tracee::copy_at(&sub, "tracee")?;
            let b = bin.display().to_string();
            let cmd = format!("{} now 2", tracee::bin().display());
            let out = netprobe::output(&["count", "-c", &cmd, &format!("{b}:np_add")])?;
            netprobe::refused(&out, 1, needles)?;
            session::nothing_registered_for(&sub.display().to_string())
        }
    };
    vec![
        e2e::trial(
            "hostile_path_with_space",
            NEEDS,
            named("a b", &["a path with whitespace cannot be probed"]),
        ),
        e2e::trial(
            "hostile_path_with_newline",
            NEEDS,
            named("a\nb", &["a path with whitespace cannot be probed"]),
        ),
        e2e::trial(
            "hostile_path_with_hash",
            NEEDS,
            named("a#b", &["contains '#'", "comment"]),
        ),
        e2e::trial(
            "hostile_path_with_colon",
            NEEDS,
            named("a:b", &["a path holding ':' cannot be named"]),
        ),
        e2e::trial(
            "hostile_path_with_shell_metacharacters_is_traced_literally",
            NEEDS,
            move || {
                // No shell ever sees the path: it is traced as the file it names, and the command
                // substitution in its name runs nowhere.
                let dir = tracee::scratch("meta")?;
                let marker = dir.path().join("pwned");
                let sub = dir
                    .path()
                    .join(format!(";$(touch${{IFS}}{})|&`x`", marker.display()));
                let bin = tracee::copy_at(&sub, "tracee")?;
                let b = bin.display().to_string();
                let cmd = format!("{b} now 3");
                let out = netprobe::command()
                    .args(["count", "-c"])
                    .arg(&cmd)
                    .arg(format!("{b}:np_add"))
                    .output()
                    .map_err(err)?;
                if !out.status.success()
                    || netprobe::counted(&out, "np_add") != Some(3)
                    || marker.exists()
                {
                    return Err(format!(
                        "{:?} {} {} marker={}",
                        out.status,
                        e2e::text(&out.stdout),
                        e2e::text(&out.stderr),
                        marker.exists()
                    ));
                }
                session::nothing_registered_for(&b)
            },
        ),
        e2e::trial(
            "hostile_symlink_out_of_a_container_root",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("chroot"),
            ],
            move || {
                // A process in its own root (chroot, as a container's) whose root holds
                // `/evil -> HOST_FILE`: through /proc/PID/root the absolute link would lead to
                // the host's file. netprobe only probes files the process maps (by the paths
                // /proc/PID/maps gives), so the link is refused and the host file left alone.
                let (_host_dir, host) = tracee::own_copy("host")?;
                let root = tracee::scratch("root")?;
                let r = root.path();
                for lib in [
                    "/lib64/ld-linux-x86-64.so.2",
                    "/lib/x86_64-linux-gnu/libc.so.6",
                ] {
                    let to = r.join(lib.trim_start_matches('/'));
                    std::fs::create_dir_all(to.parent().unwrap()).map_err(err)?;
                    std::fs::copy(lib, &to).map_err(err)?;
                }
                tracee::copy_at(r, "app")?;
                std::os::unix::fs::symlink(&host, r.join("evil")).map_err(err)?;
                let w = fixtures::live::Waiting::start(
                    Command::new("chroot").arg(r).args(["/app", "stdin", "1"]),
                )?;
                let pid = w.ready.trim().trim_start_matches("ready ").to_string();
                let out = netprobe::output(&["trace", "-p", &pid, "/evil:np_add"])?;
                drop(w);
                netprobe::refused(&out, 1, &["/evil is not mapped in process"])?;
                session::nothing_registered_for(&host)
            },
        ),
        e2e::trial("hostile_symbol_outside_every_segment", NEEDS, move || {
            let dir = tracee::scratch("sym")?;
            let bin = tracee::copy_at(dir.path(), "tracee")?;
            let mut elf = std::fs::read(&bin).map_err(err)?;
            patch_symbol_value(&mut elf, "np_add", 0x7fff_dead_0000)?;
            std::fs::write(&bin, &elf).map_err(err)?;
            let b = bin.display().to_string();
            let out =
                netprobe::output(&["count", "-c", &format!("{b} now 1"), &format!("{b}:np_add")])?;
            netprobe::refused(&out, 1, &["np_add", "no file offset"])?;
            session::nothing_registered_for(&b)
        }),
        e2e::trial(
            "hostile_section_table_past_the_end_of_file",
            NEEDS,
            move || {
                let dir = tracee::scratch("shoff")?;
                let bin = tracee::copy_at(dir.path(), "tracee")?;
                let mut elf = std::fs::read(&bin).map_err(err)?;
                let past = (elf.len() as u64 + 0x1000_0000).to_le_bytes();
                elf[0x28..0x30].copy_from_slice(&past);
                elf[0x3c..0x3e].copy_from_slice(&0xffffu16.to_le_bytes());
                std::fs::write(&bin, &elf).map_err(err)?;
                let b = bin.display().to_string();
                let out = netprobe::output(&[
                    "count",
                    "-c",
                    &format!("{} now 1", tracee::bin().display()),
                    &format!("{b}:np_add"),
                ])?;
                netprobe::refused(&out, 1, &[&b])?;
                session::nothing_registered_for(&b)
            },
        ),
        e2e::trial("hostile_spec_with_300_arguments", NEEDS, move || {
            let (_dir, tp) = tracee::own_copy("h")?;
            let spec = format!("{}:np_add {}", tp, vec!["u64"; 300].join(" "));
            let out = netprobe::output(&["trace", "-c", &format!("{} now 1", tp), &spec])?;
            netprobe::refused(&out, 1, &["301 arguments", "at most 128"])?;
            session::nothing_registered_for(&tp)
        }),
        e2e::trial("hostile_absurd_offset", NEEDS, move || {
            let (_dir, tp) = tracee::own_copy("h")?;
            let out = netprobe::output(&[
                "count",
                "-c",
                &format!("{} now 1", tp),
                &format!("{}:0xffffffffffff", tp),
            ])?;
            netprobe::refused(&out, 1, &["no executable segment"])?;
            session::nothing_registered_for(&tp)
        }),
        e2e::trial("hostile_absurd_buffer_size", NEEDS, move || {
            let (_dir, tp) = tracee::own_copy("h")?;
            let out = netprobe::output(&[
                "count",
                "--buffer-kb",
                "99999999999",
                "-c",
                &format!("{} now 1", tp),
                &format!("{}:np_add", tp),
            ])?;
            netprobe::refused(&out, 1, &["--buffer-kb 99999999999", "1 to 1048576 KiB"])?;
            session::nothing_registered_for(&tp)
        }),
    ]
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
        tracee::busy();
    }
    let mut trials = Vec::new();
    trials.extend(hostile_trials());
    e2e::run(trials);
}
