//! One value type per kind of config element, each with the expectation its
//! error message states: a budget that can be "off", a plain duration, the
//! `renewed-by` list and the `terminate-after` strike count. Ranges are not
//! checked here: [`watchdog_core::Profile::validate`] owns them.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use watchdog_core::{KindSet, SignalKind};

/// What a duration value must look like, stated in every duration error.
pub(crate) const DURATION_EXPECTED: &str = "a duration such as \"90s\" or \"1h 30m\"";

/// A budget that is either a duration or `"off"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Switch(pub(crate) Option<Duration>);

impl<'de> Deserialize<'de> for Switch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Switch;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{DURATION_EXPECTED}, or \"off\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Switch, E> {
                if s.trim() == "off" {
                    return Ok(Switch(None));
                }
                parse_duration(s).map(|d| Switch(Some(d))).map_err(|e| {
                    E::custom(format!("{e}, expected {DURATION_EXPECTED}, or \"off\""))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration that cannot be turned off (`grace-period`).
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

/// The `renewed-by` list of signal kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RenewedBy(pub(crate) KindSet);

impl<'de> Deserialize<'de> for RenewedBy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RenewedBy;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a list of signal kinds such as [\"output\", \"tool-call\"] \
                     (argument-delta, output, tool-call, progress, heartbeat, cpu, net, custom)",
                )
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RenewedBy, A::Error> {
                let mut set = KindSet::EMPTY;
                while let Some(name) = seq.next_element::<String>()? {
                    let kind: SignalKind = name.parse().map_err(de::Error::custom)?;
                    set = set.with(kind);
                }
                Ok(RenewedBy(set))
            }
        }
        d.deserialize_seq(V)
    }
}

/// The `terminate-after` strike count, refused with its range when negative
/// (a `u32` would only say "expected u32").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Strikes(pub(crate) u32);

/// The expectation for `terminate-after`, as Profile::validate states it.
const STRIKES_EXPECTED: &str = "an integer 0..=1000 (0 means never cancel)";

impl<'de> Deserialize<'de> for Strikes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Strikes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(STRIKES_EXPECTED)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Strikes, E> {
                u32::try_from(v).map(Strikes).map_err(|_| {
                    E::custom(format!("{v} is out of range, expected {STRIKES_EXPECTED}"))
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Strikes, E> {
                u32::try_from(v).map(Strikes).map_err(|_| {
                    E::custom(format!("{v} is out of range, expected {STRIKES_EXPECTED}"))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The `stream` key: an agent CLI stream format (R5.10), or `"none"` for
/// plain bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamKey(pub(crate) Option<stallguard_sources::agent::Format>);

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
