//! The command line (SPEC §8), declared with clap's derive: the doc comments
//! here are the `--help` text, so they are written for a newcomer.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use stallwarden::{OptionSpec, Setting};

/// Runs a command under a watchdog that tells a silent-but-working job from
/// a dead one.
#[derive(Debug, Parser)]
#[command(name = "stallwarden", version, about, long_about = None)]
#[command(after_help = "\
Examples:
  stallwarden run --idle 3s -- sh -c 'echo working; sleep 30'
  stallwarden run -p ci --deadline 2h --events events.jsonl -- cargo test
  stallwarden check stallwarden.toml
  stallwarden list --socket /tmp/sg.sock

Exit status of `run`: the command's own; 124 when stallwarden stopped it;
125 for stallwarden's own errors; 126 command not executable; 127 command
not found; 128+N when the command died of signal N.")]
pub(crate) struct Cli {
    /// More of stallwarden's own diagnostics on stderr: -v for what sources
    /// and sinks count or refuse (debug), -vv for trace. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run CMD in its own process group and stop it when it goes silent.
    #[command(after_help = "\
Examples:
  stallwarden run --idle 3s -- sh -c 'echo working; sleep 30'
      stopped after 3 s of silence, exit 124
  stallwarden run --idle 10m --deadline 2h --terminate-after 2 -- make test
      two strikes of 10 min silence (or 2 h in total) before it is stopped
  stallwarden run --terminate-after 0 --events - -- ./long-job
      never stop it: only report stalls, as JSON lines on stderr

Silence: the command's stdout and stderr (passed through byte for byte) are
its progress. A program can also send sd_notify datagrams to $NOTIFY_SOCKET:
WATCHDOG=1 (a heartbeat; it renews only if `renewed-by` lists heartbeat),
WATCHDOG=trigger, EXTEND_TIMEOUT_USEC=, STATUS=, READY=1.

Escalation: at the stall that reaches --terminate-after, SIGTERM goes to the
command's process group; after --grace, SIGKILL.

Durations: \"90s\", \"5m\", \"1h 30m\", \"500ms\", at most 100 years; \"off\"
disables a budget.")]
    Run(Box<RunArgs>),
    /// Validate a config file and print each profile's effective budgets.
    #[command(after_help = "\
Without FILE, checks ./stallwarden.toml if present, else prints the built-in
defaults. Exit status: 0 when valid, 125 otherwise.")]
    Check {
        /// The config file to check.
        file: Option<PathBuf>,
    },
    /// List the tasks a running `stallwarden run --socket PATH` watches.
    List(ControlArgs),
    /// Describe one task (or all) of a running `stallwarden run --socket PATH`.
    Describe {
        /// The task's name; every task when left out.
        task: Option<String>,
        #[command(flatten)]
        control: ControlArgs,
    },
}

/// Options of `stallwarden run`.
#[derive(Clone, Debug, Args)]
pub(crate) struct RunArgs {
    /// Config file [default: ./stallwarden.toml if present, else built-in defaults].
    #[arg(short, long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Profile to use: a [profile.NAME] table of the config [default: [defaults]].
    #[arg(short, long, value_name = "NAME")]
    pub(crate) profile: Option<String>,

    /// Longest silence allowed (no output, no progress), or "off".
    #[arg(long, value_name = "D", value_parser = OptionFlag("idle"), allow_hyphen_values = true)]
    pub(crate) idle: Option<Setting>,

    /// Longest silence while a tool call is in flight (an agent's own build
    /// or test run), or "off" for the idle budget [default: the config's
    /// `execution`; with --stream and none set anywhere, 30m].
    #[arg(long, value_name = "D", value_parser = OptionFlag("execution"), allow_hyphen_values = true)]
    pub(crate) execution: Option<Setting>,

    /// Longest silence before the first output, or "off" for the idle budget.
    #[arg(long, value_name = "D", value_parser = OptionFlag("startup"), allow_hyphen_values = true)]
    pub(crate) startup: Option<Setting>,

