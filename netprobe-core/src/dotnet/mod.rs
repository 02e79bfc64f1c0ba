//! .NET ReadyToRun images and ECMA-335 metadata (issue 4).
