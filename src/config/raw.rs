//! The config file as written: each table's profile options as spanned
//! values, parsed by the core's one option entry (R10.6), so a range error
//! found after merging can still point at the line that set it; and the
//! keys of `stallwarden run` that are not part of a profile.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;
use watchdog_core::{OptionSpec, OptionValue, Profile, ProfileError, Setting, OPTIONS};

use super::elements::{Span, StreamKey};
use super::{ConfigError, ConfigErrorKind, Location, OnInputWait, OnLeftover, Restart, RunOptions};

/// The top-level tables a config file may hold.
pub(crate) const TOP_KEYS: &[&str] = &["defaults", "profile"];

/// The keys of `stallwarden run` a table may hold besides the profile
/// options of the core's [`OPTIONS`].
const RUN_KEYS: &[&str] = &[
    "stream",
    "leak-timeout",
    "on-leftover",
    "on-input-wait",
    "pty",
    "on-stall",
    "on-stall-timeout",
    "restart",
    "restart-delay",
    "restart-max-delay",
    "max-restarts",
    "stacks",
];

/// Every key a profile table may hold, in the order `check` prints them:
/// the core's options, then the run keys.
pub(crate) fn profile_keys() -> &'static [&'static str] {
    static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
    KEYS.get_or_init(|| {
        OPTIONS
            .iter()
            .map(OptionSpec::name)
            .chain(RUN_KEYS.iter().copied())
            .collect()
    })
}

/// A whole config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub(crate) defaults: RawProfile,
    #[serde(default)]
    pub(crate) profile: BTreeMap<String, RawProfile>,
}

/// One `[defaults]` or `[profile.NAME]` table; absent keys inherit.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawProfile {
    /// The profile options as written, in file order, until [`Self::resolve`].
    written: Vec<(&'static OptionSpec, Spanned<toml::Value>)>,
    /// The profile options, parsed and range-checked by the core.
    settings: Vec<(Setting, Range<usize>)>,
    stream: Option<Spanned<StreamKey>>,
    leak_timeout: Option<Spanned<Span>>,
    on_leftover: Option<Spanned<OnLeftover>>,
    on_input_wait: Option<Spanned<OnInputWait>>,
    pty: Option<Spanned<bool>>,
    on_stall: Option<Spanned<String>>,
    on_stall_timeout: Option<Spanned<Span>>,
    restart: Option<Spanned<Restart>>,
    restart_delay: Option<Spanned<Span>>,
    restart_max_delay: Option<Spanned<Span>>,
    max_restarts: Option<Spanned<u32>>,
    stacks: Option<Spanned<bool>>,
}

/// A key of a profile table, told apart while it is read, so an unknown
/// one is refused at its own line and column (R7.2).
enum Key {
    Option(&'static OptionSpec),
    Run(&'static str),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        let key = String::deserialize(d)?;
        // TOML keys are kebab-case only (R7.1): `max_deadline` is a typo here.
        if let Some(spec) = OPTIONS.iter().find(|o| o.name() == key) {
            return Ok(Key::Option(spec));
        }
        match RUN_KEYS.iter().find(|k| **k == key) {
            Some(k) => Ok(Key::Run(k)),
            None => Err(de::Error::unknown_field(&key, &[])),
        }
    }
}

impl<'de> Deserialize<'de> for RawProfile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawProfile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of profile keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawProfile, A::Error> {
                let mut raw = RawProfile::default();
                while let Some(key) = map.next_key_seed(KeySeed)? {
                    match key {
                        Key::Option(spec) => raw.written.push((spec, map.next_value()?)),
                        Key::Run("stream") => raw.stream = Some(map.next_value()?),
                        Key::Run("leak-timeout") => raw.leak_timeout = Some(map.next_value()?),
                        Key::Run("on-leftover") => raw.on_leftover = Some(map.next_value()?),
                        Key::Run("on-input-wait") => raw.on_input_wait = Some(map.next_value()?),
                        Key::Run("on-stall") => raw.on_stall = Some(map.next_value()?),
                        Key::Run("on-stall-timeout") => {
                            raw.on_stall_timeout = Some(map.next_value()?)
                        }
                        Key::Run("restart") => raw.restart = Some(map.next_value()?),
                        Key::Run("restart-delay") => raw.restart_delay = Some(map.next_value()?),
                        Key::Run("restart-max-delay") => {
                            raw.restart_max_delay = Some(map.next_value()?)
                        }
                        Key::Run("max-restarts") => raw.max_restarts = Some(map.next_value()?),
                        Key::Run("stacks") => raw.stacks = Some(map.next_value()?),
                        Key::Run(_) => raw.pty = Some(map.next_value()?),
                    }
                }
                Ok(raw)
            }
        }
        d.deserialize_map(V)
    }
}

