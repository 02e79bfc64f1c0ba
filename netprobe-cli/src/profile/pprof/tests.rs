use super::*;
use proptest::prelude::*;
use std::fmt::Write as _;

fn frame(name: &str, image: &str, file: Option<(&str, u32)>, inlined: bool) -> FrameName {
    FrameName {
        file: file.map(|f| f.0.to_string()),
        line: file.map(|f| f.1),
        image: Some(image.to_string()),
        ..FrameName::named(name, inlined, false)
    }
}

fn meta(kind: ProfileKind) -> PprofMeta {
    PprofMeta {
        kind,
        period_ns: 10_101_010,
        start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        duration: Duration::from_millis(1500),
        comment: "netprobe profile pid 42: on-CPU time at 99 Hz".into(),
    }
}

fn app_build_id(image: &str) -> Option<String> {
    (image == "/srv/app").then(|| "0badc0ffee".to_string())
}

/// Two processes of one program, an inlined call, a frame without a line, a run of libc.
fn small_report() -> Report {
    let main = frame("main", "/srv/app", Some(("/src/app.c", 40)), false);
    let run = frame("run", "/srv/app", Some(("/src/app.c", 30)), false);
    let hot = frame("hot", "/srv/app", Some(("/src/app.c", 12)), false);
    let mix = frame("mix", "/srv/app", Some(("/src/mix.h", 7)), true);
    let libc = FrameName {
        image: Some("/usr/lib/x86_64-linux-gnu/libc.so.6".into()),
        ..FrameName::named("[libc.so.6]", false, true)
    };
    let mut r = Report::default();
    r.add_in(42, vec![main.clone(), run.clone(), hot.clone()], 75);
    r.add_in(43, vec![main.clone(), run.clone(), hot], 5);
    r.add_in(42, vec![main.clone(), run, mix], 20);
    r.add_in(42, vec![main, libc], 3);
    r.process_labels.insert(
        42,
        vec![
            ("comm".into(), "app".into()),
            ("container".into(), "web".into()),
        ],
    );
    r
}

