//! What the .NET runtime tests share (`dotnet_r2r_listing`, `dotnet_live_runtime`,
//! `dotnet_probe_safety`): the Microsoft runtimes `sample-app/dotnet/fetch-runtimes.sh` puts in
//! the cache, their framework assemblies, and the listing helpers. A module of each of those test
//! targets; each uses part of it.
#![allow(dead_code)]

use fixtures::e2e::{err, Need};
use netprobe_core::dotnet::{Assembly, R2rMethod};
use std::path::PathBuf;

#[derive(Clone, Copy)]
pub struct Runtime {
    pub major: &'static str,
    pub version: &'static str,
    pub tfm: &'static str,
}

pub const NET8: Runtime = Runtime {
    major: "8",
    version: "8.0.4",
    tfm: "net8.0",
};

pub const NET31: Runtime = Runtime {
    major: "3.1",
    version: "3.1.23",
    tfm: "netcoreapp3.1",
};

impl Runtime {
    pub fn root(&self) -> PathBuf {
        fixtures::cache_dir().join("dotnet").join(self.major)
    }
    pub fn shared(&self) -> PathBuf {
        self.root()
            .join("shared/Microsoft.NETCore.App")
            .join(self.version)
    }
    pub fn dll(&self, name: &str) -> PathBuf {
        self.shared().join(format!("{name}.dll"))
    }
    pub fn need(&self) -> Need {
        Need::Path(self.dll("System.Private.CoreLib"))
    }
}

/// Invariants every listed method must satisfy, checked against the file itself.
pub fn check_methods(asm: &Assembly, methods: &[R2rMethod]) -> Result<(), String> {
    let len = asm.bytes().len() as u64;
    for m in methods {
        let sec = asm
            .pe()
            .section_of(m.rva)
            .ok_or_else(|| format!("{} at {} is in no section", m.name, m.rva))?;
        if !sec.is_executable() {
            return Err(format!(
                "{} at {} is in non-executable {}",
                m.name, m.rva, sec.name
            ));
        }
        let off = m
            .file_offset
            .ok_or_else(|| format!("{} has no file offset", m.name))?;
        if off.0 + m.size > len || m.size == 0 {
            return Err(format!(
                "{} size {} at {} past the file",
                m.name, m.size, off
            ));
        }
        if m.total_size < m.size {
            return Err(format!("{} total size below main body", m.name));
        }
    }
    Ok(())
}

pub fn list(rt: Runtime, name: &str) -> Result<(Assembly, Vec<R2rMethod>), String> {
    let asm = Assembly::open(rt.dll(name)).map_err(err)?;
    let methods = asm.methods().map_err(err)?;
    check_methods(&asm, &methods)?;
    Ok((asm, methods))
}
