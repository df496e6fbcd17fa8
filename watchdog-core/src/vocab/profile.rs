//! A task's profile and its keys: the budgets (SPEC §2) and escalation
//! settings (§3), one documented field per budget, and the one key table
//! ([`OPTIONS`]: name, where the value goes, the range of R7.2) that TOML,
//! the CLI flags, the Rust builder, Node and Python all go through
//! ([`Profile::set`], R10.6), with one error ([`ProfileError`]) that names
//! the key and what was wrong, and one canonical rendering
//! ([`Profile::describe`]). The values themselves ([`Limit`],
//! [`OptionValue`]) live in `value.rs`. Adding a key is one entry in
//! [`OPTIONS`] (plus its documentation).
//!
//! The profile and its key table share this file because each names the
//! other: [`Profile::set`] and [`Profile::describe`] walk the table, and
//! the table's entries point into a profile's fields
//! ([`OptionSpec::show`] takes one). Every inherent method of [`Profile`]
//! is here.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::vocab::duration::number;
use crate::vocab::error::ProfileError;
use crate::vocab::signal::{KindSet, SignalKind};
use crate::vocab::value::{Limit, OptionValue};

/// The budgets and escalation settings a task is watched with.
///
/// Every silence budget is renewable; `deadline` is not (R2.4). `None`
/// means "off" for the optional ones. Build one with the setters (a budget
/// setter takes a `Duration`, [`Limit::Off`] or an `Option<Duration>`) or
/// by key with [`Profile::set`], the entry every door uses (R10.6).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Limit, Profile};
///
/// let mut p = Profile::default()
///     .idle(Duration::from_secs(60))
///     .execution(Duration::from_secs(600))
///     .deadline(Duration::from_secs(7200))
///     .heartbeat_interval(Limit::Off);
/// p.set("liveness", "30s").unwrap();
/// p.validate().unwrap();
/// // The execution phase allows the larger of execution and idle (R2.2).
/// assert_eq!(p.execution_budget(), Some(Duration::from_secs(600)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Profile {
    /// R2.1: longest silence while no tool call is in flight; `None` is off.
    #[serde(with = "opt_dur")]
    pub idle: Option<Duration>,
    /// R2.2: longest silence while a tool call is in flight; the effective
    /// budget is `max(execution, idle)`. `None` means the idle budget.
    #[serde(with = "opt_dur")]
    pub execution: Option<Duration>,
    /// R2.3: longest silence before the first progress signal; `None` means
    /// the idle budget.
    #[serde(with = "opt_dur")]
    pub startup: Option<Duration>,
    /// R2.4: total time from the start, never renewed; `None` is off.
    #[serde(with = "opt_dur")]
    pub deadline: Option<Duration>,
    /// R2.9: the furthest a task may extend its deadline, measured from its
    /// start; `None` puts no bound on extensions.
    #[serde(with = "opt_dur")]
    pub max_deadline: Option<Duration>,
    /// R2.5: longest gap between heartbeats, armed by the first; `None` is off.
    #[serde(with = "opt_dur")]
    pub liveness: Option<Duration>,
    /// R2.6: the signal kinds that renew the silence budgets.
    pub renewed_by: KindSet,
    /// R3.2: the strike that cancels; 0 means notify only.
    pub terminate_after: u32,
    /// R3.5: time between the cancel action and the kill action.
    #[serde(with = "humantime_dur")]
    pub grace_period: Duration,
    /// R3.7: outbound heartbeat cadence; `None` disables heartbeats.
    #[serde(with = "opt_dur")]
    pub heartbeat_interval: Option<Duration>,
    /// R3.6: when to emit the one `long_running` event; `None` is off.
    #[serde(with = "opt_dur")]
    pub long_running_after: Option<Duration>,
    /// R3.4: deadline and liveness verdicts notify instead of cancelling.
    pub notify_only: bool,
}

