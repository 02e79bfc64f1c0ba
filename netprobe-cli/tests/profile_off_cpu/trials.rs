//! Off-CPU and wall-clock profiles of `fixtures/c/off_cpu_waits.c`, checked against what the
//! program measured itself and against its design (run from `profile_e2e.rs`, one test binary
//! for every profile of a C program):
//!
//! - `--off-cpu`: the main thread waits 70% of the time in `wait_a` (a sleep) and 30% in
//!   `read_b` (a pipe read the helper thread answers 30 ms later): the profile's time under each
//!   matches the program's own clock within 5 points, each ends in the wait's reason
//!   (`[off-cpu: sleep]`, `[off-cpu: I/O read]`), and all the time of both threads is there.
//! - `--wall`: a thread computing 20 ms then sleeping 20 ms shows 50/50 within 5 points.
//! - `--wall --trigger handle`: of a thread alternating `handle()` and `background()` (each
//!   10 ms on the CPU, 10 ms asleep), only the time under `handle` is counted: none under
//!   `background`, about half the thread's time in all, itself half on and half off the CPU;
//!   and the trigger's probes are gone afterwards.

use fixtures::e2e::{err, succeeded, text};
use fixtures::{netprobe, profile};
use serde_json::Value as Json;

type R = Result<(), String>;

/// Microseconds of the `--json` profile `v` under a stack holding `function` and ending in a
/// frame that starts with `leaf` ("" for any).
fn time_under(v: &Json, function: &str, leaf: &str) -> u64 {
    profile::stacks(v)
        .iter()
        .filter(|(frames, _)| {
            frames.iter().any(|f| f == function)
                && frames.last().is_some_and(|l| l.starts_with(leaf))
        })
        .map(|(_, n)| n)
        .sum()
}

fn run_profile(
    program: &std::path::Path,
    mode: &str,
    args: &str,
) -> Result<(Json, String), String> {
    run_profile_with(program, &[mode], args)
}

/// `netprobe profile OPTIONS --json -c 'PROGRAM ARGS'`: its JSON and stdout.
fn run_profile_with(
    program: &std::path::Path,
    options: &[&str],
    args: &str,
) -> Result<(Json, String), String> {
    let out = netprobe::command()
        .arg("profile")
        .args(options)
        .args(["--json", "-c"])
        .arg(format!("{} {args}", program.display()))
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile -c")?;
    Ok((profile::json_of(&out)?, text(&out.stdout)))
}

pub fn c_off_cpu_shares_match_the_programs_clock(program: &std::path::Path) -> R {
    let (v, stdout) = run_profile(program, "--off-cpu", "waits 3")?;
    if v["unit"] != "us" || v["lost"] != 0 {
        return Err(format!("unit or lost: {v}"));
    }
    let a = time_under(&v, "wait_a", "[off-cpu: sleep]");
    let b = time_under(&v, "read_b", "[off-cpu: I/O read]");
    let (own_a, own_b): (f64, f64) = stdout
        .lines()
        .find_map(|l| {
            let mut w = l.strip_prefix("waited ")?.split(' ');
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .ok_or_else(|| format!("no `waited` line in {stdout}"))?;
    let share = profile::pct(a, a + b);
    let own_share = 100.0 * own_a / (own_a + own_b);
    eprintln!(
        "wait_a {a} us, read_b {b} us: {share:.1}% in wait_a (the program measured {own_share:.1}%, by design 70%)"
    );
    if (share - own_share).abs() > 5.0 || (share - 70.0).abs() > 5.0 {
        return Err(format!(
            "wait_a share {share:.1}%, program {own_share:.1}%: {}",
            profile::stacks(&v)
                .iter()
                .map(|(f, n)| format!("{} {n}", f.join(";")))
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    // The profile's time under each is the program's own to within 5% (the first and last
    // waits may be cut by the profile's start and end).
    for (name, got, own) in [("wait_a", a, own_a), ("read_b", b, own_b)] {
        let own_us = own * 1e6;
        if (got as f64 - own_us).abs() > 0.05 * own_us {
            return Err(format!(
                "{name}: {got} us in the profile, {own_us:.0} us measured"
            ));
        }
    }
    // The helper thread's waits are there too: on the ask pipe, and its 30 ms sleeps.
    if time_under(&v, "helper", "[off-cpu: I/O read]") == 0
        || time_under(&v, "helper", "[off-cpu: sleep]") == 0
    {
        return Err(format!("no helper waits: {v}"));
    }
    Ok(())
}

pub fn c_wall_half_computing_half_sleeping(program: &std::path::Path) -> R {
    let (v, _) = run_profile(program, "--wall", "half 3")?;
    let computing = time_under(&v, "compute", "");
    let resting = time_under(&v, "rest", "[off-cpu: sleep]");
    let share = profile::pct(computing, computing + resting);
    eprintln!("compute {computing} us, rest {resting} us: {share:.1}% computing");
    if (share - 50.0).abs() > 5.0 || v["samples"].as_u64().unwrap_or(0) < 20 {
        return Err(format!("compute share {share:.1}%: {v}"));
    }
    Ok(())
}

pub fn c_trigger_counts_only_under_the_function(program: &std::path::Path) -> R {
    let before = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default();
    let trigger = format!("{}:handle", program.display());
    let (v, _) = run_profile_with(program, &["--wall", "--trigger", &trigger], "trigger 3")?;
    let after = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default();
    if after != before {
        return Err(format!("the trigger's probes were left: {after}"));
    }
    let total = v["total"].as_u64().unwrap_or(0);
    // The program's own run: it alternates for exactly 3 s of its clock. (netprobe's elapsed
    // time also holds placing the trigger's probes and starting the command, which a loaded
    // machine stretches.)
    let run_us = 3.0e6_f64;
    let under = time_under(&v, "handle", "");
    let background = time_under(&v, "background", "");
    let computing = time_under(&v, "compute", "");
    let share = 100.0 * total as f64 / run_us;
    eprintln!(
        "{total} us counted ({share:.1}% of the program's 3 s): {under} under handle, {background} under background, {computing} computing"
    );
    if background != 0 || under < total * 95 / 100 {
        return Err(format!("time outside handle counted: {v}"));
    }
    if !(35.0..=60.0).contains(&share) {
        return Err(format!(
            "{share:.1}% of the run under handle (expected about 50%)"
        ));
    }
    let on = profile::pct(computing, total);
    if !(35.0..=65.0).contains(&on) {
        return Err(format!(
            "{on:.1}% of handle's time computing (expected about 50%)"
        ));
    }
    Ok(())
}