    /// Longest gap between sd_notify WATCHDOG=1 heartbeats once the first
    /// came, or "off".
    #[arg(long, value_name = "D", value_parser = OptionFlag("liveness"), allow_hyphen_values = true)]
    pub(crate) liveness: Option<Setting>,

    /// Total time allowed from the start, never renewed, or "off".
    #[arg(long, value_name = "D", value_parser = OptionFlag("deadline"), allow_hyphen_values = true)]
    pub(crate) deadline: Option<Setting>,

    /// Interval of `heartbeat` events while silent (--events), or "off"/0.
    #[arg(long, value_name = "D", value_parser = OptionFlag("heartbeat-interval"), allow_hyphen_values = true)]
    pub(crate) heartbeat: Option<Setting>,

    /// Stall number that stops the command; 0 only reports stalls.
    #[arg(long, value_name = "N", value_parser = OptionFlag("terminate-after"), allow_hyphen_values = true)]
    pub(crate) terminate_after: Option<Setting>,

    /// Time between SIGTERM and SIGKILL; 0 kills at once.
    #[arg(long, value_name = "D", value_parser = OptionFlag("grace-period"), allow_hyphen_values = true)]
    pub(crate) grace: Option<Setting>,

    /// Write events as JSON lines to PATH ("-" for stderr), appended one
    /// whole line per write, so runs can share a file; a FIFO with no reader
    /// yet does not hold up the start.
    #[arg(long, value_name = "PATH")]
    pub(crate) events: Option<String>,

    /// Serve the control socket at PATH (read it with `stallwarden list`);
    /// at most 107 bytes, the Unix socket limit.
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,

    /// Read stdout as an agent CLI's JSON lines: claude-code, codex, gemini,
    /// qwen, or none. With a format and no execution budget set (flag or
    /// config), --execution defaults to 30m so the agent's tools may work.
    #[arg(long, value_name = "FORMAT", value_parser = super::stream::format)]
    pub(crate) stream: Option<super::stream::StreamFlag>,
    /// After the command exits, how long to wait for processes that still
    /// hold its stdout/stderr before naming them as leaked [default: 1s,
    /// or the config's `leak-timeout`].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) leak_timeout: Option<Duration>,

    /// What to do with processes of the command's tree still running after
    /// it ends: "kill" (SIGTERM, then SIGKILL after --grace) or "keep"
    /// [default: kill, or the config's `on-leftover`]. Either way they are
    /// named.
    #[arg(long, value_name = "WHAT")]
    pub(crate) on_leftover: Option<OnLeftover>,

    /// While the command waits for what the user types on the terminal:
    /// "stall" (the wait is silence like any other) or "pause" (every
    /// budget pauses, as for Ctrl-Z, until it reads) [default: stall, or
    /// the config's `on-input-wait`].
    #[arg(long, value_name = "WHAT")]
    pub(crate) on_input_wait: Option<OnInputWait>,

    /// Give the command a pseudo-terminal as stdout and stderr, so programs
    /// that buffer a pipe (Python, C stdio) write line by line; they may
    /// also add colours or progress bars [default: off, or the config's
    /// `pty`].
    #[arg(long, overrides_with = "no_pty")]
    pub(crate) pty: bool,

    /// A shell command run through /bin/sh -c at each stall, before the
    /// stop, with STALLWARDEN_PID, STALLWARDEN_PGID, STALLWARDEN_SUSPECTS
    /// and STALLWARDEN_STALL in its environment; its output goes into the
    /// `stalled` event, how it ended onto stderr; "" for none [default: the
    /// config's `on-stall`].
    #[arg(long, value_name = "CMD")]
    pub(crate) on_stall: Option<String>,

    /// How long the --on-stall command may run before its process group
    /// is killed [default: 5s, or the config's `on-stall-timeout`].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) on_stall_timeout: Option<Duration>,

    /// Start the command again after a stall (or lost liveness) stopped
    /// it: "on-stall" or "no"; each restart is a `restarted` event, with
    /// fresh budgets and strikes [default: no, or the config's `restart`].
    #[arg(long, value_name = "WHEN")]
    pub(crate) restart: Option<RestartFlag>,

