//! The value types of the keys of `stallwarden run` that are not profile
//! options (`leak-timeout`, `stream`), each with the expectation its error
//! message states. Profile options are the core's (R10.6,
//! [`watchdog_core::Profile::set`]).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// What a duration value must look like, stated in every duration error.
pub(crate) const DURATION_EXPECTED: &str = "a duration such as \"90s\" or \"1h 30m\"";

/// A duration that cannot be turned off (`leak-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span(pub(crate) Duration);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(DURATION_EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Span, E> {
                parse_duration(s)
                    .map(Span)
                    .map_err(|e| E::custom(format!("{e}, expected {DURATION_EXPECTED}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses a humantime duration, naming the refused text; the parsing and
/// the 100-year limit are the core's, shared by every door (R10.6, R8.12).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    watchdog_core::parse_duration(s).map_err(|e| e.to_string())
}

/// The `stream` key: an agent CLI stream format (R5.10), or `"none"` for
/// plain bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamKey(pub(crate) Option<stallwarden_sources::agent::Format>);

impl<'de> Deserialize<'de> for StreamKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StreamKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("one of \"none\", \"claude-code\", \"codex\", \"gemini\", \"qwen\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StreamKey, E> {
                if s == "none" {
                    return Ok(StreamKey(None));
                }
                s.parse().map(|f| StreamKey(Some(f))).map_err(|_| {
                    E::custom(format!(
                        "unknown stream format \"{s}\", expected one of \"none\", \"claude-code\", \"codex\", \"gemini\", \"qwen\""
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}