impl Default for Profile {
    /// The built-in defaults, the same values as the shipped
    /// `stallwarden.default.toml`.
    fn default() -> Self {
        Profile {
            idle: Some(Duration::from_secs(300)),
            execution: None,
            startup: None,
            deadline: None,
            max_deadline: None,
            liveness: None,
            renewed_by: KindSet::DEFAULT_RENEWING,
            terminate_after: 1,
            grace_period: Duration::from_secs(10),
            heartbeat_interval: Some(Duration::from_secs(10)),
            long_running_after: None,
            notify_only: false,
        }
    }
}

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident: $ty:ty => $field:ident $conv:tt;)*) => {$(
        $(#[$m])*
        #[must_use]
        pub fn $name(mut self, v: $ty) -> Self {
            self.$field = setters!(@conv $conv v, $field);
            self
        }
    )*};
    (@conv limit $v:ident, $field:ident) => {
        limit_for(&stringify!($field).replace('_', "-"), $v.into())
    };
    (@conv plain $v:ident, $field:ident) => { $v };
}

impl Profile {
    setters! {
        /// Sets the idle budget (R2.1): a `Duration`, `Limit::Off` or an
        /// `Option<Duration>`.
        idle: impl Into<Limit> => idle limit;
        /// Sets the execution budget (R2.2); off means the idle budget.
        execution: impl Into<Limit> => execution limit;
        /// Sets the startup budget (R2.3); off means the idle budget.
        startup: impl Into<Limit> => startup limit;
        /// Sets the deadline (R2.4), or turns it off.
        deadline: impl Into<Limit> => deadline limit;
        /// Sets the bound on deadline extensions (R2.9), or removes it.
        max_deadline: impl Into<Limit> => max_deadline limit;
        /// Sets the liveness budget (R2.5), or turns it off.
        liveness: impl Into<Limit> => liveness limit;
        /// Sets the renewing kinds (R2.6).
        renewed_by: KindSet => renewed_by plain;
        /// Sets the cancelling strike (R3.2).
        terminate_after: u32 => terminate_after plain;
        /// Sets the grace period between cancel and kill (R3.5); zero
        /// kills at once.
        grace_period: Duration => grace_period plain;
        /// Sets or disables outbound heartbeats (R3.7): `None`,
        /// `Limit::Off` and a zero duration all disable them.
        heartbeat_interval: impl Into<Limit> => heartbeat_interval limit;
        /// Sets the `long_running` threshold (R3.6), or turns it off.
        long_running_after: impl Into<Limit> => long_running_after limit;
        /// Makes deadline and liveness verdicts notify only (R3.4).
        notify_only: bool => notify_only plain;
    }

    /// Returns the silence budget while no tool call is in flight (R2.1).
    pub fn idle_budget(&self) -> Option<Duration> {
        self.idle
    }

    /// Returns the silence budget while a tool call is in flight:
    /// `max(execution, idle)` (R2.2).
    pub fn execution_budget(&self) -> Option<Duration> {
        match (self.execution, self.idle) {
            (Some(e), Some(i)) => Some(e.max(i)),
            (e, i) => e.or(i),
        }
    }

    /// Returns the silence budget before the first progress signal (R2.3).
    pub fn startup_budget(&self) -> Option<Duration> {
        self.startup.or(self.idle)
    }

    /// Checks every value against its allowed range.
    ///
    /// A zero silence budget would stall every task at once and an absurd one
    /// silently disables the guard, so both are refused with the range
    /// rather than clamped (R7.2).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use watchdog_core::Profile;
    ///
    /// let err = Profile::default().idle(Duration::ZERO).validate().unwrap_err();
    /// assert_eq!(err.key, "idle");
    /// assert!(err.to_string().contains("1ms..=30days"));
    /// ```
    pub fn validate(&self) -> Result<(), ProfileError> {
        for option in &OPTIONS {
            option.check(self)?;
        }
        if let (Some(d), Some(m)) = (self.deadline, self.max_deadline) {
            if d > m {
                return Err(ProfileError {
                    key: "deadline".into(),
                    found: humantime::format_duration(d).to_string(),
                    expected: "at most max-deadline".into(),
                    why: None,
                });
            }
        }
        Ok(())
    }

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

/// Every profile key, in the order `describe`, `stallwarden check` and the
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

