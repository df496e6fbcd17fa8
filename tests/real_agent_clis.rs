//! The real agent CLIs, headless, through `stallwarden run --stream` (R5.10,
//! R5.6, R4.3, R2.2, R8.2), against a scripted model server on loopback
//! (tests/agent_mock.py: the Anthropic Messages and OpenAI Responses
//! streaming APIs, just enough for one turn).
//!
//! The CLIs are the npm packages `.ci/run` installs into
//! `target/agent-clis` (or the directory `STALLWARDEN_AGENT_CLIS` names):
//! `@anthropic-ai/claude-code`, `@openai/codex` and `@google/gemini-cli`
//! (the mock also speaks Gemini's `streamGenerateContent`). A test whose CLI (or
//! `python3`, for the mock) is absent prints `SKIPPED` with the reason and
//! passes. The CLIs run with a fresh `HOME`, a dummy API key, and their
//! telemetry, update checks and other traffic off; the mock answers on
//! 127.0.0.1 only.
//!
//! Budgets: idle 2 s, execution 30 s, startup 30 s (a CLI's own start on a
//! loaded machine is not what is tested). The model's tool call is a silent
//! `sleep 4`: twice the idle budget, far under the execution budget. Real
//! processes are involved, so the waits are real, with a 60 s bound.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

mod common;
use common::agents::Mock;
use common::{events, stallwarden, types};

/// Generous bound for one CLI run of a few seconds.
const BOUND: Duration = Duration::from_secs(60);

/// Waits for `child` within [`BOUND`], reading its pipes all along.
fn wait_bounded(child: Child) -> Output {
    common::wait_within(child, BOUND)
}

/// One CLI at a time: on 2 shared cores, two CLIs starting at once could
/// stretch a gap between their lines toward the 2 s idle budget.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const CONFIG: &str = "[defaults]\nidle = \"2s\"\nexecution = \"30s\"\nstartup = \"30s\"\n";

#[derive(Clone, Copy, PartialEq)]
enum Cli {
    Claude,
    Codex,
    Gemini,
}

impl Cli {
    fn bin(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    fn format(self) -> &'static str {
        match self {
            Cli::Claude => "claude-code",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
        }
    }

    /// The installed CLI, or why the test is skipped.
    fn path(self) -> Result<PathBuf, String> {
        common::agents::cli_bin(self.bin())
    }
}

