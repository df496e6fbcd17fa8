//! A task's profile: its budgets (SPEC §2) and escalation settings (§3),
//! one documented field per budget, validated against the ranges users see
//! in config errors (R7.2). Parsing TOML lives in the facade crate; this
//! module only holds the values and their rules.

use std::time::Duration;

use crate::signal::KindSet;

/// The budgets and escalation settings a task is watched with.
///
/// Every silence budget is renewable; `deadline` is not (R2.4). `None`
/// means "off" for the optional ones.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::Profile;
///
/// let p = Profile::default()
///     .idle(Duration::from_secs(60))
///     .execution(Duration::from_secs(600))
///     .deadline(Duration::from_secs(7200));
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
    /// `stallguard.default.toml`.
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
            self.$field = setters!(@conv $conv v);
            self
        }
    )*};
    (@conv some $v:ident) => { Some($v) };
    (@conv plain $v:ident) => { $v };
}

impl Profile {
    setters! {
        /// Sets the idle budget (R2.1).
        idle: Duration => idle some;
        /// Sets the execution budget (R2.2).
        execution: Duration => execution some;
        /// Sets the startup budget (R2.3).
        startup: Duration => startup some;
        /// Sets the deadline (R2.4).
        deadline: Duration => deadline some;
        /// Sets the bound on deadline extensions (R2.9).
        max_deadline: Duration => max_deadline some;
        /// Sets the liveness budget (R2.5).
        liveness: Duration => liveness some;
        /// Sets the renewing kinds (R2.6).
        renewed_by: KindSet => renewed_by plain;
        /// Sets the cancelling strike (R3.2).
        terminate_after: u32 => terminate_after plain;
        /// Sets the grace period between cancel and kill (R3.5).
        grace_period: Duration => grace_period plain;
        /// Sets or disables (`None`) outbound heartbeats (R3.7).
        heartbeat_interval: Option<Duration> => heartbeat_interval plain;
        /// Sets the `long_running` threshold (R3.6).
        long_running_after: Duration => long_running_after some;
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
        const MS: Duration = Duration::from_millis(1);
        const SEC: Duration = Duration::from_secs(1);
        const HOUR: Duration = Duration::from_secs(3600);
        const MONTH: Duration = Duration::from_secs(30 * 86_400);
        const YEAR: Duration = Duration::from_secs(365 * 86_400);
        let silence = [
            ("idle", self.idle),
            ("execution", self.execution),
            ("startup", self.startup),
            ("liveness", self.liveness),
            ("long-running-after", self.long_running_after),
        ];
        for (key, v) in silence {
            check(key, v, MS, MONTH, "1ms..=30days")?;
        }
        for (key, v) in [
            ("deadline", self.deadline),
            ("max-deadline", self.max_deadline),
        ] {
            check(key, v, MS, YEAR, "1ms..=365days")?;
        }
        check(
            "grace-period",
            Some(self.grace_period),
            Duration::ZERO,
            HOUR,
            "0s..=1h",
        )?;
        check(
            "heartbeat-interval",
            self.heartbeat_interval,
            SEC,
            HOUR,
            "\"off\" or 1s..=1h",
        )?;
        if self.terminate_after > 1000 {
            return Err(ProfileError {
                key: "terminate-after",
                found: self.terminate_after.to_string(),
                expected: "0..=1000 (0 means never cancel)",
            });
        }
        if let (Some(d), Some(m)) = (self.deadline, self.max_deadline) {
            if d > m {
                return Err(ProfileError {
                    key: "deadline",
                    found: humantime::format_duration(d).to_string(),
                    expected: "at most max-deadline",
                });
            }
        }
        Ok(())
    }
}

fn check(
    key: &'static str,
    v: Option<Duration>,
    lo: Duration,
    hi: Duration,
    expected: &'static str,
) -> Result<(), ProfileError> {
    match v {
        Some(d) if d < lo || d > hi => Err(ProfileError {
            key,
            found: humantime::format_duration(d).to_string(),
            expected,
        }),
        _ => Ok(()),
    }
}

/// A profile value outside its allowed range.
///
/// # Examples
///
/// ```
/// use watchdog_core::Profile;
///
/// let err = Profile::default().terminate_after(5000).validate().unwrap_err();
/// assert_eq!(err.to_string(), "terminate-after is 5000, expected 0..=1000 (0 means never cancel)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key} is {found}, expected {expected}")]
pub struct ProfileError {
    /// The kebab-case key, as written in a config.
    pub key: &'static str,
    /// The refused value, as a person would write it.
    pub found: String,
    /// The allowed range.
    pub expected: &'static str,
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
}
