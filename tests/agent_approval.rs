//! `on-input-wait = "pause"` inside a real agent CLI (R8.13, R2.8, issue
//! 27 part 4): Claude Code, interactive (its TUI, not `-p`), under
//! `stallwarden run --pty` on a real terminal, against the mock model of
//! tests/agent_mock.py on loopback.
//!
//! - An approval prompt (the model asks for `touch approved`, which the
//!   CLI's default permission mode puts to the user) is held past the idle
//!   budget with no stall, `describe` saying the task waits for input; once
//!   answered, the command runs, the budgets resume, and when the model's
//!   next stream goes silent the stall comes at the idle budget.
//! - A model stream that goes silent before any prompt is no input wait,
//!   though the CLI's event loop keeps the terminal among its `epoll`
//!   targets all along: the stall comes at the idle budget.
//!
//! Claude Code runs with a fresh `HOME` whose settings skip onboarding, the
//! folder-trust and API-key questions, ask before running commands
//! (`defaultMode = default`), and animate nothing (`prefersReducedMotion`,
//! `CLAUDE_CODE_DISABLE_TERMINAL_TITLE`), so a silent model makes a silent
//! screen. Skipped (with `SKIPPED` and the reason) only when the CLI or
//! `python3` is absent; `.ci/run` installs both. Real processes: real
//! waits, bounded (90 s a run) and polled on the process's pidfd.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::agents::{cli_bin, Mock};
use common::wait::until;

/// Generous bound for one run of the CLI (a few seconds, or about 20 s
/// with the held prompt, on a loaded machine).
const BOUND: Duration = Duration::from_secs(90);

/// The idle budget. Between the CLI's banner and its prompt, the model is
/// a mock on loopback: far less than this even on 2 loaded cores.
const IDLE: &str = "5s";
const IDLE_MS: u64 = 5_000;

/// The step `describe` shows while the budgets are paused for input.
const PAUSED: &str = "waiting for input on the terminal (on-input-wait = pause)";

/// One CLI run at a time: two starting at once on 2 shared cores could
/// stretch the silence before the prompt toward the budget.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `stallwarden run` on a real terminal: a pty whose slave is its stdin,
/// stdout and stderr and its controlling terminal, stallwarden the leader
/// of the pty's session and so its foreground group, as in a user's
/// terminal. Everything the terminal shows is kept.
struct OnTerminal {
    child: Child,
    master: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl OnTerminal {
    fn spawn(mut cmd: Command) -> OnTerminal {
        let (mut master, mut slave) = (-1, -1);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: the pointers are to live locals; a null name and termios
        // are allowed.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: openpty returned two fresh descriptors that we now own.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are plain system calls, safe between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // Our copies of the slave are closed now (moved into the Command,
        // dropped with it at the end of the call that built it).
        drop(cmd);
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, shown) = (master.try_clone().unwrap(), Arc::clone(&screen));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the last holder of the slave has closed it.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                shown.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        OnTerminal {
            child,
            master,
            screen,
        }
    }

    /// Types `keys` on the terminal.
    fn type_keys(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
    }

    /// What the terminal showed, escape sequences left out.
    fn screen(&self) -> String {
        plain(&String::from_utf8_lossy(&self.screen.lock().unwrap()))
    }

    /// Waits for stallwarden's exit within [`BOUND`]; its status code.
    fn wait(&mut self) -> Option<i32> {
        let pid = self.child.id();
        let done = until(pid, BOUND, Duration::from_secs(1), || {
            self.child.try_wait().unwrap()
        });
        // Past the bound, dropping `self` stops the run.
        let Some(status) = done else {
            panic!(
                "stallwarden did not end within {BOUND:?}: {}",
                self.screen()
            );
        };
        status.code()
    }
}

