//! Runs of unnamed frames in one image shown as one frame, `[libcoreclr.so]`, in the stacks a
//! person reads (folded lines, flame graphs, `profile`'s table).
//!
//! An image without a symbol table names only its exported functions: the .NET runtime
//! (`libcoreclr.so` exports 9 functions in its `.dynsym`, its other symbols are in a separate
//! `libcoreclr.so.dbg`), its host (`dotnet`, `libhostfxr.so`, `libhostpolicy.so`), a stripped
//! program. Each frame inside such an image prints as `[unknown] (libcoreclr.so+0x1bdfe8)`: a
//! flame graph then splits one runtime call path into as many towers as there are return
//! addresses, and `profile`'s table lists every address as a function of its own.
//! stackcollapse-perf.pl and inferno's `collapse-perf` name each such frame after its module
//! (`[libcoreclr.so]`, addresses kept only with their `--addrs`,
//! <https://github.com/jonhoo/inferno/blob/main/src/collapse/perf.rs>, `with_module_fallback`);
//! here a whole run of them in one image becomes that one frame, so the graph shows "the runtime,
//! from here to there" once. Every image gets it, not the .NET runtime and host alone: an
//! unnamed address is as opaque in a stripped libssl as in libcoreclr.
//!
//! Frames in anonymous memory (`[unknown] (0xADDR)`: JIT-compiled code not in a perf map,
//! stubs) stay as they are: no image names them, and the address is what a user looks up in a
//! perf map by hand. JSON output keeps every frame with its address.

use super::FrameName;

/// The image of an unnamed frame in a mapped file: `libcoreclr.so` of
/// `[unknown] (libcoreclr.so+0x1bdfe8)`; `None` for a named frame and for one in anonymous
/// memory (`[unknown] (0x7f..)`).
pub fn unnamed_frame_image(f: &FrameName) -> Option<&str> {
    if !f.unknown || f.inlined {
        return None;
    }
    let inner = f.name.strip_prefix("[unknown] (")?.strip_suffix(')')?;
    let (image, offset) = inner.rsplit_once('+')?;
    let hex = offset.strip_prefix("0x")?;
    let is_offset = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    (is_offset && !image.is_empty()).then_some(image)
}