/// A scratch directory: `stallwarden.toml`, the CLI's `HOME` and its
/// working directory.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stallwarden.toml"), CONFIG).unwrap();
        std::fs::create_dir_all(dir.path().join("home/.codex")).unwrap();
        // Gemini CLI: an API key as the auth method, no folder-trust
        // prompt, no telemetry, usage statistics or update check.
        std::fs::create_dir_all(dir.path().join("home/.gemini")).unwrap();
        std::fs::write(
            dir.path().join("home/.gemini/settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true},"privacy":{"usageStatisticsEnabled":false}}"#,
        )
        .unwrap();
        Scratch { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// `stallwarden` with the CLI's environment, and the CLI's command line
/// (after `--`), headless against `mock`.
struct Agent {
    stallwarden: Command,
    argv: Vec<String>,
}

/// The CLI's command line and environment, headless against `mock`.
fn agent_command(cli: Cli, bin: &Path, mock: &Mock, home: &Path, prompt: &[&str]) -> Agent {
    let mut c = stallwarden(home.parent().unwrap());
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CODEX_HOME", home.join(".codex"))
        .env("NO_COLOR", "1");
    let base = format!("http://127.0.0.1:{}", mock.port);
    match cli {
        Cli::Claude => {
            c.env("ANTHROPIC_BASE_URL", &base)
                .env("ANTHROPIC_API_KEY", "dummy");
        }
        Cli::Codex => {
            c.env("OPENAI_API_KEY", "dummy");
        }
        Cli::Gemini => {
            c.env("GEMINI_API_KEY", "dummy")
                .env("GOOGLE_GEMINI_BASE_URL", &base)
                .env("GEMINI_CLI_NO_RELAUNCH", "1");
        }
    }
    c.arg("run");
    let argv: Vec<String> = match cli {
        Cli::Claude => [bin.to_str().unwrap(), "-p"]
            .into_iter()
            .chain(prompt.iter().copied())
            .chain([
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Bash",
            ])
            .map(str::to_owned)
            .collect(),
        Cli::Codex => {
            let provider = format!(
                "model_providers.mock={{name=\"mock\",base_url=\"{base}/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}}"
            );
            [
                bin.to_str().unwrap(),
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-c",
                "model_provider=mock",
                "-c",
                "model=mock-model",
                "-c",
                &provider,
            ]
            .into_iter()
            .chain(prompt.iter().copied())
            .map(str::to_owned)
            .collect()
        }
        Cli::Gemini => [bin.to_str().unwrap(), "-p"]
            .into_iter()
            .chain(prompt.iter().copied())
            .chain(["--output-format", "stream-json", "--yolo"])
            .map(str::to_owned)
            .collect(),
    };
    Agent {
        stallwarden: c,
        argv,
    }
}

/// Runs the CLI through `stallwarden run STALLWARDEN_ARGS -- CLI ...` to its
/// end, within [`BOUND`].
fn run(agent: Agent, stallwarden_args: &[&str]) -> Output {
    let child = spawn(agent, stallwarden_args);
    wait_bounded(child)
}

fn spawn(agent: Agent, stallwarden_args: &[&str]) -> Child {
    let Agent {
        stallwarden: mut cmd,
        argv,
    } = agent;
    cmd.args(stallwarden_args)
        .arg("--")
        .args(argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Skips (prints why, passes) when the CLI cannot run here.
macro_rules! cli_or_skip {
    ($cli:expr) => {
        match $cli.path() {
            Ok(p) => p,
            Err(why) => {
                println!("SKIPPED: {why}");
                return;
            }
        }
    };
}

/// Every stdout line is one of the CLI's JSON events, passed unchanged.
fn assert_json_lines(out: &Output) {
    let stdout = text(&out.stdout);
    assert!(
        !stdout.is_empty(),
        "no stdout; stderr: {}",
        text(&out.stderr)
    );
    for l in stdout.lines() {
        serde_json::from_str::<serde_json::Value>(l)
            .unwrap_or_else(|e| panic!("stdout line is not the CLI's JSON ({e}): {l}"));
    }
}

/// Done-when 1: a silent 4 s tool under a 2 s idle budget completes with
/// `--stream FORMAT`; the stall line never appears; stdout is the CLI's.
fn silent_tool_completes(cli: Cli) {
    let bin = cli_or_skip!(cli);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("tool");
    let s = Scratch::new();
    let ev = s.path().join("events.jsonl");
    let cmd = agent_command(cli, &bin, &mock, &s.path().join("home"), &["run it"]);
    let out = run(
        cmd,
        &["--stream", cli.format(), "--events", ev.to_str().unwrap()],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    assert!(!err.contains("budget"), "{err}");
    assert_json_lines(&out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("sleep 4"), "{stdout}");
    let t = types(&events(&ev));
    assert!(!t.iter().any(|t| t == "stalled"), "{t:?}");
}

/// Done-when 2: the same run with `--stream none` stalls (exit 124).
fn silent_tool_stalls_without_stream(cli: Cli) {
    let bin = cli_or_skip!(cli);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("tool");
    let s = Scratch::new();
    let cmd = agent_command(cli, &bin, &mock, &s.path().join("home"), &["run it"]);
    let out = run(cmd, &["--stream", "none"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr: {err}");
    assert!(
        err.contains("stallwarden: idle budget 2s exceeded"),
        "{err}"
    );
}

/// Done-when 3: a model that hangs mid-stream is stopped on the idle
/// budget, though `--stream` is on (no tool is in flight).
fn hung_model_is_stopped_on_idle(cli: Cli) {
    let bin = cli_or_skip!(cli);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("hang");
    let s = Scratch::new();
    let cmd = agent_command(cli, &bin, &mock, &s.path().join("home"), &["run it"]);
    let out = run(cmd, &["--stream", cli.format()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr: {err}");
    assert!(
        err.contains("stallwarden: idle budget 2s exceeded"),
        "{err}"
    );
}

#[test]
fn claude_code_silent_tool_completes_under_stream() {
    silent_tool_completes(Cli::Claude);
}

#[test]
fn claude_code_silent_tool_stalls_with_stream_none() {
    silent_tool_stalls_without_stream(Cli::Claude);
}

#[test]
fn claude_code_hung_model_is_stopped_on_idle() {
    hung_model_is_stopped_on_idle(Cli::Claude);
}

#[test]
fn codex_silent_tool_completes_under_stream() {
    silent_tool_completes(Cli::Codex);
}

#[test]
fn codex_silent_tool_stalls_with_stream_none() {
    silent_tool_stalls_without_stream(Cli::Codex);
}

#[test]
fn codex_hung_model_is_stopped_on_idle() {
    hung_model_is_stopped_on_idle(Cli::Codex);
}

#[test]
fn gemini_silent_tool_completes_under_stream() {
    silent_tool_completes(Cli::Gemini);
}

#[test]
fn gemini_silent_tool_stalls_with_stream_none() {
    silent_tool_stalls_without_stream(Cli::Gemini);
}

#[test]
fn gemini_hung_model_is_stopped_on_idle() {
    hung_model_is_stopped_on_idle(Cli::Gemini);
}

/// Done-when 4 (R5.6, R4.3): a Bash call with `run_in_background: true`
/// makes the task `monitoring` (seen through the control socket's
/// `describe`) while the shell runs; `claude -p` then waits 5-6 s in
/// silence for it (held, not a stall) and ends with exit 0.
#[test]
fn claude_code_background_bash_makes_the_task_monitoring() {
    let bin = cli_or_skip!(Cli::Claude);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("background");
    let s = Scratch::new();
    let sock = s.path().join("sg.sock");
    let cmd = agent_command(
        Cli::Claude,
        &bin,
        &mock,
        &s.path().join("home"),
        &["run it"],
    );
    let child = spawn(
        cmd,
        &[
            "--stream",
            "claude-code",
            "--socket",
            sock.to_str().unwrap(),
        ],
    );
    // Looks at the control socket until the task is monitoring, or it
    // finished, or stallwarden is gone.
    let seen = common::wait::until(child.id(), BOUND, Duration::from_millis(100), || {
        let out = stallwarden(s.path())
            .args(["describe", "--json", "--socket"])
            .arg(&sock)
            .output()
            .unwrap();
        let Ok(serde_json::Value::Array(tasks)) = serde_json::from_slice(&out.stdout) else {
            return None;
        };
        if let Some(t) = tasks.iter().find(|t| t["state"] == "monitoring") {
            // The shell runs about 5 s more: `list` and the text of
            // `describe` show it too.
            let list = stallwarden(s.path())
                .args(["list", "--socket"])
                .arg(&sock)
                .output()
                .unwrap();
            let describe = stallwarden(s.path())
                .args(["describe", "--socket"])
                .arg(&sock)
                .output()
                .unwrap();
            return Some(Some((
                t.clone(),
                text(&list.stdout),
                text(&describe.stdout),
            )));
        }
        (!tasks.is_empty() && tasks.iter().all(|t| t["state"] == "finished")).then_some(None)
    })
    .flatten();
    let out = wait_bounded(child);
    let err = text(&out.stderr);
    let (t, list, describe) = seen.unwrap_or_else(|| panic!("never monitoring; stderr: {err}"));
    assert!(list.contains("monitoring"), "{list}");
    assert!(
        describe.contains("(command, launched by toolu_mock_"),
        "{describe}"
    );
    let bg = t["background"].as_array().unwrap();
    assert_eq!(bg.len(), 1, "{t}");
    assert_eq!(bg[0]["kind"], "command", "{t}");
    assert!(bg[0]["launch_id"]
        .as_str()
        .unwrap()
        .starts_with("toolu_mock_"));
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    assert!(!err.contains("budget"), "{err}");
    assert_json_lines(&out);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("\"subtype\":\"task_notification\""),
        "{stdout}"
    );
}

/// Runs a first turn (a session to compact), then `/compact` in it,
/// through `stallwarden run --stream STREAM`; returns the `/compact` run.
fn compact_run(bin: &Path, stream: &str) -> Output {
    let mock = Mock::start("compact");
    let s = Scratch::new();
    let home = s.path().join("home");
    let out = run(
        agent_command(Cli::Claude, bin, &mock, &home, &["say hi"]),
        &["--stream", "claude-code"],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    run(
        agent_command(Cli::Claude, bin, &mock, &home, &["--continue", "/compact"]),
        &["--stream", stream],
    )
}

/// R5.10: Claude Code's `compacting` status holds the execution budget: a
/// `/compact` whose summary request takes 4 s in silence completes under a
/// 2 s idle budget with `--stream claude-code`, and stalls without it.
#[test]
fn claude_code_compaction_holds_the_execution_budget() {
    let bin = cli_or_skip!(Cli::Claude);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = compact_run(&bin, "claude-code");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("\"status\":\"compacting\""), "{stdout}");
    assert!(
        stdout.contains("\"compact_result\":\"success\""),
        "{stdout}"
    );
    let out = compact_run(&bin, "none");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr: {err}");
    assert!(
        err.contains("stallwarden: idle budget 2s exceeded"),
        "{err}"
    );
}
