//! A profile as pprof reads it (`profile --pprof FILE`): the gzip'd protocol buffer of
//! `profile.proto` (<https://github.com/google/pprof/blob/main/proto/profile.proto>, the format
//! `go tool pprof`, Pyroscope, Parca, Grafana and speedscope import), encoded by prost from the
//! messages of [`profile_proto`].
//!
//! What goes in, and why:
//! - Sample types as the Go runtime writes a CPU profile (`runtime/pprof`'s `samples`/`count`
//!   and `cpu`/`nanoseconds`, period type `cpu`/`nanoseconds`, the period the sampling
//!   frequency's), so tools that expect a CPU profile take it as one. Off-CPU time is
//!   `off-cpu`/`nanoseconds` and `--wall` time `wall`/`nanoseconds`: the microseconds the table
//!   shows, in pprof's unit.
//! - One sample per distinct (process, stack), labelled `pid` and the process's labels of the
//!   report (`comm`, a container's), as string labels, so `pprof -tagfocus comm=app` selects one
//!   program.
//! - A location per frame with its inlined callees as lines before it (profile.proto: "the last
//!   entry represents the caller into which the preceding entries were inlined"); a function per
//!   name and source file; a mapping per image with its build id. netprobe names frames itself,
//!   so the mappings say `has_functions` and pprof does not look the (absent) addresses up.
//!
//! The stacks written are those the table shows (`[libc.so.6]` for a run of unnamed frames of
//! one image unless `--unknown-addrs`), so `pprof -top` lists the table's functions.

pub mod profile_proto;

use super::{ProfileKind, Report};
use crate::stacks::FrameName;
use profile_proto as pb;
use prost::Message as _;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// What the report does not say about the profile it came from.
#[derive(Clone, Debug)]
pub struct PprofMeta {
    /// Which time the counts are.
    pub kind: ProfileKind,
    /// The on-CPU sampling period, nanoseconds (1 s / the frequency).
    pub period_ns: u64,
    /// When sampling started.
    pub start: SystemTime,
    pub duration: Duration,
    /// A line for pprof's comments (`netprobe profile pid 42: on-CPU time at 99 Hz`).
    pub comment: String,
}

/// Writes `report` as a gzip'd pprof profile.
pub fn write(report: &Report, meta: &PprofMeta, out: impl Write) -> std::io::Result<()> {
    write_message(&message(report, meta, &build_id), out)
}

/// Writes `profile` encoded and gzip'd.
pub fn write_message(profile: &pb::Profile, out: impl Write) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?.flush()
}

/// The GNU build id of the ELF file at `path`, as hex (what pprof and `readelf -n` print);
/// `None` for other files and files without one.
fn build_id(path: &str) -> Option<String> {
    let file = netprobe_core::elf::ElfFile::open(Path::new(path)).ok()?;
    let id = netprobe_core::debuginfo::build_id(&file.view().ok()?)?;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// `report` as a pprof message; `build_id` gives each image's build id.
pub fn message(
    report: &Report,
    meta: &PprofMeta,
    build_id: &dyn Fn(&str) -> Option<String>,
) -> pb::Profile {
    let mut b = Builder::default();
    b.strings.index("");
    let ns = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let (sample_type, period_type) = match meta.kind {
        ProfileKind::OnCpu => (
            vec![
                b.value_type("samples", "count"),
                b.value_type("cpu", "nanoseconds"),
            ],
            Some(b.value_type("cpu", "nanoseconds")),
        ),
        ProfileKind::OffCpu => (vec![b.value_type("off-cpu", "nanoseconds")], None),
        ProfileKind::Wall => (
            vec![b.value_type("wall", "nanoseconds")],
            Some(b.value_type("cpu", "nanoseconds")),
        ),
    };
    let values = |n: u64| match meta.kind {
        ProfileKind::OnCpu => vec![ns(n), ns(n.saturating_mul(meta.period_ns))],
        // The report counts microseconds.
        _ => vec![ns(n.saturating_mul(1000))],
    };
    // Most counted first, then by process and stack: the same file for the same report.
    let mut rows: Vec<(Option<u32>, &Vec<FrameName>, u64)> = if report.by_process.is_empty() {
        report.stacks.iter().map(|(s, &n)| (None, s, n)).collect()
    } else {
        let by = report.by_process.iter();
        by.map(|((pid, s), &n)| (Some(*pid), s, n)).collect()
    };
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(b.1)));
    let mut sample = Vec::with_capacity(rows.len());
    for (pid, stack, n) in rows {
        let mut label = Vec::new();
        if let Some(pid) = pid {
            label.push(b.label("pid", &pid.to_string()));
            for (key, value) in report.process_labels.get(&pid).into_iter().flatten() {
                label.push(b.label(key, value));
            }
        }
        // Locations leaf first: a frame with the frames inlined into it, root first.
        let mut location_id = Vec::new();
        let mut group: Vec<&FrameName> = Vec::new();
        for f in stack.iter().rev() {
            group.push(f);
            if !f.inlined {
                location_id.push(b.location(&group, build_id));
                group.clear();
            }
        }
        if !group.is_empty() {
            location_id.push(b.location(&group, build_id));
        }
        sample.push(pb::Sample {
            location_id,
            value: values(n),
            label,
        });
    }
    let comment = vec![b.strings.index(&meta.comment)];
    let time_nanos = meta
        .start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| ns(d.as_nanos().min(u128::from(u64::MAX)) as u64));
    pb::Profile {
        sample_type,
        sample,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings.table,
        time_nanos,
        duration_nanos: ns(meta.duration.as_nanos().min(u128::from(u64::MAX)) as u64),
        period: match period_type {
            Some(_) => ns(meta.period_ns),
            None => 0,
        },
        period_type,
        comment,
        ..pb::Profile::default()
    }
}

