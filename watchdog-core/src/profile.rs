//! A task's profile: its budgets (SPEC §2) and escalation settings (§3),
//! one documented field per budget, validated against the ranges users see
//! in config errors (R7.2). Reading an option as a door writes it (TOML,
//! flags, Node, Python: [`Profile::set`]) and each key's range live in
//! `option.rs`, one table for every door (R10.6); this module holds the
//! values, the builder and the whole-profile check.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::signal::KindSet;
use crate::value::Limit;

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
        crate::option::limit_for(&stringify!($field).replace('_', "-"), $v.into())
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
        for option in &crate::option::OPTIONS {
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
}

/// A profile option that was refused: the one error of every door
/// (R7.2, R10.6), naming the key and what was wrong.
///
/// Its form is `KEY is FOUND, expected RANGE` for a value out of range and
/// `KEY: WHY, expected FORM` for a value of the wrong form or an unknown
/// key.
///
/// # Examples
///
/// ```
/// use watchdog_core::Profile;
///
/// let err = Profile::default().terminate_after(5000).validate().unwrap_err();
/// assert_eq!(err.to_string(), "terminate-after is 5000, expected 0..=1000 (0 means never cancel)");
/// let err = Profile::default().set("notifyOnly", "yes").unwrap_err();
/// assert_eq!(err.to_string(), "notifyOnly: \"yes\" is not a boolean, expected a boolean (true or false)");
/// assert_eq!(err.problem(), "\"yes\" is not a boolean, expected a boolean (true or false)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// The key as the caller spelt it (`idle`, `max_deadline`,
    /// `maxDeadline`, `--idle`); kebab-case from [`Profile::validate`].
    pub key: Cow<'static, str>,
    /// The refused value, as a person would write it.
    pub found: String,
    /// The allowed range or form.
    pub expected: Cow<'static, str>,
    /// What is wrong with the form, when it is not the range.
    pub why: Option<String>,
}

impl ProfileError {
    /// Returns the message without the key: what was wrong and what was
    /// expected (for a door that names the key its own way).
    pub fn problem(&self) -> String {
        match &self.why {
            Some(why) => format!("{why}, expected {}", self.expected),
            None => format!("{} is out of range, expected {}", self.found, self.expected),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Some(why) => write!(f, "{}: {why}, expected {}", self.key, self.expected),
            None => write!(
                f,
                "{} is {}, expected {}",
                self.key, self.found, self.expected
            ),
        }
    }
}

impl std::error::Error for ProfileError {}

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
}
