//! Images: what format a file is ([`format`]), the one place that parses each part of an image
//! once per run through an [`crate::cache::ImageCache`] ([`cached`]), and the symbols of any image
//! netprobe can probe ([`symbols`], listed from those parts).
//!
//! Layering (as blazesym passes its caches in rather than letting parsers reach for them): the
//! parsers (`elf/`, `golang/`, `dotnet/`, `perfmap/`) take bytes and know no cache; the cache
//! (`crate::cache`) stores opaque parts and knows no parser; [`cached`] sits above both and is the
//! only module that names a parser's type next to the cache.

pub mod cached;
pub mod format;
pub mod symbols;

pub use format::{sniff, sniff_file, ImageFormat};
pub use symbols::{
    bundle_notes, load_image_symbols, load_image_symbols_matching, load_shared_image_symbols,
    load_symbols, load_symbols_in, ImageSymbols, SharedImageSymbols,
};
