//! `/proc/PID/maps` parsing: the kernel's own output round-trips byte for byte; generated entries
//! round-trip through render/parse; arbitrary bytes never panic.

use netprobe_core::maps::{parse_line, parse_maps, render_maps, Device, MapPath, MapsEntry, Perms};
use proptest::prelude::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Verified against the kernel: what this process's maps say, rendered back, is the same bytes.
#[test]
fn real_proc_self_maps_round_trips_byte_for_byte() {
    let text = std::fs::read("/proc/self/maps").unwrap();
    let entries = parse_maps(&text).unwrap();
    assert!(entries.len() > 5);
    assert!(entries
        .iter()
        .any(|e| matches!(&e.path, MapPath::Pseudo { name } if name == "stack")));
    assert!(entries
        .iter()
        .any(|e| e.perms.exec && e.path.file().is_some()));
    assert_eq!(
        String::from_utf8_lossy(&render_maps(&entries)),
        String::from_utf8_lossy(&text)
    );
}

#[test]
fn every_kind_of_name() {
    let text = b"\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon
7f2a00000000-7f2a00021000 rw-p 00000000 00:00 0 
7ffd5b7b8000-7ffd5b7ba000 r-xp 00000000 00:00 0                          [vdso]
7f1c8c000000-7f1c8c001000 r-xp 00002000 00:01 1047                       /memfd:jit-code (deleted)
7f1c8d000000-7f1c8d001000 r--p 00000000 fd:01 99                         /opt/my app/lib x.so (deleted)
7f1c8e000000-7f1c8e001000 r--p 1234567890abcdef fd:01 99                 /a\\012b
7f1c8f000000-7f1c8f001000 rw-p 00000000 00:00 0                          [anon:dotnet-gc]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";
    let e = parse_maps(text).unwrap();
    assert_eq!(e.len(), 8);
    assert_eq!(
        e[0].path.file(),
        Some(std::path::Path::new("/usr/bin/dbus-daemon"))
    );
    assert_eq!(e[1].path, MapPath::Anonymous);
    assert_eq!(
        e[2].path,
        MapPath::Pseudo {
            name: "vdso".into()
        }
    );
    assert!(e[3].path.is_memfd());
    assert_eq!(
        e[4].path,
        MapPath::File {
            path: "/opt/my app/lib x.so".into(),
            deleted: true
        }
    );
    assert_eq!(e[5].offset, 0x1234567890abcdef);
    assert_eq!(e[5].path.file(), Some(std::path::Path::new("/a\nb")));
    assert_eq!(
        e[6].path,
        MapPath::Pseudo {
            name: "anon:dotnet-gc".into()
        }
    );
    assert_eq!(e[7].start, 0xffffffffff600000);
    assert!(e[7].perms.exec && !e[7].perms.read);
}

#[test]
fn malformed_lines_name_the_field_and_line() {
    let err =
        parse_maps(b"00400000-00452000 r-xp 00000000 08:02 1 /x\nzz-1 r-xp 0 0:0 0\n").unwrap_err();
    assert_eq!(err.line, 2);
    assert_eq!(err.what, "bad start address");
    assert_eq!(
        parse_line(b"1-2 rwx 0 0:0 0").unwrap_err(),
        "permissions are not 4 characters"
    );
    assert_eq!(
        parse_line(b"2-1 rwxp 0 0:0 0").unwrap_err(),
        "end address below start address"
    );
    assert_eq!(parse_line(b"1-2 rwxp 0 0:0").unwrap_err(), "missing inode");
}

fn arb_path() -> impl Strategy<Value = MapPath> {
    prop_oneof![
        Just(MapPath::Anonymous),
        "[a-z:0-9-]{1,12}".prop_map(|name| MapPath::Pseudo { name }),
        // Any bytes but NUL; the name must not start with spaces (the kernel's padding), must not
        // contain the literal escape text, and must not look like a bracketed pseudo name or end
        // in the deleted marker (both ambiguous in the kernel's format itself).
        (prop::collection::vec(1u8..=255, 1..40), any::<bool>())
            .prop_filter("representable", |(b, _)| {
                let ambiguous = b[0] == b' '
                    || b.windows(4).any(|w| w == b"\\012")
                    || (b[0] == b'[' && b.last() == Some(&b']'))
                    || b.ends_with(b" (deleted)");
                !ambiguous
            })
            .prop_map(|(bytes, deleted)| MapPath::File {
                path: PathBuf::from(OsString::from_vec(bytes)),
                deleted,
            }),
    ]
}

prop_compose! {
    fn arb_entry()(start in any::<u64>(), len in any::<u64>(), r: bool, w: bool, x: bool, s: bool,
                   offset in any::<u64>(), major in any::<u32>(), minor in any::<u32>(),
                   inode in any::<u64>(), path in arb_path()) -> MapsEntry {
        MapsEntry {
            start,
            end: start.saturating_add(len),
            perms: Perms { read: r, write: w, exec: x, shared: s },
            offset,
            dev: Device { major, minor },
            inode,
            path,
        }
    }
}

proptest! {
    #[test]
    fn render_then_parse_is_identity(entries in prop::collection::vec(arb_entry(), 0..20)) {
        let text = render_maps(&entries);
        prop_assert_eq!(parse_maps(&text).unwrap(), entries);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_maps(&bytes);
    }

    #[test]
    fn mutated_real_lines_never_panic(pos in 0usize..120, byte in any::<u8>(), cut in 0usize..140) {
        let mut line = b"7f7e038a1000-7f7e038cd000 r-xp 00001000 ca:01 537652                     /home/ubuntu/dotnet/out/System.Console.dll".to_vec();
        if pos < line.len() { line[pos] = byte; }
        line.truncate(cut);
        let _ = parse_line(&line);
    }
}
