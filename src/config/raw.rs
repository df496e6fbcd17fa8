//! The config file as written: one optional, spanned field per budget, so a
//! range error found after merging can still point at the line that set it.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use watchdog_core::Profile;

use super::elements::{RenewedBy, Span, StreamKey, Strikes, Switch};
use super::{OnInputWait, OnLeftover, RunOptions};

/// The top-level tables a config file may hold.
pub(crate) const TOP_KEYS: &[&str] = &["defaults", "profile"];

/// Every key a profile table may hold, in the order `check` prints them.
pub(crate) const PROFILE_KEYS: &[&str] = &[
    "idle",
    "execution",
    "startup",
    "deadline",
    "max-deadline",
    "liveness",
    "renewed-by",
    "terminate-after",
    "grace-period",
    "heartbeat-interval",
    "long-running-after",
    "notify-only",
    "stream",
    "leak-timeout",
    "on-leftover",
    "on-input-wait",
    "pty",
];

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
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) struct RawProfile {
    idle: Option<Spanned<Switch>>,
    execution: Option<Spanned<Switch>>,
    startup: Option<Spanned<Switch>>,
    deadline: Option<Spanned<Switch>>,
    max_deadline: Option<Spanned<Switch>>,
    liveness: Option<Spanned<Switch>>,
    renewed_by: Option<Spanned<RenewedBy>>,
    terminate_after: Option<Spanned<Strikes>>,
    grace_period: Option<Spanned<Span>>,
    heartbeat_interval: Option<Spanned<Switch>>,
    long_running_after: Option<Spanned<Switch>>,
    notify_only: Option<Spanned<bool>>,
    stream: Option<Spanned<StreamKey>>,
    leak_timeout: Option<Spanned<Span>>,
    on_leftover: Option<Spanned<OnLeftover>>,
    on_input_wait: Option<Spanned<OnInputWait>>,
    pty: Option<Spanned<bool>>,
}

impl RawProfile {
    /// Overrides `p` with every key this table sets.
    pub(crate) fn apply(&self, p: &mut Profile) {
        fn set<T: Copy, U>(field: &mut U, v: &Option<Spanned<T>>, f: impl Fn(T) -> U) {
            if let Some(v) = v {
                *field = f(*v.get_ref());
            }
        }
        set(&mut p.idle, &self.idle, |s| s.0);
        set(&mut p.execution, &self.execution, |s| s.0);
        set(&mut p.startup, &self.startup, |s| s.0);
        set(&mut p.deadline, &self.deadline, |s| s.0);
        set(&mut p.max_deadline, &self.max_deadline, |s| s.0);
        set(&mut p.liveness, &self.liveness, |s| s.0);
        set(&mut p.renewed_by, &self.renewed_by, |r| r.0);
        set(&mut p.terminate_after, &self.terminate_after, |s| s.0);
        set(&mut p.grace_period, &self.grace_period, |s| s.0);
        // R3.7: a zero heartbeat interval disables heartbeats, like "off".
        set(&mut p.heartbeat_interval, &self.heartbeat_interval, |s| {
            s.0.filter(|d| !d.is_zero())
        });
        set(&mut p.long_running_after, &self.long_running_after, |s| s.0);
        set(&mut p.notify_only, &self.notify_only, |b| b);
    }

    /// Returns the `stream` this table sets: `None` if absent,
    /// `Some(None)` for `"none"` (R5.10).
    pub(crate) fn stream(&self) -> Option<Option<stallguard_sources::agent::Format>> {
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
    }

    /// Returns where this table sets `key` (kebab-case), if it does.
    pub(crate) fn span_of(&self, key: &str) -> Option<Range<usize>> {
        fn sp<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
            v.as_ref().map(Spanned::span)
        }
        match key {
            "idle" => sp(&self.idle),
            "execution" => sp(&self.execution),
            "startup" => sp(&self.startup),
            "deadline" => sp(&self.deadline),
            "max-deadline" => sp(&self.max_deadline),
            "liveness" => sp(&self.liveness),
            "renewed-by" => sp(&self.renewed_by),
            "terminate-after" => sp(&self.terminate_after),
            "grace-period" => sp(&self.grace_period),
            "heartbeat-interval" => sp(&self.heartbeat_interval),
            "long-running-after" => sp(&self.long_running_after),
            "notify-only" => sp(&self.notify_only),
            "stream" => sp(&self.stream),
            "leak-timeout" => sp(&self.leak_timeout),
            "on-leftover" => sp(&self.on_leftover),
            "on-input-wait" => sp(&self.on_input_wait),
            "pty" => sp(&self.pty),
            _ => None,
        }
    }
}
