//! Language-specific planning for live commands: what a symbol of each runtime needs beyond the
//! generic plan (calling convention, argument layout, return observation, runtime checks).

pub mod dotnet;
