//! .NET (placeholder)
