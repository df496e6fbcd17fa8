//! Profile options as users write them, parsed and bounded in one place
//! (R10.6): one value type for a budget ([`Limit`], with its one `FromStr`),
//! one value type for whatever a door hands in ([`OptionValue`]) and one key
//! table ([`OPTIONS`]) that TOML, the CLI flags, the Rust builder, Node and
//! Python all go through, with one error ([`ProfileError`]) that names the
//! key and what was wrong. Adding a key is one entry in [`OPTIONS`] (plus
//! its documentation).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::{duration_from_millis, number, parse_duration, DurationError};
use crate::profile::{Profile, ProfileError};
use crate::signal::{KindSet, SignalKind};

/// A budget's value: off, or a duration (R7.1, R10.6).
///
/// Its one [`FromStr`] takes `"off"`, `"0"`, and humantime strings
/// (`"90s"`, `"1h 30m"`, `"500ms"`), at most 100 years (R8.12);
/// [`Limit::from_millis`] takes a number of milliseconds. What a zero means
/// is the key's business, not the value's: `heartbeat-interval = 0` is off
/// (R3.7), `grace-period = 0` kills at once (R3.5), `idle = 0` is refused
/// (R7.2). [`Profile::set`] applies those rules.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Limit, Profile};
///
/// assert_eq!("off".parse::<Limit>(), Ok(Limit::Off));
/// assert_eq!("1m 30s".parse::<Limit>(), Ok(Limit::After(Duration::from_secs(90))));
/// assert_eq!("0".parse::<Limit>(), Ok(Limit::After(Duration::ZERO)));
/// assert_eq!(Limit::from_millis(1500.0), Ok(Limit::After(Duration::from_millis(1500))));
/// assert!("soon".parse::<Limit>().is_err());
/// // A builder method takes a Limit, a Duration or an Option<Duration>.
/// let p = Profile::default().idle(Limit::Off).deadline(Duration::from_secs(60));
/// assert_eq!(p.idle, None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The budget is off (`"off"`).
    Off,
    /// The budget is this long.
    After(Duration),
}

impl Limit {
    /// Returns the duration, `None` when off.
    pub const fn duration(self) -> Option<Duration> {
        match self {
            Limit::Off => None,
            Limit::After(d) => Some(d),
        }
    }

    /// Reads a number of milliseconds (Node, Python): finite, not
    /// negative, at most 100 years (R8.12).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::Limit;
    /// assert!(Limit::from_millis(-1.0).is_err());
    /// assert!(Limit::from_millis(f64::NAN).is_err());
    /// ```
    pub fn from_millis(ms: f64) -> Result<Limit, DurationError> {
        duration_from_millis(ms).map(Limit::After)
    }
}

impl FromStr for Limit {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Limit, DurationError> {
        match s.trim() {
            "off" => Ok(Limit::Off),
            // A bare zero is zero in every unit; any other bare number needs
            // one (humantime says so).
            "0" => Ok(Limit::After(Duration::ZERO)),
            _ => parse_duration(s).map(Limit::After),
        }
    }
}

