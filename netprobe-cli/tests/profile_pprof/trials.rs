//! `profile --pprof` read by tools netprobe did not write (run from `profile_e2e.rs`, on the C
//! target that spends 75% of its CPU in `hot()` and 25% in `warm()`):
//!
//! - `go tool pprof -top` on the file of a run lists the same top functions, in the same order,
//!   with each flat and cumulative share within 2 points of netprobe's own table of that run.
//! - speedscope (the npm package, `scripts/fetch-speedscope.sh`) imports the file in headless
//!   Chromium: its sandwich view's DOM names `hot`, `warm` and `main`, and a screenshot of its
//!   left-heavy flame chart is covered by the coloured frame rows (speedscope's landing page,
//!   white, has about 2% coloured pixels; a rendered chart of this profile about 23%).

use fixtures::e2e::{err, succeeded, text};
use fixtures::{netprobe, profile};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

type R = Result<(), String>;

/// The speedscope release the trials load (`scripts/fetch-speedscope.sh`).
pub fn speedscope_index() -> PathBuf {
    fixtures::cache_dir().join("speedscope-1.25.0/dist/release/index.html")
}

/// `netprobe profile -F 999 -c 'PROGRAM SECONDS' --pprof FILE`: the table it printed, every
/// function in it (a busy machine samples the start-up code's many functions too, and `main`,
/// with no samples of its own, would fall off the top 20).
fn profile_to_pprof(program: &Path, seconds: u32, file: &Path) -> Result<String, String> {
    let out = netprobe::command()
        .args(["profile", "-F", "999", "--top", "1000", "--pprof"])
        .arg(file)
        .arg("-c")
        .arg(format!("{} {seconds}", program.display()))
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile --pprof")?;
    Ok(text(&out.stdout))
}

/// A share as the tables print it: `74.92%`.
fn percent(s: &str) -> Option<f64> {
    s.strip_suffix('%')?.parse().ok()
}

/// netprobe's table: (function, self%, total%) of each row of its first part.
fn table_rows(table: &str) -> Vec<(String, f64, f64)> {
    table
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("self"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.get(4..)?.join(" ");
            Some((name, percent(f[1])?, percent(f[3])?))
        })
        .collect()
}

/// `go tool pprof -top`'s rows: (function, flat%, cum%).
fn pprof_top_rows(top: &str) -> Vec<(String, f64, f64)> {
    top.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.get(5..)?.join(" ");
            let name = name.strip_suffix(" (inline)").unwrap_or(&name).to_string();
            Some((name, percent(f[1])?, percent(f[4])?))
        })
        .collect()
}

/// `go tool pprof -top` lists the table's top functions with the table's shares (2 points).
pub fn pprof_top_matches_the_table(program: &Path) -> R {
    let file = profile::artifacts().join("cpu.pb.gz");
    let table = profile_to_pprof(program, 2, &file)?;
    let out = Command::new("go")
        .args(["tool", "pprof", "-top"])
        .arg(&file)
        .output()
        .map_err(err)?;
    let top = text(&succeeded(out, "go tool pprof -top")?.stdout);
    eprintln!("netprobe:\n{table}\ngo tool pprof -top:\n{top}");
    let ours = table_rows(&table);
    let theirs = pprof_top_rows(&top);
    // The functions with at least 1% of the samples to themselves, as each tool orders them.
    let hot = |rows: &[(String, f64, f64)]| -> Vec<String> {
        rows.iter()
            .filter(|r| r.1 >= 1.0)
            .map(|r| r.0.clone())
            .collect()
    };
    if hot(&ours) != hot(&theirs) || !hot(&ours).starts_with(&["hot".into(), "warm".into()]) {
        return Err(format!(
            "top functions differ: netprobe {:?}, pprof {:?}",
            hot(&ours),
            hot(&theirs)
        ));
    }
    let names = hot(&ours).into_iter().chain(["main".to_string()]);
    for name in names {
        let row = |rows: &[(String, f64, f64)]| rows.iter().find(|r| r.0 == name).cloned();
        let (Some(a), Some(b)) = (row(&ours), row(&theirs)) else {
            return Err(format!("{name} is missing from one of the tables"));
        };
        if (a.1 - b.1).abs() > 2.0 || (a.2 - b.2).abs() > 2.0 {
            return Err(format!(
                "{name}: netprobe self {:.2}% total {:.2}%, pprof flat {:.2}% cum {:.2}%",
                a.1, a.2, b.1, b.2
            ));
        }
    }
    // The samples carry their process: pprof's tag filter on the command name keeps them all.
    // The kernel keeps 15 bytes of a command name (TASK_COMM_LEN).
    let name = program.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let comm = &name[..name.len().min(15)];
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=3"])
        .arg(format!("-tagfocus=comm={comm}"))
        .arg(&file)
        .output()
        .map_err(err)?;
    let focused = pprof_top_rows(&text(&succeeded(out, "pprof -tagfocus")?.stdout));
    if focused.first().map(|r| r.0.as_str()) != Some("hot") {
        return Err(format!("-tagfocus=comm={comm} kept {focused:?}"));
    }
    Ok(())
}

