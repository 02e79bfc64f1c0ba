//! What a profile shows: sampled stacks as named frames, aggregated into Brendan Gregg's folded
//! format (`root;caller;callee count`, the input of `flamegraph.pl` and inferno), a flat table of
//! functions by self and total samples (like `perf report --stdio --no-children` and
//! `--children`), and JSON.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

pub use crate::stacks::FrameName;

/// What a profile's counts are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Unit {
    /// On-CPU samples.
    #[default]
    #[serde(rename = "samples")]
    Samples,
    /// Microseconds: off-CPU time, or on-CPU samples and off-CPU time together (`--wall`),
    /// as bcc's `offcputime` folds them.
    #[serde(rename = "us")]
    Microseconds,
}

impl Unit {
    /// How a flame graph names its counts.
    pub fn count_name(self) -> &'static str {
        match self {
            Unit::Samples => "samples",
            Unit::Microseconds => "us",
        }
    }

    /// A count as the table shows it: samples as they are, microseconds as milliseconds.
    fn show(self, n: u64) -> String {
        match self {
            Unit::Samples => n.to_string(),
            Unit::Microseconds => format!("{:.1}", n as f64 / 1e3),
        }
    }
}

/// A function's share of the samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionRow {
    pub name: String,
    /// Samples whose innermost frame is this function.
    #[serde(rename = "self")]
    pub self_samples: u64,
    /// Samples with this function anywhere on the stack (counted once per sample).
    pub total: u64,
    /// A .NET method's samples by the tier of its code (`{"ready_to_run": 3, "tier1": 7}`):
    /// [`Report::total`]'s count per tier, a sample counted once for each tier the method ran at
    /// in it. The row itself is the method at every tier. Absent for other code.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<String, u64>,
}

/// Aggregated samples: distinct stacks (root first) and how often each was sampled.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub stacks: HashMap<Vec<FrameName>, u64>,
    /// What the counts are.
    pub unit: Unit,
    /// Waits off the CPU counted (off-CPU and wall profiles).
    pub switches: u64,
    /// On-CPU samples of a profile counted in microseconds (`--wall`).
    pub cpu_samples: u64,
    /// Samples the kernel dropped because a ring buffer was full.
    pub lost: u64,
    /// Times the kernel throttled sampling.
    pub throttled: u64,
    /// The same counts per process, (pid, stack) to count, for what labels samples with their
    /// process (`--pprof`); empty when the stacks were added without one ([`Report::add`]).
    pub by_process: HashMap<(u32, Vec<FrameName>), u64>,
    /// What is known of each sampled process, as (key, value) labels: `comm` (its
    /// `/proc/PID/comm`, when it was still there to ask), and whatever a caller adds (its
    /// container, pod). `--pprof` labels the process's samples with them.
    pub process_labels: BTreeMap<u32, Vec<(String, String)>>,
}

impl Report {
    /// Adds `count` samples of `stack` (root first).
    pub fn add(&mut self, stack: Vec<FrameName>, count: u64) {
        *self.stacks.entry(stack).or_insert(0) += count;
    }

    /// [`Report::add`] of samples of process `pid`, also counted per process.
    pub fn add_in(&mut self, pid: u32, stack: Vec<FrameName>, count: u64) {
        *self.by_process.entry((pid, stack.clone())).or_insert(0) += count;
        self.add(stack, count);
    }

    /// The report with every stack (and every per-process stack) changed by `change`, stacks
    /// that are then equal merged.
    fn map_stacks(&self, change: impl Fn(&[FrameName]) -> Vec<FrameName>) -> Report {
        let mut r = Report {
            stacks: HashMap::new(),
            by_process: HashMap::new(),
            ..self.clone()
        };
        for (stack, &n) in &self.stacks {
            r.add(change(stack), n);
        }
        for ((pid, stack), &n) in &self.by_process {
            *r.by_process.entry((*pid, change(stack))).or_insert(0) += n;
        }
        r
    }

    /// The sum of the counts: samples taken (not counting lost ones), or microseconds.
    pub fn samples(&self) -> u64 {
        self.stacks.values().sum()
    }

    /// Folded lines sorted by stack (what stackcollapse-perf.pl prints), one per distinct stack.
    pub fn folded(&self) -> String {
        crate::stacks::folded_lines(self.stacks.iter().map(|(s, &n)| (s, n)), false)
    }