impl fmt::Display for Limit {
    /// `off`, or the duration in humantime form (`1m 30s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Off => f.write_str("off"),
            Limit::After(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

impl From<Duration> for Limit {
    fn from(d: Duration) -> Limit {
        Limit::After(d)
    }
}

impl From<Option<Duration>> for Limit {
    fn from(d: Option<Duration>) -> Limit {
        d.map_or(Limit::Off, Limit::After)
    }
}

/// A value for [`Profile::set`] as a door received it: TOML's, a CLI
/// flag's, a JS value, a Python object.
///
/// Text is parsed with [`Limit`]'s `FromStr` for durations; a number is
/// milliseconds for a duration and a count for `terminate-after`; `Null`
/// (JS `null`) and `Bool(false)` also turn off a budget that can be off.
///
/// # Examples
///
/// ```
/// use watchdog_core::OptionValue;
/// assert_eq!(OptionValue::from("90s").to_string(), "\"90s\"");
/// assert_eq!(OptionValue::from(1500).to_string(), "1500");
/// let kinds = OptionValue::from(vec!["output", "cpu"]);
/// assert_eq!(kinds.to_string(), "[\"output\", \"cpu\"]");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// JS `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction (or NaN, or an infinity).
    Float(f64),
    /// A string.
    Text(String),
    /// A list (`renewed-by`).
    List(Vec<OptionValue>),
}

impl fmt::Display for OptionValue {
    /// The value as a person would write it (JSON-like), for errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Null => f.write_str("null"),
            OptionValue::Bool(b) => write!(f, "{b}"),
            OptionValue::Int(n) => write!(f, "{n}"),
            OptionValue::Float(x) => f.write_str(&number(*x)),
            OptionValue::Text(s) => write!(f, "{s:?}"),
            OptionValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl From<&str> for OptionValue {
    fn from(s: &str) -> Self {
        OptionValue::Text(s.to_owned())
    }
}

impl From<String> for OptionValue {
    fn from(s: String) -> Self {
        OptionValue::Text(s)
    }
}

impl From<i64> for OptionValue {
    fn from(n: i64) -> Self {
        OptionValue::Int(n)
    }
}

impl From<i32> for OptionValue {
    fn from(n: i32) -> Self {
        OptionValue::Int(n.into())
    }
}

impl From<u32> for OptionValue {
    fn from(n: u32) -> Self {
        OptionValue::Int(n.into())
    }
}

impl From<f64> for OptionValue {
    fn from(x: f64) -> Self {
        OptionValue::Float(x)
    }
}

impl From<bool> for OptionValue {
    fn from(b: bool) -> Self {
        OptionValue::Bool(b)
    }
}

impl<T: Into<OptionValue>> From<Vec<T>> for OptionValue {
    fn from(items: Vec<T>) -> Self {
        OptionValue::List(items.into_iter().map(Into::into).collect())
    }
}

/// The range a duration key accepts, as its errors state it.
#[derive(Clone, Copy, Debug)]
struct Range {
    lo: Duration,
    hi: Duration,
    /// Whether the key can be off (`"off"`, `null`, `false`).
    off: bool,
    /// Whether a zero duration means off (R3.7).
    zero_is_off: bool,
    /// The range as errors state it (`1ms..=30days`).
    text: &'static str,
}

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);
const MONTH: Duration = Duration::from_secs(30 * 86_400);
const YEAR: Duration = Duration::from_secs(365 * 86_400);

const SILENCE: Range = Range {
    lo: MS,
    hi: MONTH,
    off: true,
    zero_is_off: false,
    text: "1ms..=30days",
};
const TOTAL: Range = Range {
    lo: MS,
    hi: YEAR,
    off: true,
    zero_is_off: false,
    text: "1ms..=365days",
};
const GRACE: Range = Range {
    lo: Duration::ZERO,
    hi: HOUR,
    off: false,
    zero_is_off: false,
    text: "0s..=1h",
};
const HEARTBEAT: Range = Range {
    lo: SEC,
    hi: HOUR,
    off: true,
    zero_is_off: true,
    text: "\"off\" or 1s..=1h",
};

/// The most strikes `terminate-after` takes.
const MAX_STRIKES: u32 = 1000;

/// Where a key's value lives in a [`Profile`] and what it accepts.
#[derive(Clone, Copy)]
enum Slot {
    /// A budget that may be off (`None`).
    Budget(fn(&mut Profile) -> &mut Option<Duration>, Range),
    /// A duration that is never off.
    Span(fn(&mut Profile) -> &mut Duration, Range),
    /// A count, 0..=`MAX_STRIKES`.
    Count(fn(&mut Profile) -> &mut u32),
    /// A switch.
    Flag(fn(&mut Profile) -> &mut bool),
    /// A set of signal kinds.
    Kinds(fn(&mut Profile) -> &mut KindSet),
}

/// One key of a profile: its kebab-case name (as TOML writes it) and where
/// its value goes. See [`OPTIONS`].
///
/// # Examples
///
/// ```
/// use watchdog_core::OPTIONS;
/// let heartbeat = OPTIONS.iter().find(|o| o.name() == "heartbeat-interval").unwrap();
/// assert!(heartbeat.takes_duration());
/// assert!(heartbeat.expected().contains("\"off\""));
/// ```
#[derive(Clone, Copy)]
pub struct OptionSpec {
    name: &'static str,
    slot: Slot,
}

impl fmt::Debug for OptionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

macro_rules! field {
    ($f:ident) => {
        |p: &mut Profile| &mut p.$f
    };
}

/// Every profile key, in the order `describe`, `stallguard check` and the
/// shipped default config list them (R7.1, R10.6).
///
/// # Examples
///
/// ```
/// use watchdog_core::OPTIONS;
/// let names: Vec<_> = OPTIONS.iter().map(|o| o.name()).collect();
/// assert_eq!(names[0], "idle");
/// assert!(names.contains(&"renewed-by"));
/// ```
pub static OPTIONS: [OptionSpec; 12] = [
    OptionSpec::new("idle", Slot::Budget(field!(idle), SILENCE)),
    OptionSpec::new("execution", Slot::Budget(field!(execution), SILENCE)),
    OptionSpec::new("startup", Slot::Budget(field!(startup), SILENCE)),
    OptionSpec::new("deadline", Slot::Budget(field!(deadline), TOTAL)),
    OptionSpec::new("max-deadline", Slot::Budget(field!(max_deadline), TOTAL)),
    OptionSpec::new("liveness", Slot::Budget(field!(liveness), SILENCE)),
    OptionSpec::new("renewed-by", Slot::Kinds(field!(renewed_by))),
    OptionSpec::new("terminate-after", Slot::Count(field!(terminate_after))),
    OptionSpec::new("grace-period", Slot::Span(field!(grace_period), GRACE)),
    OptionSpec::new(
        "heartbeat-interval",
        Slot::Budget(field!(heartbeat_interval), HEARTBEAT),
    ),
    OptionSpec::new(
        "long-running-after",
        Slot::Budget(field!(long_running_after), SILENCE),
    ),
    OptionSpec::new("notify-only", Slot::Flag(field!(notify_only))),
];

/// What a duration must look like, stated in every duration error.
const DURATION_EXPECTED: &str = "a duration such as \"90s\" or \"1h 30m\"";

impl OptionSpec {
    const fn new(name: &'static str, slot: Slot) -> Self {
        OptionSpec { name, slot }
    }