/// The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's screenshots are),
/// as (width, height, RGB triples).
fn png_pixels(png: &[u8]) -> Result<(usize, usize, Vec<[u8; 3]>), String> {
    let mut at = 8;
    let (mut width, mut height, mut channels) = (0, 0, 0);
    let mut idat = Vec::new();
    while at + 12 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        let body = png.get(at + 8..at + 8 + len).ok_or("truncated PNG")?;
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(body[0..4].try_into().unwrap()) as usize;
                height = u32::from_be_bytes(body[4..8].try_into().unwrap()) as usize;
                channels = match (body[8], body[9], body[12]) {
                    (8, 2, 0) => 3,
                    (8, 6, 0) => 4,
                    other => return Err(format!("PNG layout {other:?} not read here")),
                };
            }
            b"IDAT" => idat.extend_from_slice(body),
            _ => {}
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(idat.as_slice())
        .read_to_end(&mut raw)
        .map_err(err)?;
    let stride = width * channels;
    if raw.len() != height * (stride + 1) {
        return Err(format!(
            "PNG data of {} bytes for {width}x{height}",
            raw.len()
        ));
    }
    // Each row's filter undone (PNG specification, 9.2 "Filter types for filter method 0").
    let mut pixels = Vec::with_capacity(width * height);
    let mut prev = vec![0u8; stride];
    for row in raw.chunks(stride + 1) {
        let (filter, data) = (row[0], &row[1..]);
        let mut line = data.to_vec();
        for x in 0..stride {
            let a = if x >= channels { line[x - channels] } else { 0 };
            let (b, c) = (prev[x], if x >= channels { prev[x - channels] } else { 0 });
            let add = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => return Err(format!("PNG filter {f}")),
            };
            line[x] = line[x].wrapping_add(add);
        }
        pixels.extend(line.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        prev = line;
    }
    Ok((width, height, pixels))
}

/// Headless Chromium on speedscope's page with `load` (a script that hands it the profile, as
/// speedscope's own command line does) in `view`; `args` say what to print or write.
fn speedscope_in_chromium(load: &Path, view: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let user_dir = tempfile::tempdir().map_err(err)?;
    let url = format!(
        "file://{}#localProfilePath={}&view={view}",
        speedscope_index().display(),
        load.display()
    );
    let out = profile::headless_chromium(user_dir.path())
        .args([
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
        ])
        .args(args)
        .arg(url)
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(format!("chromium: {}: {}", out.status, text(&out.stderr)));
    }
    Ok(out.stdout)
}

/// speedscope imports the pprof file: its DOM names the functions, its flame chart is drawn.
pub fn pprof_opens_in_speedscope(program: &Path) -> R {
    let dir = profile::artifacts();
    let file = dir.join("speedscope.pb.gz");
    profile_to_pprof(program, 1, &file)?;
    // What `speedscope FILE` (its bin/cli.mjs) writes for the page to load: the file in base64
    // (coreutils' `base64`).
    let out = Command::new("base64")
        .arg("-w0")
        .arg(&file)
        .output()
        .map_err(err)?;
    let b64 = text(&succeeded(out, "base64")?.stdout);
    let load = dir.join("speedscope-load.js");
    std::fs::write(
        &load,
        format!("speedscope.loadFileFromBase64(\"cpu.pb.gz\", \"{b64}\")"),
    )
    .map_err(err)?;
    let dom = text(&speedscope_in_chromium(&load, "sandwich", &["--dump-dom"])?);
    for name in ["hot", "warm", "main"] {
        if !dom.contains(&format!("</span>{name}</td>")) {
            return Err(format!(
                "speedscope's sandwich table has no row {name}: {}",
                &dom[..dom.len().min(2000)]
            ));
        }
    }
    let png = dir.join("speedscope.png");
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    speedscope_in_chromium(&load, "left-heavy", &[&shot])?;
    let (w, h, pixels) = png_pixels(&std::fs::read(&png).map_err(err)?)?;
    let coloured: Vec<&[u8; 3]> = pixels
        .iter()
        .filter(|p| p.iter().max().unwrap() - p.iter().min().unwrap() > 20)
        .collect();
    let share = coloured.len() as f64 / (w * h).max(1) as f64;
    let mut hues: Vec<[u8; 3]> = coloured.iter().map(|p| p.map(|c| c & 0xf0)).collect();
    hues.sort_unstable();
    hues.dedup();
    eprintln!(
        "speedscope screenshot {}: {w}x{h}, {:.1}% coloured, {} colours",
        png.display(),
        share * 100.0,
        hues.len()
    );
    if share < 0.10 || hues.len() < 5 {
        return Err(format!(
            "the screenshot shows no flame chart: {:.1}% coloured pixels in {} colours (see {})",
            share * 100.0,
            hues.len(),
            png.display()
        ));
    }
    Ok(())
}