/// The decoded profile with every index resolved, as a person checks it.
fn readable(p: &pb::Profile) -> String {
    let s = |i: i64| p.string_table[i as usize].as_str();
    let vt = |v: &pb::ValueType| format!("{}/{}", s(v.r#type), s(v.unit));
    let mut out = String::new();
    let types: Vec<String> = p.sample_type.iter().map(vt).collect();
    let _ = writeln!(out, "sample types: {}", types.join(", "));
    let _ = writeln!(
        out,
        "period: {} {}",
        p.period,
        p.period_type.as_ref().map_or("-".into(), vt)
    );
    let _ = writeln!(
        out,
        "time_nanos {} duration_nanos {}",
        p.time_nanos, p.duration_nanos
    );
    for c in &p.comment {
        let _ = writeln!(out, "comment: {}", s(*c));
    }
    for m in &p.mapping {
        let _ = writeln!(
            out,
            "mapping {}: {} build id {:?} functions {} filenames {} lines {} inline {}",
            m.id,
            s(m.filename),
            s(m.build_id),
            m.has_functions,
            m.has_filenames,
            m.has_line_numbers,
            m.has_inline_frames
        );
    }
    let function = |id: u64| p.function.iter().find(|f| f.id == id).unwrap();
    for sample in &p.sample {
        let labels: Vec<String> = sample
            .label
            .iter()
            .map(|l| format!("{}={}", s(l.key), s(l.str)))
            .collect();
        let _ = writeln!(out, "sample {:?} [{}]", sample.value, labels.join(" "));
        for id in &sample.location_id {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            let lines: Vec<String> = loc
                .line
                .iter()
                .map(|l| {
                    let f = function(l.function_id);
                    format!("{} ({}:{})", s(f.name), s(f.filename), l.line)
                })
                .collect();
            let _ = writeln!(
                out,
                "  location {} mapping {}: {}",
                loc.id,
                loc.mapping_id,
                lines.join(" inlined into ")
            );
        }
    }
    out
}

fn decode(bytes: &[u8]) -> pb::Profile {
    use std::io::Read as _;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .expect("gzip");
    pb::Profile::decode(raw.as_slice()).expect("profile.proto")
}

#[test]
fn a_small_profile_decodes_back_to_what_was_written() {
    let r = small_report();
    let m = message(&r, &meta(ProfileKind::OnCpu), &app_build_id);
    let mut bytes = Vec::new();
    write_message(&m, &mut bytes).unwrap();
    assert_eq!(&bytes[..2], [0x1f, 0x8b], "gzip magic");
    let back = decode(&bytes);
    assert_eq!(back, m);
    assert_eq!(back.string_table[0], "");
    insta::assert_snapshot!("small_on_cpu", readable(&back));
}

#[test]
fn off_cpu_and_wall_time_are_nanoseconds_of_their_kind() {
    let r = small_report();
    let off = message(&r, &meta(ProfileKind::OffCpu), &app_build_id);
    let text = readable(&off);
    assert!(
        text.starts_with("sample types: off-cpu/nanoseconds\nperiod: 0 -\n"),
        "{text}"
    );
    // The report counts microseconds: 75 us under the hottest stack.
    assert_eq!(off.sample[0].value, [75_000]);
    let wall = message(&r, &meta(ProfileKind::Wall), &app_build_id);
    let text = readable(&wall);
    assert!(
        text.starts_with("sample types: wall/nanoseconds\nperiod: 10101010 cpu/nanoseconds\n"),
        "{text}"
    );
}

#[test]
fn a_report_without_processes_has_unlabelled_samples() {
    let mut r = Report::default();
    r.add(vec![FrameName::named("main", false, false)], 4);
    let m = message(&r, &meta(ProfileKind::OnCpu), &app_build_id);
    assert_eq!(m.sample.len(), 1);
    assert!(m.sample[0].label.is_empty());
    assert_eq!(m.sample[0].value, [4, 4 * 10_101_010]);
    assert!(m.mapping.is_empty());
    assert_eq!(m.location[0].mapping_id, 0);
}

fn arb_report() -> impl Strategy<Value = Report> {
    let frame = (0..6u8, any::<bool>(), 0..3u8).prop_map(|(n, inlined, img)| FrameName {
        image: (img > 0).then(|| format!("/lib{img}.so")),
        line: (n % 2 == 0).then_some(u32::from(n)),
        file: (n % 2 == 0).then(|| "/src/x.c".to_string()),
        ..FrameName::named(&format!("f{n}"), inlined, false)
    });
    let stack = proptest::collection::vec(frame, 0..6);
    proptest::collection::vec((1..4u32, stack, 1..1000u64), 0..12).prop_map(|rows| {
        let mut r = Report::default();
        for (pid, s, n) in rows {
            r.add_in(pid, s, n);
        }
        r
    })
}

proptest! {
    /// Whatever the stacks, the file decodes, its samples sum to the report's, every id a
    /// sample or line names exists, and each sample has one location per non-inlined frame.
    #[test]
    fn every_report_round_trips_with_its_totals_and_ids(r in arb_report()) {
        let m = message(&r, &meta(ProfileKind::OnCpu), &app_build_id);
        let mut bytes = Vec::new();
        write_message(&m, &mut bytes).unwrap();
        let back = decode(&bytes);
        prop_assert_eq!(&back, &m);
        let total: i64 = back.sample.iter().map(|s| s.value[0]).sum();
        prop_assert_eq!(total as u64, r.samples());
        for s in &back.sample {
            for id in &s.location_id {
                let loc = back.location.iter().find(|l| l.id == *id);
                prop_assert!(loc.is_some());
                for l in &loc.unwrap().line {
                    prop_assert!(back.function.iter().any(|f| f.id == l.function_id));
                }
            }
        }
        prop_assert_eq!(back.sample.len(), r.by_process.len());
        let ends: usize = r
            .by_process
            .keys()
            .map(|(_, stack)| stack.iter().enumerate().filter(|(i, f)| !f.inlined || *i == 0).count())
            .sum();
        prop_assert_eq!(back.sample.iter().map(|s| s.location_id.len()).sum::<usize>(), ends);
    }
}