    /// Returns whether the key takes a count (`terminate-after`), which a
    /// typed door such as a config file must give as an integer.
    ///
    /// ```
    /// use watchdog_core::OptionSpec;
    /// assert!(OptionSpec::find("terminate-after").unwrap().takes_count());
    /// assert!(!OptionSpec::find("idle").unwrap().takes_count());
    /// ```
    pub fn takes_count(&self) -> bool {
        matches!(self.slot, Slot::Count(..))
    }

    /// Returns what a value of this key must look like, as errors state it.
    pub fn expected(&self) -> Cow<'static, str> {
        match self.slot {
            Slot::Budget(..) => format!("{DURATION_EXPECTED}, or \"off\"").into(),
            Slot::Span(..) => DURATION_EXPECTED.into(),
            Slot::Count(_) => "an integer 0..=1000 (0 means never cancel)".into(),
            Slot::Flag(_) => "a boolean (true or false)".into(),
            Slot::Kinds(_) => "a list of signal kinds such as [\"output\", \"tool-call\"] \
                 (argument-delta, output, tool-call, progress, heartbeat, cpu, net, custom)"
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
                // R8.16: a value past every key's limit (100 years) is out
                // of this key's range: the message quotes this key's.
                let out_of_range = |e: crate::vocab::duration::DurationError| match e {
                    crate::vocab::duration::DurationError::TooLong { text } => ProfileError {
                        expected: range.text.into(),
                        ..err(
                            text.clone(),
                            Some(format!("duration \"{text}\" is out of range")),
                        )
                    },
                    e => invalid(e.to_string()),
                };
                let (limit, found) = match &value {
                    OptionValue::Text(s) => (
                        s.parse::<Limit>().map_err(out_of_range)?,
                        s.trim().to_owned(),
                    ),
                    OptionValue::Int(n) => (
                        Limit::from_millis(*n as f64).map_err(out_of_range)?,
                        format!("{n}ms"),
                    ),
                    OptionValue::Float(x) => (
                        Limit::from_millis(*x).map_err(out_of_range)?,
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
                                 heartbeat, cpu, net, custom, repeat"
                                .into(),
                            ..err(
                                item.to_string(),
                                Some(format!("unknown signal kind `{}`", unquoted(item))),
                            )
                        });
                    };
                    set = set.with(kind);
                }
                if let Some(problem) = repeat_without_output(set) {
                    return Err(ProfileError {
                        expected: problem.expected.into(),
                        ..invalid(problem.why.into())
                    });
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
            // R5.12: a repeat that renews renews as the output it is; with
            // `output` left out it would renew nothing, silently.
            Slot::Kinds(field) => {
                let set = *field(&mut p);
                match repeat_without_output(set) {
                    Some(problem) => Err(ProfileError {
                        why: Some(problem.why.into()),
                        ..out(
                            set.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(","),
                            problem.expected,
                        )
                    }),
                    None => Ok(()),
                }
            }
            Slot::Flag(_) => Ok(()),
        }
    }

    /// Shows the value `p` holds for this key as a person reads it
    /// (`1m 30s`, `off`, `1`, `false`, `output,cpu`), for `stallwarden check`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{OptionSpec, Profile};
    /// let p = Profile::default();
    /// assert_eq!(OptionSpec::find("idle").unwrap().show(&p), "5m");
    /// assert_eq!(OptionSpec::find("deadline").unwrap().show(&p), "off");
    /// ```
    pub fn show(&self, p: &Profile) -> String {
        let mut p = p.clone();
        match self.slot {
            Slot::Budget(field, _) => Limit::from(*field(&mut p)).to_string(),
            Slot::Span(field, _) => Limit::After(*field(&mut p)).to_string(),
            Slot::Count(field) => field(&mut p).to_string(),
            Slot::Flag(field) => field(&mut p).to_string(),
            Slot::Kinds(field) => field(&mut p)
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(","),
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

/// Makes a setter take a [`Limit`] through `Into`, with the key's rule for
/// a zero applied (R3.7).
pub(crate) fn limit_for(name: &str, v: Limit) -> Option<Duration> {
    let zero_is_off = OPTIONS
        .iter()
        .find(|o| o.name == name)
        .is_some_and(|o| matches!(o.slot, Slot::Budget(_, r) if r.zero_is_off));
    v.duration().filter(|d| !(zero_is_off && d.is_zero()))
}

/// What is wrong with a `renewed-by` list.
struct KindsProblem {
    why: &'static str,
    expected: &'static str,
}

/// R5.12: a repeat that renews renews as the output it is; with `output`
/// left out it would renew nothing, silently.
fn repeat_without_output(set: KindSet) -> Option<KindsProblem> {
    (set.contains(SignalKind::Repeat) && !set.contains(SignalKind::Output)).then_some(
        KindsProblem {
            why: "`repeat` renews as the output it is: add `output` too",
            expected: "a list that has `output` wherever it has `repeat`",
        },
    )
}

mod opt_dur {
    use std::time::Duration;
    pub(super) fn serialize<S: serde::Serializer>(
        v: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_str("off"),
        }
    }
}

mod humantime_dur {
    use std::time::Duration;
    pub(super) fn serialize<S: serde::Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*v).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_is_valid() {
        Profile::default().validate().unwrap();
    }

    // R2.2: effective execution budget is max(execution, idle).
    #[test]
    fn execution_budget_never_below_idle() {
        let p = Profile::default()
            .idle(Duration::from_secs(60))
            .execution(Duration::from_secs(10));
        assert_eq!(p.execution_budget(), Some(Duration::from_secs(60)));
    }

    // R2.3: startup defaults to idle.
    #[test]
    fn startup_defaults_to_idle() {
        let p = Profile::default().idle(Duration::from_secs(42));
        assert_eq!(p.startup_budget(), Some(Duration::from_secs(42)));
    }

    #[test]
    fn absurd_and_zero_budgets_are_refused_with_the_range() {
        let cases = [
            (Profile::default().idle(Duration::ZERO), "idle"),
            (
                Profile::default().execution(Duration::from_secs(400 * 86_400)),
                "execution",
            ),
            (
                Profile::default().heartbeat_interval(Some(Duration::from_millis(10))),
                "heartbeat-interval",
            ),
            (
                Profile::default().grace_period(Duration::from_secs(7200)),
                "grace-period",
            ),
            (
                Profile::default()
                    .deadline(Duration::from_secs(10))
                    .max_deadline(Duration::from_secs(5)),
                "deadline",
            ),
        ];
        for (p, key) in cases {
            let err = p.validate().unwrap_err();
            assert_eq!(err.key, key, "{err}");
            assert!(err.to_string().contains("expected"), "{err}");
        }
    }

    // R8.16, R10.6: past the 100-year cap, text and numbers alike quote
    // the key's own range, as Node and Python pass them.
    #[test]
    fn past_the_cap_every_value_quotes_the_keys_range() {
        let deadline = OptionSpec::find("deadline").unwrap();
        for v in [
            OptionValue::from("101y"),
            OptionValue::from("9223372036854775807s"),
            OptionValue::Float(1e300),
            OptionValue::Float(999_999_999.0 * 86_400_000.0),
        ] {
            let e = deadline
                .parse("deadline", v.clone())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("deadline: duration \""), "{v}: {e}");
            assert!(
                e.ends_with("is out of range, expected 1ms..=365days"),
                "{v}: {e}"
            );
        }
        let grace = OptionSpec::find("grace-period").unwrap();
        let e = grace
            .parse("gracePeriod", OptionValue::Float(1e300))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "gracePeriod: duration \"1e300ms\" is out of range, expected 0s..=1h"
        );
    }

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