    /// [`Report::folded`] with each frame's source line (`name (file:line)`, `--folded-lines`).
    pub fn folded_with_lines(&self) -> String {
        crate::stacks::folded_lines(self.stacks.iter().map(|(s, &n)| (s, n)), true)
    }

    /// The distinct source lines of each function over all samples, at most `most` each (the
    /// flame graph's tooltips show them).
    pub fn lines_by_function(&self, most: usize) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        let mut stacks: Vec<(&Vec<FrameName>, u64)> =
            self.stacks.iter().map(|(s, &n)| (s, n)).collect();
        // Most sampled stacks first, so the lines kept are the hottest.
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (stack, _) in stacks {
            for f in stack {
                let Some(at) = f.source_line() else { continue };
                let lines = out.entry(f.name.clone()).or_default();
                if lines.len() < most && !lines.contains(&at) {
                    lines.push(at);
                }
            }
        }
        out
    }

    /// Functions by self samples, then total samples, then name.
    pub fn functions(&self) -> Vec<FunctionRow> {
        let mut rows: HashMap<&str, (u64, u64, BTreeMap<String, u64>)> = HashMap::new();
        for (stack, &n) in &self.stacks {
            if let Some(leaf) = stack.last() {
                rows.entry(&leaf.name).or_default().0 += n;
            }
            let mut seen: Vec<(&str, Option<&str>)> = Vec::with_capacity(stack.len());
            for f in stack {
                let tier = f.tier.as_ref().map(|t| t.as_str());
                if seen.contains(&(f.name.as_str(), tier)) {
                    continue;
                }
                let row = rows.entry(&f.name).or_default();
                if !seen.iter().any(|(name, _)| *name == f.name) {
                    row.1 += n;
                }
                if let Some(t) = tier {
                    *row.2.entry(t.to_string()).or_default() += n;
                }
                seen.push((&f.name, tier));
            }
        }
        let mut rows: Vec<FunctionRow> = rows
            .into_iter()
            .map(|(name, (s, t, tiers))| FunctionRow {
                name: name.to_string(),
                self_samples: s,
                total: t,
                tiers,
            })
            .collect();
        rows.sort_by(|a, b| {
            b.self_samples
                .cmp(&a.self_samples)
                .then(b.total.cmp(&a.total))
                .then(a.name.cmp(&b.name))
        });
        rows
    }

    /// Frames no table named, over all frames of all samples.
    pub fn unknown_frames(&self) -> (u64, u64) {
        let mut unknown = 0;
        let mut all = 0;
        for (stack, &n) in &self.stacks {
            all += n * stack.len() as u64;
            unknown += n * stack.iter().filter(|f| f.unknown).count() as u64;
        }
        (unknown, all)
    }

    /// The report as folded lines, flame graphs and the table show it unless asked otherwise
    /// (`--unknown-addrs`): each run of unnamed frames of one image as one `[image]` frame
    /// ([`crate::stacks::collapse_unnamed_runs`]), stacks that are then equal merged.
    pub fn with_unnamed_runs_collapsed(&self) -> Report {
        self.map_stacks(|stack| crate::stacks::collapse_unnamed_runs(stack))
    }

    /// The report with each .NET frame's tier after its name (`Replace(string, string)
    /// [tier1]`, `--tiers`): a method's code at each tier is then a function of its own.
    pub fn with_tiers_in_names(&self) -> Report {
        self.map_stacks(|stack| stack.iter().map(FrameName::with_tier).collect())
    }

    /// The summary table: the `top` functions by self samples, then by total samples.
    pub fn table(&self, top: usize) -> String {
        self.table_showing(self, top)
    }

    /// [`Report::table`] whose rows are the functions of `shown` (this report as shown, e.g.
    /// [`Report::with_unnamed_runs_collapsed`]); the first line counts this report's frames.
    pub fn table_showing(&self, shown: &Report, top: usize) -> String {
        let samples = self.samples();
        let pct = |n: u64| {
            if samples == 0 {
                0.0
            } else {
                100.0 * n as f64 / samples as f64
            }
        };
        let (unknown, frames) = self.unknown_frames();
        let unit = self.unit;
        let mut out = match unit {
            Unit::Samples => format!(
                "{samples} samples, {} lost, {unknown} of {frames} frames unknown\n\n",
                self.lost
            ),
            Unit::Microseconds => format!(
                "{} ms in {} waits off the CPU{}, {} records lost, {:.2}% of frames unknown (times in ms)\n\n",
                unit.show(samples),
                self.switches,
                match self.cpu_samples {
                    0 => String::new(),
                    n => format!(" and {n} on-CPU samples"),
                },
                self.lost,
                if frames == 0 { 0.0 } else { 100.0 * unknown as f64 / frames as f64 }
            ),
        };
        let rows = shown.functions();
        let _ = writeln!(
            out,
            "{:>8} {:>7} {:>8} {:>7}  function",
            "self", "self%", "total", "total%"
        );
        for r in rows.iter().take(top) {
            let _ = writeln!(
                out,
                "{:>8} {:>6.2}% {:>8} {:>6.2}%  {}",
                unit.show(r.self_samples),
                pct(r.self_samples),
                unit.show(r.total),
                pct(r.total),
                crate::printable::Printable(&r.name)
            );
        }
        let mut by_total = rows.clone();
        by_total.sort_by(|a, b| b.total.cmp(&a.total).then(a.name.cmp(&b.name)));
        let callers = match unit {
            Unit::Samples => "by total samples (callers included):",
            Unit::Microseconds => "by total time (callers included):",
        };
        let _ = writeln!(out, "\n{callers}");
        let _ = writeln!(out, "{:>8} {:>7}  function", "total", "total%");
        for r in by_total.iter().take(top) {
            let _ = writeln!(
                out,
                "{:>8} {:>6.2}%  {}",
                unit.show(r.total),
                pct(r.total),
                crate::printable::Printable(&r.name)
            );
        }
        out
    }

    /// The whole profile as one JSON object: totals, functions, stacks (root first) by count.
    pub fn json(&self) -> serde_json::Value {
        let (unknown, frames) = self.unknown_frames();
        let mut stacks: Vec<(&Vec<FrameName>, u64)> =
            self.stacks.iter().map(|(s, &n)| (s, n)).collect();
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        serde_json::json!({
            "unit": self.unit,
            "total": self.samples(),
            "samples": match self.unit {
                Unit::Samples => self.samples(),
                Unit::Microseconds => self.cpu_samples,
            },
            "switches": self.switches,
            "lost": self.lost,
            "throttled": self.throttled,
            "frames": frames,
            "unknown_frames": unknown,
            "functions": self.functions(),
            "stacks": stacks.iter().map(|(s, n)| serde_json::json!({
                "count": n,
                "frames": s.iter().map(|f| {
                    let mut v = serde_json::json!({
                        "function": f.name, "inlined": f.inlined, "unknown": f.unknown,
                    });
                    // The source line where DWARF gives one (absent, not null, otherwise).
                    if let Some(file) = &f.file {
                        v["file"] = serde_json::json!(file);
                    }
                    if let Some(line) = f.line {
                        v["line"] = serde_json::json!(line);
                    }
                    if let Some(by) = f.unwound_by {
                        v["unwound_by"] = by.as_str().into();
                    }
                    // A .NET method's code tier: the name is the same at every tier.
                    if let Some(tier) = &f.tier {
                        v["tier"] = tier.as_str().into();
                    }
                    v
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f(name: &str) -> FrameName {
        FrameName::named(name, false, name.starts_with("[unknown]"))
    }

    /// A method sampled in its ReadyToRun code and in its tier-1 code is one function (one row,
    /// one folded frame), whose JSON frames say each tier; `--tiers` shows them apart.
    #[test]
    fn a_method_at_two_tiers_is_one_function_unless_tiers_are_shown() {
        use netprobe_core::dotnet::managed_name::CodeTier;
        let at = |tier| FrameName {
            tier: Some(tier),
            ..f("System.String.Replace(string, string)")
        };
        let mut r = Report::default();
        r.add(vec![f("Main"), at(CodeTier::ReadyToRun)], 3);
        r.add(vec![f("Main"), at(CodeTier::Tier1)], 7);
        let rows = r.functions();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].name, "System.String.Replace(string, string)");
        assert_eq!(rows[0].self_samples, 10);
        assert_eq!(
            rows[0].tiers,
            BTreeMap::from([("ready_to_run".to_string(), 3), ("tier1".to_string(), 7)])
        );
        assert!(rows[1].tiers.is_empty(), "{rows:?}");
        assert_eq!(
            r.folded(),
            "Main;System.String.Replace(string, string) 10\n"
        );
        let json = r.json().to_string();
        assert!(
            json.contains(r#""tier":"ready_to_run""#) && json.contains(r#""tier":"tier1""#),
            "{json}"
        );
        assert_eq!(
            r.json()["functions"][0]["tiers"],
            serde_json::json!({"ready_to_run": 3, "tier1": 7})
        );
        assert!(r.json()["functions"][1].get("tiers").is_none());
        let apart = r.with_tiers_in_names();
        let names: Vec<String> = apart.functions().into_iter().map(|f| f.name).collect();
        assert!(
            names.contains(&"System.String.Replace(string, string) [tier1]".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"System.String.Replace(string, string) [ready_to_run]".to_string()),
            "{names:?}"
        );
        assert_eq!(apart.samples(), r.samples());
    }

    fn sample_report() -> Report {
        let mut r = Report {
            lost: 2,
            ..Report::default()
        };
        r.add(vec![f("main"), f("run"), f("hot")], 75);
        r.add(vec![f("main"), f("run"), f("warm")], 20);
        r.add(
            vec![
                f("main"),
                f("warm"),
                FrameName {
                    inlined: true,
                    ..f("mix;er")
                },
            ],
            4,
        );
        r.add(vec![f("main"), f("[unknown] (libc.so.6+0x1234)")], 1);
        r
    }

    #[test]
    fn folded_table_and_json_of_a_known_profile() {
        let r = sample_report();
        insta::assert_snapshot!("folded", r.folded());
        insta::assert_snapshot!("table", r.table(10));
        insta::assert_json_snapshot!("json", r.json());
    }

    #[test]
    fn collapsed_runs_keep_the_samples_and_the_count_of_unknown_frames() {
        let mut r = Report::default();
        let coreclr = |off: u32| f(&format!("[unknown] (libcoreclr.so+{off:#x})"));
        r.add(vec![f("main"), coreclr(0x10), coreclr(0x20), f("hot")], 6);
        r.add(vec![f("main"), coreclr(0x11), f("hot")], 3);
        r.add(vec![f("main"), coreclr(0x10), coreclr(0x30)], 1);
        let shown = r.with_unnamed_runs_collapsed();
        assert_eq!(shown.samples(), r.samples());
        assert_eq!(
            shown.folded(),
            "main;[libcoreclr.so] 1\nmain;[libcoreclr.so];hot 9\n"
        );
        let table = r.table_showing(&shown, 10);
        // The first line counts the frames as sampled; the rows are the collapsed functions.
        assert!(
            table.starts_with("10 samples, 0 lost, 17 of 36 frames unknown\n"),
            "{table}"
        );
        assert!(table.contains("[libcoreclr.so]\n"), "{table}");
        assert!(!table.contains("[unknown]"), "{table}");
        assert_eq!(r.table(10), r.table_showing(&r, 10));
    }

    #[test]
    fn an_off_cpu_profile_counts_microseconds_and_ends_in_the_wait() {
        let mut r = Report {
            unit: Unit::Microseconds,
            switches: 30,
            cpu_samples: 4,
            ..Report::default()
        };
        r.add(vec![f("main"), f("wait_a"), f("[off-cpu: sleep]")], 700_000);
        r.add(
            vec![f("main"), f("read_b"), f("[off-cpu: I/O read]")],
            300_000,
        );
        r.add(vec![f("main"), f("compute")], 40_404);
        insta::assert_snapshot!("off_cpu_table", r.table(10));
        assert_eq!(
            r.folded(),
            "main;compute 40404\nmain;read_b;[off-cpu: I/O read] 300000\nmain;wait_a;[off-cpu: sleep] 700000\n"
        );
        let json = r.json();
        assert_eq!(json["unit"], "us");
        assert_eq!(json["total"], 1_040_404);
        assert_eq!(json["samples"], 4);
        assert_eq!(json["switches"], 30);
    }

    proptest! {
        #[test]
        fn totals_bound_self_and_folded_counts_sum_to_samples(
            stacks in proptest::collection::vec(
                (proptest::collection::vec("[a-d]", 1..6), 1u64..50), 0..20)
        ) {
            let mut r = Report::default();
            for (s, n) in &stacks {
                r.add(s.iter().map(|x| f(x)).collect(), *n);
            }
            let samples = r.samples();
            prop_assert_eq!(samples, stacks.iter().map(|s| s.1).sum::<u64>());
            let folded_sum: u64 = r.folded().lines()
                .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
            prop_assert_eq!(folded_sum, samples);
            let rows = r.functions();
            prop_assert_eq!(rows.iter().map(|r| r.self_samples).sum::<u64>(), samples);
            for row in rows {
                prop_assert!(row.self_samples <= row.total && row.total <= samples);
            }
        }
    }
}