    /// Finds a key by name: kebab-case (`max-deadline`, as TOML writes it),
    /// snake_case (`max_deadline`, Python) or camelCase (`maxDeadline`,
    /// Node) (R10.6).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::OptionSpec;
    /// for name in ["max-deadline", "max_deadline", "maxDeadline"] {
    ///     assert_eq!(OptionSpec::find(name).unwrap().name(), "max-deadline");
    /// }
    /// assert!(OptionSpec::find("idel").is_none());
    /// ```
    pub fn find(name: &str) -> Option<&'static OptionSpec> {
        if let Some(spec) = OPTIONS.iter().find(|o| o.name == name) {
            return Some(spec);
        }
        let mut kebab = String::with_capacity(name.len() + 4);
        for c in name.chars() {
            match c {
                '_' => kebab.push('-'),
                c if c.is_ascii_uppercase() => {
                    kebab.push('-');
                    kebab.push(c.to_ascii_lowercase());
                }
                c => kebab.push(c),
            }
        }
        OPTIONS.iter().find(|o| o.name == kebab)
    }

    /// Returns the key's kebab-case name, as TOML writes it.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Returns whether the key takes a duration (so a number is
    /// milliseconds).
    pub fn takes_duration(&self) -> bool {
        matches!(self.slot, Slot::Budget(..) | Slot::Span(..))
    }

