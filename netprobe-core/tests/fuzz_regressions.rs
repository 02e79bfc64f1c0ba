//! Inputs the coverage-guided fuzz targets (`netprobe-core/fuzz`, `scripts/fuzz.sh`) found to
//! crash or hang a parser, replayed through the same public entry points as the target that found
//! them: each must finish quickly, without a panic. The inputs live in
//! `netprobe-core/fuzz/regressions/<target>/` (scripts/fuzz.sh also replays them as seeds). The
//! targets of netprobe-cli's code live in `netprobe-cli/fuzz`, and their regressions are replayed
//! by netprobe-cli/tests/fuzz_regressions.rs.

use netprobe_core::bytes::FileBytes;
use netprobe_core::dotnet::bundle::{parser, Bundle};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Far above what any of these inputs takes once fixed (milliseconds, even unoptimized), far below
/// what they took before.
const BOUND: Duration = Duration::from_secs(5);

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
}

/// A bundle (the `bundle` target) whose embedded assembly's METHODDEF_ENTRYPOINTS array header
/// claimed 2^30 slots in a 26 KB file: listing its methods walked every slot (over 10 s per
/// input under the fuzzer). NativeArray::parse now refuses a slot count whose block table does
/// not fit in the file. And one whose two entry-point sections claim sizes summing past 4 GiB
/// (`entry-table-sizes-overflow`): the sum that decides whether to name on two threads
/// overflowed a `u32` (a panic with overflow checks); it is summed in 64 bits.
#[test]
fn bundles_with_huge_native_arrays_are_refused_quickly() {
    for input in inputs("bundle") {
        let data = std::fs::read(&input).unwrap();
        let started = Instant::now();
        let _ = parser::parse(&data);
        if let Ok(Some(bundle)) =
            Bundle::from_bytes(Path::new("fuzz-bundle"), FileBytes::Owned(data))
        {
            for (_, asm) in bundle.mapped_assemblies() {
                if let Ok(asm) = asm {
                    let _ = asm.methods();
                }
            }
        }
        let took = started.elapsed();
        assert!(took < BOUND, "{}: took {took:?}", input.display());
    }
}