    /// The backoff before the first restart; it doubles before each next
    /// one [default: 1s, or the config's `restart-delay`].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) restart_delay: Option<Duration>,

    /// The longest backoff between restarts [default: 1m, or the config's
    /// `restart-max-delay`].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) restart_max_delay: Option<Duration>,

    /// How many restarts the run may take; once spent, a stall ends the
    /// run with 124 [default: 3, or the config's `max-restarts`].
    #[arg(long, value_name = "N")]
    pub(crate) max_restarts: Option<u32>,

    /// Take no stacks at a stall (by default each suspect's stack is taken
    /// before the stop with py-spy, eu-stack or gdb, where installed)
    /// [default: the config's `stacks`].
    #[arg(long)]
    pub(crate) no_stacks: bool,

    /// Give the command pipes, not a pseudo-terminal, whatever the
    /// config's `pty` says (the last of `--pty` and `--no-pty` wins).
    #[arg(long, overrides_with = "pty")]
    pub(crate) no_pty: bool,

    /// The command to run, and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub(crate) command: Vec<std::ffi::OsString>,
}

/// What `run` does with what is left of the command's tree (R8.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnLeftover {
    /// SIGTERM, then SIGKILL after the grace period.
    #[default]
    Kill,
    /// Leave them running.
    Keep,
}

impl From<OnLeftover> for stallwarden::config::OnLeftover {
    fn from(o: OnLeftover) -> Self {
        match o {
            OnLeftover::Kill => stallwarden::config::OnLeftover::Kill,
            OnLeftover::Keep => stallwarden::config::OnLeftover::Keep,
        }
    }
}

/// Whether `run` restarts a command a stall stopped (R8.15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RestartFlag {
    /// Start it again after a backoff.
    OnStall,
    /// Leave it stopped.
    No,
}

impl From<RestartFlag> for stallwarden::config::Restart {
    fn from(r: RestartFlag) -> Self {
        match r {
            RestartFlag::OnStall => stallwarden::config::Restart::OnStall,
            RestartFlag::No => stallwarden::config::Restart::No,
        }
    }
}

/// What `run` does while the command waits for input (R8.13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnInputWait {
    /// Budgets keep running.
    #[default]
    Stall,
    /// Budgets pause until the command reads.
    Pause,
}

impl From<OnInputWait> for stallwarden::config::OnInputWait {
    fn from(o: OnInputWait) -> Self {
        match o {
            OnInputWait::Stall => stallwarden::config::OnInputWait::Stall,
            OnInputWait::Pause => stallwarden::config::OnInputWait::Pause,
        }
    }
}

/// Options shared by `list` and `describe`.
#[derive(Debug, Args)]
pub(crate) struct ControlArgs {
    /// The control socket of a running `stallwarden run --socket PATH`.
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: PathBuf,

    /// Print JSON, for machines.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The value parser of a flag that sets profile option `.0`: the core's
/// one entry parses and range-checks it, and its error names the flag
/// (R10.6, R7.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OptionFlag(pub(crate) &'static str);

impl clap::builder::TypedValueParser for OptionFlag {
    type Value = Setting;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Setting, clap::Error> {
        let flag = arg
            .and_then(clap::Arg::get_long)
            .map_or_else(|| self.0.to_owned(), |l| format!("--{l}"));
        let fail = |msg: String| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{msg}\n"))
                .with_cmd(cmd)
        };
        let text = value
            .to_str()
            .ok_or_else(|| fail(format!("{flag}: {value:?} is not valid UTF-8")))?;
        let spec = OptionSpec::find(self.0)
            .ok_or_else(|| fail(format!("{flag}: no profile option `{}`", self.0)))?;
        spec.parse(&flag, text.into())
            .map_err(|e| fail(e.to_string()))
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    match stallwarden::config::parse_budget(s)? {
        Some(d) => Ok(d),
        None => Err("this duration cannot be \"off\" (use \"0s\")".into()),
    }
}