    /// Returns what a value of this key must look like, as errors state it.
    pub fn expected(&self) -> Cow<'static, str> {
        match self.slot {
            Slot::Budget(..) => format!("{DURATION_EXPECTED}, or \"off\"").into(),
            Slot::Span(..) => DURATION_EXPECTED.into(),
            Slot::Count(_) => "an integer 0..=1000 (0 means never cancel)".into(),
            Slot::Flag(_) => "a boolean (true or false)".into(),
            Slot::Kinds(_) => "a list of signal kinds such as [\"output\", \"tool-call\"] \
                 (argument-delta, output, tool-call, progress, heartbeat, cpu, custom)"
                .into(),
        }
    }

    /// Parses `value` for this key and checks it against the key's range;
    /// errors name the key as `key` spells it (the caller's spelling:
    /// `maxDeadline`, `--idle`).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{OptionSpec, Profile};
    /// let spec = OptionSpec::find("grace-period").unwrap();
    /// let err = spec.parse("--grace", "off".into()).unwrap_err();
    /// assert_eq!(err.to_string(), "--grace: \"off\" is not allowed, expected a duration such as \"90s\" or \"1h 30m\"");
    /// let mut p = Profile::default();
    /// p.apply(&spec.parse("--grace", "0".into()).unwrap());
    /// assert!(p.grace_period.is_zero()); // R3.5: kill at once
    /// ```
    pub fn parse(&'static self, key: &str, value: OptionValue) -> Result<Setting, ProfileError> {
        let err = |found: String, why: Option<String>| ProfileError {
            key: key.to_owned().into(),
            found,
            expected: self.expected(),
            why,
        };
        let invalid = |why: String| err(value.to_string(), Some(why));
        let parsed = match self.slot {
            Slot::Budget(_, range) | Slot::Span(_, range) => {
                let (limit, found) = match &value {
                    OptionValue::Text(s) => (
                        s.parse::<Limit>().map_err(|e| invalid(e.to_string()))?,
                        s.trim().to_owned(),
                    ),
                    OptionValue::Int(n) => (
                        Limit::from_millis(*n as f64).map_err(|e| invalid(e.to_string()))?,
                        format!("{n}ms"),
                    ),
                    OptionValue::Float(x) => (
                        Limit::from_millis(*x).map_err(|e| invalid(e.to_string()))?,
                        format!("{}ms", number(*x)),
                    ),
                    OptionValue::Null | OptionValue::Bool(false) => (Limit::Off, "off".into()),
                    _ => return Err(invalid(format!("{value} is not a duration"))),
                };
                let limit = match limit {
                    Limit::After(d) if d.is_zero() && range.zero_is_off => Limit::Off,
                    Limit::Off if !range.off => {
                        return Err(invalid(format!("{value} is not allowed")));
                    }
                    Limit::After(d) if d < range.lo || d > range.hi => {
                        return Err(ProfileError {
                            expected: range.text.into(),
                            ..err(found, None)
                        });
                    }
                    l => l,
                };
                Parsed::Limit(limit)
            }
            Slot::Count(_) => {
                let n = match &value {
                    OptionValue::Int(n) => Some(*n),
                    OptionValue::Float(x) if x.fract() == 0.0 && x.abs() < 1e15 => Some(*x as i64),
                    OptionValue::Text(s) => s.trim().parse::<i64>().ok(),
                    _ => None,
                };
                let Some(n) = n else {
                    return Err(invalid(format!("{value} is not an integer")));
                };
                match u32::try_from(n) {
                    Ok(n) if n <= MAX_STRIKES => Parsed::Count(n),
                    _ => {
                        return Err(ProfileError {
                            expected: "0..=1000 (0 means never cancel)".into(),
                            ..err(n.to_string(), None)
                        })
                    }
                }
            }
            Slot::Flag(_) => match &value {
                OptionValue::Bool(b) => Parsed::Flag(*b),
                _ => return Err(invalid(format!("{value} is not a boolean"))),
            },
            Slot::Kinds(_) => {
                let OptionValue::List(items) = &value else {
                    return Err(invalid(format!("{value} is not a list")));
                };
                let mut set = KindSet::EMPTY;
                for item in items {
                    let kind = match item {
                        OptionValue::Text(s) => s.parse::<SignalKind>().ok(),
                        _ => None,
                    };
                    let Some(kind) = kind else {
                        return Err(ProfileError {
                            expected: "one of argument-delta, output, tool-call, progress, \
                                 heartbeat, cpu, custom"
                                .into(),
                            ..err(
                                item.to_string(),
                                Some(format!("unknown signal kind `{}`", unquoted(item))),
                            )
                        });
                    };
                    set = set.with(kind);
                }
                Parsed::Kinds(set)
            }
        };
        Ok(Setting { spec: self, parsed })
    }

    /// Checks the value `p` holds for this key against the key's range.
    pub(crate) fn check(&self, p: &Profile) -> Result<(), ProfileError> {
        let mut p = p.clone();
        let out = |found: String, expected: &'static str| ProfileError {
            key: self.name.into(),
            found,
            expected: expected.into(),
            why: None,
        };
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        match self.slot {
            Slot::Budget(field, range) => match *field(&mut p) {
                Some(d) if d < range.lo || d > range.hi => Err(out(fmt(d), range.text)),
                _ => Ok(()),
            },
            Slot::Span(field, range) => match *field(&mut p) {
                d if d < range.lo || d > range.hi => Err(out(fmt(d), range.text)),
                _ => Ok(()),
            },
            Slot::Count(field) => match *field(&mut p) {
                n if n > MAX_STRIKES => Err(out(n.to_string(), "0..=1000 (0 means never cancel)")),
                _ => Ok(()),
            },
            Slot::Flag(_) | Slot::Kinds(_) => Ok(()),
        }
    }

    /// Renders the value `p` holds for this key in TOML syntax
    /// (`"1m 30s"`, `"off"`, `1`, `false`, `["output"]`).
    pub(crate) fn render(&self, p: &Profile) -> String {
        let mut p = p.clone();
        match self.slot {
            Slot::Budget(field, _) => format!("\"{}\"", Limit::from(*field(&mut p))),
            Slot::Span(field, _) => format!("\"{}\"", Limit::After(*field(&mut p))),
            Slot::Count(field) => field(&mut p).to_string(),
            Slot::Flag(field) => field(&mut p).to_string(),
            Slot::Kinds(field) => {
                let names: Vec<String> = field(&mut p)
                    .iter()
                    .map(|k| format!("\"{}\"", k.as_str()))
                    .collect();
                format!("[{}]", names.join(", "))
            }
        }
    }
}