impl Drop for OnTerminal {
    fn drop(&mut self) {
        // A failing test leaves nothing: SIGTERM makes stallwarden stop the
        // command's group (R8.2) before it ends; SIGKILL if it does not.
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: kill(2) on our own unreaped child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            if !common::wait::exits_within(self.child.id(), Duration::from_secs(20)) {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// `text` without CSI and OSC escape sequences.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A scratch directory: Claude Code's `HOME` (`home/`), its working
/// directory (`work/`), the control socket and the events file.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(dir.path().join("home/.claude")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        // Onboarding done, this folder trusted, the dummy API key accepted.
        let state = serde_json::json!({
            "hasCompletedOnboarding": true,
            "theme": "dark",
            "customApiKeyResponses": {"approved": ["dummy"], "rejected": []},
            "projects": {work.to_str().unwrap(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true
            }}
        });
        std::fs::write(dir.path().join("home/.claude.json"), state.to_string()).unwrap();
        // Ask before running a command; no animation.
        std::fs::write(
            dir.path().join("home/.claude/settings.json"),
            r#"{"permissions":{"defaultMode":"default"},"prefersReducedMotion":true}"#,
        )
        .unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `stallwarden run --pty --on-input-wait pause --idle IDLE` around an
/// interactive `claude "run it"` against `mock`.
fn claude_under_stallwarden(bin: &Path, mock: &Mock, s: &Scratch) -> OnTerminal {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallwarden"));
    c.current_dir(s.path("work"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", s.path("home"))
        .env("TERM", "xterm-256color")
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "1")
        .env("NO_COLOR", "1")
        .args(["run", "--pty", "--on-input-wait", "pause", "--idle", IDLE])
        .args(["--startup", "60s", "--socket"])
        .arg(s.path("sg.sock"))
        .arg("--events")
        .arg(s.path("events.jsonl"))
        .arg("--")
        .arg(bin)
        .arg("run it");
    OnTerminal::spawn(c)
}

/// The task as `describe --json` shows it now, if stallwarden answers.
fn describe(s: &Scratch) -> Option<serde_json::Value> {
    let out = common::stallwarden(&s.path("work"))
        .args(["describe", "--json", "--socket"])
        .arg(s.path("sg.sock"))
        .output()
        .unwrap();
    match serde_json::from_slice(&out.stdout) {
        Ok(serde_json::Value::Array(mut tasks)) if !tasks.is_empty() => Some(tasks.remove(0)),
        _ => None,
    }
}

/// The task's last step, as `describe` shows it ("" without one).
fn step(t: &serde_json::Value) -> &str {
    t["last_step"].as_str().unwrap_or("")
}

/// How long the task has been silent, from `describe`.
fn silence(t: &serde_json::Value) -> Duration {
    Duration::from_millis(t["last_output_age_ms"].as_u64().unwrap_or(0))
}

/// Skips (prints why, passes) when Claude Code cannot run here.
macro_rules! claude_or_skip {
    () => {
        match cli_bin("claude") {
            Ok(p) => p,
            Err(why) => {
                println!("SKIPPED: {why}");
                return;
            }
        }
    };
}

// R8.13, R2.8: Claude Code's approval prompt is held past the idle budget
// with no stall while `describe` says it waits for input; the answer runs
// the command and resumes the budgets, and the model's next stream, silent,
// is stopped at the idle budget.
#[test]
fn claude_code_approval_prompt_pauses_the_budgets_until_answered() {
    let bin = claude_or_skip!();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("approve");
    let s = Scratch::new();
    let mut term = claude_under_stallwarden(&bin, &mock, &s);
    let pid = term.child.id();
    let every = Duration::from_millis(200);

    // The prompt, and the pause.
    let paused = until(pid, BOUND, every, || {
        describe(&s).filter(|t| step(t) == PAUSED && term.screen().contains("proceed?"))
    });
    let paused = paused.unwrap_or_else(|| panic!("never paused at the prompt: {}", term.screen()));
    assert_eq!(paused["state"], "working", "{paused}");
    assert!(mock.log().contains(" tool "), "{}", mock.log());

    // Held: silent for the idle budget and 3 s more, still paused, no stall.
    let held = Duration::from_millis(IDLE_MS + 3_000);
    let past = until(pid, BOUND, every, || {
        let t = describe(&s)?;
        assert_eq!(step(&t), PAUSED, "the pause ended unanswered: {t}");
        (silence(&t) > held).then_some(t)
    });
    let past = past.unwrap_or_else(|| panic!("the prompt was not held: {}", term.screen()));
    assert!(!term.screen().contains("budget"), "{}", term.screen());
    assert!(!Path::new(&s.path("work/approved")).exists());

    // The answer: "1. Yes" is selected; Enter takes it.
    term.type_keys(b"\r");
    let resumed = until(pid, BOUND, every, || {
        describe(&s).filter(|t| step(t) == "input read; budgets resumed")
    });
    assert!(
        resumed.is_some(),
        "the budgets never resumed: {}",
        term.screen()
    );
    let code = term.wait();
    let screen = term.screen();
    assert!(
        s.path("work/approved").exists(),
        "the answer did not reach the CLI: {screen}"
    );
    assert!(
        mock.log().contains(" hang "),
        "the tool's result was never sent: {}",
        mock.log()
    );
    assert_eq!(code, Some(124), "{screen}");
    assert!(
        screen.contains(&format!("stallwarden: idle budget {IDLE} exceeded")),
        "{screen}"
    );
    // The stall came from the silence after the answer, not the one held.
    let events = common::events(&s.path("events.jsonl"));
    let stalled = events
        .iter()
        .find(|e| e["type"] == "stalled")
        .unwrap_or_else(|| panic!("no stalled event: {events:?}"));
    assert_eq!(stalled["budget"], "idle", "{stalled}");
    assert!(silence(&past) > held, "{past}");
}

// R8.13, R2.8: a model stream that goes silent, in the same TUI whose event
// loop keeps the terminal among its epoll targets, is no wait for input:
// the budgets never pause and the stall comes at the idle budget.
#[test]
fn claude_code_silent_model_stream_is_no_input_wait() {
    let bin = claude_or_skip!();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mock = Mock::start("hang");
    let s = Scratch::new();
    let mut term = claude_under_stallwarden(&bin, &mock, &s);
    let pid = term.child.id();
    let every = Duration::from_millis(200);

    // From the moment the stream is open, every look until the stall finds
    // the budgets running.
    let streaming = until(pid, BOUND, every, || {
        mock.log().contains(" hang ").then_some(())
    });
    assert!(
        streaming.is_some(),
        "the model was never asked: {}",
        term.screen()
    );
    let mut looks = 0;
    let _ = until(pid, BOUND, every, || {
        let t = describe(&s)?;
        assert_ne!(step(&t), PAUSED, "paused on a silent stream: {t}");
        looks += 1;
        None::<()>
    });
    let code = term.wait();
    let screen = term.screen();
    assert!(
        looks >= 5,
        "too few looks while streaming ({looks}): {screen}"
    );
    assert_eq!(code, Some(124), "{screen}");
    assert!(
        screen.contains(&format!("stallwarden: idle budget {IDLE} exceeded")),
        "{screen}"
    );
    // R8.13: the stall names the model's stream that Claude Code's HTTP
    // thread waits on, not the terminal its main thread polls.
    let flat = screen.replace(['\r', '\n'], "");
    assert!(
        flat.contains(&format!("-> 127.0.0.1:{} ESTABLISHED", mock.port))
            && flat.contains("(thread "),
        "{screen}"
    );
}