/// The string table: each string once, "" at 0.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn index(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The tables of a profile as its samples name them, each entry made once.
#[derive(Default)]
struct Builder {
    strings: Strings,
    functions: Vec<pb::Function>,
    function_ids: HashMap<(String, Option<String>), u64>,
    locations: Vec<pb::Location>,
    /// A location per frame group: each frame's name, file, line and image.
    location_ids: HashMap<Vec<FrameName>, u64>,
    mappings: Vec<pb::Mapping>,
    mapping_ids: HashMap<String, u64>,
}

impl Builder {
    fn value_type(&mut self, ty: &str, unit: &str) -> pb::ValueType {
        pb::ValueType {
            r#type: self.strings.index(ty),
            unit: self.strings.index(unit),
        }
    }

    fn label(&mut self, key: &str, value: &str) -> pb::Label {
        pb::Label {
            key: self.strings.index(key),
            str: self.strings.index(value),
            ..pb::Label::default()
        }
    }

    fn function(&mut self, f: &FrameName) -> u64 {
        let key = (f.name.clone(), f.file.clone());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = self.strings.index(&f.name);
        let filename = self.strings.index(f.file.as_deref().unwrap_or(""));
        self.functions.push(pb::Function {
            id,
            name,
            // netprobe keeps the demangled name alone.
            system_name: name,
            filename,
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    fn mapping(&mut self, image: &str, build_id: &dyn Fn(&str) -> Option<String>) -> u64 {
        if let Some(&id) = self.mapping_ids.get(image) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.strings.index(image);
        let build_id = build_id(image).map_or(0, |b| self.strings.index(&b));
        self.mappings.push(pb::Mapping {
            id,
            filename,
            build_id,
            has_functions: true,
            ..pb::Mapping::default()
        });
        self.mapping_ids.insert(image.to_string(), id);
        id
    }

    /// The location of `group`: an innermost frame first, the frame they were inlined into
    /// last.
    fn location(&mut self, group: &[&FrameName], build_id: &dyn Fn(&str) -> Option<String>) -> u64 {
        let key: Vec<FrameName> = group
            .iter()
            .map(|f| FrameName {
                unwound_by: None,
                ..(*f).clone()
            })
            .collect();
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        let caller = group.last().copied();
        let mapping_id = match caller.and_then(|f| f.image.as_deref()) {
            Some(image) => self.mapping(image, build_id),
            None => 0,
        };
        let line = group
            .iter()
            .map(|f| pb::Line {
                function_id: self.function(f),
                line: f.line.map_or(0, i64::from),
                column: 0,
            })
            .collect();
        if mapping_id != 0 {
            let m = &mut self.mappings[mapping_id as usize - 1];
            m.has_filenames |= group.iter().any(|f| f.file.is_some());
            m.has_line_numbers |= group.iter().any(|f| f.line.is_some());
            m.has_inline_frames |= group.len() > 1;
        }
        self.locations.push(pb::Location {
            id,
            mapping_id,
            address: 0,
            line,
            is_folded: false,
        });
        self.location_ids.insert(key, id);
        id
    }
}

#[cfg(test)]
mod tests;