fn unquoted(v: &OptionValue) -> String {
    match v {
        OptionValue::Text(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A parsed, range-checked value for one key, ready for
/// [`Profile::apply`]: what a TOML table or a CLI flag holds once read.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{OptionSpec, Profile};
/// let s = OptionSpec::find("idle").unwrap().parse("idle", "90s".into()).unwrap();
/// assert_eq!(s.key(), "idle");
/// let mut p = Profile::default();
/// p.apply(&s);
/// assert_eq!(p.idle, Some(Duration::from_secs(90)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    spec: &'static OptionSpec,
    parsed: Parsed,
}

#[derive(Clone, Copy, Debug)]
enum Parsed {
    Limit(Limit),
    Count(u32),
    Flag(bool),
    Kinds(KindSet),
}

impl Setting {
    /// Returns the kebab-case key this value is for.
    pub fn key(&self) -> &'static str {
        self.spec.name
    }
}

impl Profile {
    /// Sets the option `key` from a value as a door received it: the one
    /// entry TOML, the CLI flags, Node and Python go through (R10.6).
    ///
    /// `key` may be kebab-case, snake_case or camelCase. Durations take
    /// `"off"` (where the key can be off), humantime strings, `"0"`, and
    /// numbers of milliseconds; `null` and `false` are off too. A zero is
    /// off for `heartbeat-interval` (R3.7), kill-at-once for `grace-period`
    /// (R3.5) and refused for the silence budgets (R7.2). The value is
    /// checked against the key's range here; [`Profile::validate`] checks
    /// what spans keys (`deadline <= max-deadline`). On error the profile is
    /// unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use watchdog_core::Profile;
    ///
    /// let mut p = Profile::default();
    /// p.set("idle", "off").unwrap();
    /// p.set("heartbeat_interval", 0).unwrap();
    /// p.set("gracePeriod", 1500).unwrap();
    /// p.set("renewed-by", vec!["output", "cpu"]).unwrap();
    /// assert_eq!(p.idle, None);
    /// assert_eq!(p.heartbeat_interval, None);
    /// assert_eq!(p.grace_period, Duration::from_millis(1500));
    ///
    /// let err = p.set("grace_period", "off").unwrap_err();
    /// assert!(err.to_string().starts_with("grace_period: \"off\" is not allowed"), "{err}");
    /// let err = p.set("idle", "40days").unwrap_err();
    /// assert_eq!(err.to_string(), "idle is 40days, expected 1ms..=30days");
    /// let err = p.set("idel", "5s").unwrap_err();
    /// assert!(err.to_string().starts_with("idel: unknown option"), "{err}");
    /// ```
    pub fn set(&mut self, key: &str, value: impl Into<OptionValue>) -> Result<(), ProfileError> {
        let value = value.into();
        let Some(spec) = OptionSpec::find(key) else {
            let names: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
            return Err(ProfileError {
                key: key.to_owned().into(),
                found: value.to_string(),
                expected: format!("one of {}", names.join(", ")).into(),
                why: Some("unknown option".into()),
            });
        };
        let setting = spec.parse(key, value)?;
        self.apply(&setting);
        Ok(())
    }

    /// Applies a parsed value (R10.6).
    pub fn apply(&mut self, setting: &Setting) {
        match (setting.spec.slot, setting.parsed) {
            (Slot::Budget(field, range), Parsed::Limit(l)) => {
                *field(self) = l.duration().filter(|d| !(range.zero_is_off && d.is_zero()));
            }
            (Slot::Span(field, _), Parsed::Limit(Limit::After(d))) => *field(self) = d,
            (Slot::Count(field), Parsed::Count(n)) => *field(self) = n,
            (Slot::Flag(field), Parsed::Flag(b)) => *field(self) = b,
            (Slot::Kinds(field), Parsed::Kinds(k)) => *field(self) = k,
            // `parse` pairs each slot with its own kind of value.
            _ => {}
        }
    }

    /// Renders the profile canonically: one `key = value` line per key of
    /// [`OPTIONS`], in TOML syntax (so it is itself a valid `[defaults]`
    /// table). Every door's tests compare profiles through it (R10.6).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::Profile;
    /// let text = Profile::default().describe();
    /// assert!(text.starts_with("idle = \"5m\"\nexecution = \"off\"\n"), "{text}");
    /// assert!(text.contains("\nterminate-after = 1\n"));
    /// ```
    pub fn describe(&self) -> String {
        OPTIONS
            .iter()
            .map(|o| format!("{} = {}\n", o.name, o.render(self)))
            .collect()
    }
}

/// Makes a setter take a [`Limit`] through `Into`, with the key's rule for
/// a zero applied (R3.7).
pub(crate) fn limit_for(name: &str, v: Limit) -> Option<Duration> {
    let zero_is_off = OPTIONS
        .iter()
        .find(|o| o.name == name)
        .is_some_and(|o| matches!(o.slot, Slot::Budget(_, r) if r.zero_is_off));
    v.duration().filter(|d| !(zero_is_off && d.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // R10.6: every key's kebab name is found from its snake and camel forms.
    #[test]
    fn every_key_is_found_in_every_spelling() {
        for o in &OPTIONS {
            let snake = o.name.replace('-', "_");
            let camel: String = o
                .name
                .split('-')
                .enumerate()
                .map(|(i, w)| {
                    if i == 0 {
                        w.to_owned()
                    } else {
                        w[..1].to_uppercase() + &w[1..]
                    }
                })
                .collect();
            for n in [o.name, &snake, &camel] {
                assert_eq!(OptionSpec::find(n).map(|s| s.name), Some(o.name), "{n}");
            }
        }
    }

    // R3.7: a zero heartbeat is off from the builder, as from every door.
    #[test]
    fn zero_heartbeat_is_off_from_the_builder() {
        let p = Profile::default().heartbeat_interval(Some(Duration::ZERO));
        assert_eq!(p.heartbeat_interval, None);
        p.validate().unwrap();
        let p = Profile::default().heartbeat_interval(Duration::ZERO);
        assert_eq!(p.heartbeat_interval, None);
    }

    // An error leaves the profile as it was.
    #[test]
    fn a_refused_value_changes_nothing() {
        let mut p = Profile::default();
        assert!(p.set("idle", "0s").is_err());
        assert!(p.set("renewed-by", vec!["output", "telepathy"]).is_err());
        assert_eq!(p, Profile::default());
    }
}