/// Turns a TOML value into the value the core's option entry takes.
///
/// A bare positive number for a duration is refused: in a config file
/// "90" could mean seconds or milliseconds, and a watchdog must not guess
/// (R7.1). A bare 0 is 0 in every unit (`grace-period = 0`, R3.5), and a
/// negative one gets the core's "cannot be negative". Node and Python, where a number is documented as
/// milliseconds, pass numbers on.
fn option_value(
    spec: &OptionSpec,
    key: &str,
    v: &toml::Value,
) -> Result<OptionValue, ProfileError> {
    let bare = |n: String| ProfileError {
        key: key.to_owned().into(),
        found: n.clone(),
        expected: spec.expected(),
        why: Some(format!(
            "a bare number {n} could mean seconds or milliseconds: write \"{n}s\" or \"{n}ms\""
        )),
    };
    // R8.16: a count is an integer in a typed file: "3" and 3.0, which
    // the core takes from the flags (text) and Node (numbers), are refused
    // here with what to write; other wrong values get the core's message.
    let integral = match v {
        toml::Value::String(s) => s.trim().parse::<i64>().ok().map(|n| n.to_string()),
        toml::Value::Float(x) if x.fract() == 0.0 && x.abs() < 1e15 => Some(format!("{x:.0}")),
        _ => None,
    };
    if let Some(n) = integral.filter(|_| spec.takes_count()) {
        return Err(ProfileError {
            key: key.to_owned().into(),
            found: v.to_string(),
            expected: spec.expected(),
            why: Some(format!("{v} is not a bare integer: write {n}")),
        });
    }
    Ok(match v {
        toml::Value::String(s) => OptionValue::Text(s.clone()),
        toml::Value::Integer(n) if spec.takes_duration() && *n > 0 => {
            return Err(bare(n.to_string()))
        }
        toml::Value::Integer(n) => OptionValue::Int(*n),
        toml::Value::Float(x) if spec.takes_duration() && x.is_finite() && *x > 0.0 => {
            return Err(bare(x.to_string()))
        }
        toml::Value::Float(x) => OptionValue::Float(*x),
        toml::Value::Boolean(b) => OptionValue::Bool(*b),
        toml::Value::Array(items) => OptionValue::List(
            items
                .iter()
                .map(|i| option_value(spec, key, i))
                .collect::<Result<_, _>>()?,
        ),
        other => OptionValue::Text(other.to_string()),
    })
}

impl RawProfile {
    /// Parses every profile option of this table through the core's one
    /// entry (R10.6); an error names the file, line and column of the value
    /// and the key path `path.KEY` (R7.2).
    pub(crate) fn resolve(
        &mut self,
        text: &str,
        origin: &str,
        path: &str,
    ) -> Result<(), ConfigError> {
        for (spec, value) in std::mem::take(&mut self.written) {
            let parsed = option_value(spec, spec.name(), value.get_ref())
                .and_then(|v| spec.parse(spec.name(), v));
            match parsed {
                Ok(setting) => self.settings.push((setting, value.span())),
                Err(e) => {
                    let kind = match e.why {
                        Some(_) => ConfigErrorKind::Invalid(e.problem()),
                        None => ConfigErrorKind::OutOfRange(e),
                    };
                    let mut err = ConfigError::new(origin, kind);
                    err.location = Some(Location::of_offset(text, value.span().start));
                    err.key = Some(format!("{path}.{}", spec.name()));
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Overrides `p` with every profile option this table sets.
    pub(crate) fn apply(&self, p: &mut Profile) {
        for (setting, _) in &self.settings {
            p.apply(setting);
        }
    }

    /// Returns the `stream` this table sets: `None` if absent,
    /// `Some(None)` for `"none"` (R5.10).
    pub(crate) fn stream(&self) -> Option<Option<stallwarden_sources::agent::Format>> {
        self.stream.as_ref().map(|s| s.get_ref().0)
    }

    /// Overrides the run options (R8.5, R8.6, R8.11) with every key this table sets.
    pub(crate) fn apply_run(&self, r: &mut RunOptions) {
        if let Some(v) = &self.leak_timeout {
            r.leak_timeout = v.get_ref().0;
        }
        if let Some(v) = &self.on_leftover {
            r.on_leftover = *v.get_ref();
        }
        if let Some(v) = &self.on_input_wait {
            r.on_input_wait = *v.get_ref();
        }
        if let Some(v) = &self.pty {
            r.pty = *v.get_ref();
        }
        if let Some(v) = &self.on_stall {
            // R8.14: an empty command is no command.
            let cmd = v.get_ref().trim();
            r.on_stall = (!cmd.is_empty()).then(|| cmd.to_owned());
        }
        if let Some(v) = &self.on_stall_timeout {
            r.on_stall_timeout = v.get_ref().0;
        }
        if let Some(v) = &self.restart {
            r.restart = *v.get_ref();
        }
        if let Some(v) = &self.restart_delay {
            r.restart_delay = v.get_ref().0;
        }
        if let Some(v) = &self.restart_max_delay {
            r.restart_max_delay = v.get_ref().0;
        }
        if let Some(v) = &self.max_restarts {
            r.max_restarts = *v.get_ref();
        }
        if let Some(v) = &self.stacks {
            r.stacks = *v.get_ref();
        }
    }

    /// Returns where this table sets `key` (kebab-case), if it does.
    pub(crate) fn span_of(&self, key: &str) -> Option<Range<usize>> {
        fn sp<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
            v.as_ref().map(Spanned::span)
        }
        if let Some((_, span)) = self.settings.iter().rev().find(|(s, _)| s.key() == key) {
            return Some(span.clone());
        }
        match key {
            "stream" => sp(&self.stream),
            "leak-timeout" => sp(&self.leak_timeout),
            "on-leftover" => sp(&self.on_leftover),
            "on-input-wait" => sp(&self.on_input_wait),
            "pty" => sp(&self.pty),
            "on-stall" => sp(&self.on_stall),
            "on-stall-timeout" => sp(&self.on_stall_timeout),
            "restart" => sp(&self.restart),
            "restart-delay" => sp(&self.restart_delay),
            "restart-max-delay" => sp(&self.restart_max_delay),
            "max-restarts" => sp(&self.max_restarts),
            "stacks" => sp(&self.stacks),
            _ => None,
        }
    }
}