/// `stack` (either order) with each run of consecutive unnamed frames of one image replaced by
/// one frame `[image]` (still unknown). Named frames, frames in anonymous memory and the order
/// are kept; a stack already collapsed comes back unchanged.
pub fn collapse_unnamed_runs<'a>(stack: impl IntoIterator<Item = &'a FrameName>) -> Vec<FrameName> {
    let mut out: Vec<FrameName> = Vec::new();
    let mut run_image: Option<&str> = None;
    for f in stack {
        match unnamed_frame_image(f) {
            Some(image) if run_image == Some(image) => {}
            Some(image) => {
                run_image = Some(image);
                out.push(FrameName {
                    image: f.image.clone(),
                    ..FrameName::named(&format!("[{image}]"), false, true)
                });
            }
            None => {
                run_image = None;
                out.push(f.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f(name: &str) -> FrameName {
        FrameName::named(name, false, name.starts_with('['))
    }

    fn names(stack: &[FrameName]) -> Vec<&str> {
        stack.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn a_dotnet_stack_shows_the_runtime_and_host_once_per_run() {
        // Root first, as a profile of the IL sample app's `spin` mode records it (.NET 8.0.4).
        let stack: Vec<FrameName> = [
            "[unknown] (dotnet+0x5c49)",
            "__libc_start_main@@GLIBC_2.34",
            "__libc_start_call_main",
            "[unknown] (dotnet+0xf26f)",
            "[unknown] (dotnet+0xef80)",
            "hostfxr_main_startupinfo@@V1.0",
            "[unknown] (libhostfxr.so+0x1c30d)",
            "[unknown] (libhostfxr.so+0x1d333)",
            "corehost_main@@V1.0",
            "[unknown] (libhostpolicy.so+0x2da6e)",
            "coreclr_execute_assembly@@V1.0",
            "[unknown] (libcoreclr.so+0x1eb03c)",
            "[unknown] (libcoreclr.so+0x1bdfe8)",
            "[unknown] (libcoreclr.so+0x49ec37)",
            "[unknown] (0x7f85c6c21fe2)",
            "[unknown] (0x7f85c6c23bac)",
            "[unknown] (libcoreclr.so+0x337585)",
            "[unknown] (libcoreclr.so+0x31a9f3)",
            "[unknown] (libstdc++.so.6+0xa1b2)",
            "__memset_avx2_unaligned_erms",
        ]
        .into_iter()
        .map(f)
        .collect();
        let collapsed = collapse_unnamed_runs(&stack);
        insta::assert_snapshot!(names(&collapsed).join("\n"));
        assert!(collapsed
            .iter()
            .filter(|f| f.name.starts_with("[lib"))
            .all(|f| f.unknown));
    }

    #[test]
    fn only_unnamed_frames_of_files_are_collapsed() {
        for (name, image) in [
            ("[unknown] (libcoreclr.so+0x1eb03c)", Some("libcoreclr.so")),
            ("[unknown] (libstdc++.so.6+0x10)", Some("libstdc++.so.6")),
            ("[unknown] (0x7f85c6c21fe2)", None),
            ("[not code] (0x7f85c6c21fe2)", None),
            ("[uretprobe trampoline] (0x7fff0000)", None),
            ("[unknown] (libx.so+zz)", None),
            ("[unknown] (+0x10)", None),
            ("[libcoreclr.so]", None),
        ] {
            assert_eq!(unnamed_frame_image(&f(name)), image, "{name}");
        }
        // A named function that happens to look like one is not touched.
        let named = FrameName::named("[unknown] (libx.so+0x1)", false, false);
        assert_eq!(unnamed_frame_image(&named), None);
    }

    fn frame() -> impl Strategy<Value = FrameName> {
        prop_oneof![
            "[a-c]".prop_map(|n| f(&n)),
            ("[ab]", 0u64..4).prop_map(|(i, o)| f(&format!("[unknown] (lib{i}.so+{o:#x})"))),
            (0u64..3).prop_map(|a| f(&format!("[unknown] ({:#x})", 0x7f00 + a))),
        ]
    }

    proptest! {
        #[test]
        fn collapsing_keeps_counts_named_frames_and_is_idempotent(
            stacks in proptest::collection::vec(
                (proptest::collection::vec(frame(), 0..12), 1u64..50), 0..20)
        ) {
            let raw = crate::stacks::folded_lines(stacks.iter().map(|(s, n)| (s, *n)), false);
            let once: Vec<(Vec<FrameName>, u64)> = stacks
                .iter()
                .map(|(s, n)| (collapse_unnamed_runs(s), *n))
                .collect();
            let folded = crate::stacks::folded_lines(once.iter().map(|(s, n)| (s, *n)), false);
            let sum = |t: &str| -> u64 {
                t.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum()
            };
            prop_assert_eq!(sum(&folded), sum(&raw));
            prop_assert!(folded.lines().count() <= raw.lines().count());
            for ((s, _), (c, _)) in stacks.iter().zip(&once) {
                prop_assert!(c.len() <= s.len());
                let kept = |v: &[FrameName]| -> Vec<FrameName> {
                    v.iter().filter(|f| unnamed_frame_image(f).is_none() && !f.name.starts_with("[lib")).cloned().collect()
                };
                prop_assert_eq!(kept(s), kept(c));
                prop_assert!(c.iter().all(|f| unnamed_frame_image(f).is_none()));
                prop_assert_eq!(&collapse_unnamed_runs(c), c);
                prop_assert!(c.windows(2).all(|w| !(w[0] == w[1] && w[0].name.starts_with("[lib"))));
            }
        }
    }
}
