//! Long-form guides, kept in `docs/` and included here so that their examples run as doctests.
//! This module holds documentation only.

/// The five rate-limit algorithms compared: promises, Redis layout, memory per key, an accuracy
/// study of the sliding window counter, and when to choose which.
///
/// (The chart is an image beside the markdown file, `docs/algorithms.svg`; it shows on GitHub
/// but not on docs.rs.)
///
#[doc = include_str!("../docs/algorithms.md")]
pub mod algorithms {}
