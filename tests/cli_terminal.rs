//! R8.4: the live status line, on a real pseudo-terminal (util-linux
//! `script` allocates one), and its absence when stderr is not a terminal.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::wait::child_within;

/// What a terminal shows for `screen`, row by row (trailing blanks cut):
/// enough of a VT100 for the status line's sequences (save and restore
/// the cursor, insert mode, delete characters, cursor left and right,
/// erase in line). Other escape sequences are skipped.
fn render(screen: &str) -> Vec<String> {
    let chars: Vec<char> = screen.chars().collect();
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut r, mut c) = (0usize, 0usize);
    let mut saved = (0usize, 0usize);
    let mut insert = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\r' => c = 0,
            '\n' => {
                r += 1;
                if rows.len() <= r {
                    rows.push(Vec::new());
                }
            }
            '\x08' => c = c.saturating_sub(1),
            '\x1b' => match chars.get(i + 1) {
                Some('7') => {
                    saved = (r, c);
                    i += 1;
                }
                Some('8') => {
                    (r, c) = saved;
                    i += 1;
                }
                Some('[') => {
                    let mut j = i + 2;
                    let mut params = String::new();
                    while j < chars.len() && !('\x40'..='\x7e').contains(&chars[j]) {
                        params.push(chars[j]);
                        j += 1;
                    }
                    let n = params.parse::<usize>().unwrap_or(1).max(1);
                    let row = &mut rows[r];
                    match (chars.get(j).copied().unwrap_or('?'), params.as_str()) {
                        ('h', "4") => insert = true,
                        ('l', "4") => insert = false,
                        ('C', _) => c += n,
                        ('D', _) => c = c.saturating_sub(n),
                        ('P', _) if c < row.len() => {
                            row.drain(c..(c + n).min(row.len()));
                        }
                        ('K', "2") => row.clear(),
                        ('K', "") => row.truncate(c),
                        _ => {}
                    }
                    i = j;
                }
                _ => i += 1,
            },
            ch if ch < ' ' => {}
            ch => {
                let row = &mut rows[r];
                while row.len() < c {
                    row.push(' ');
                }
                if insert {
                    row.insert(c, ch);
                } else if c < row.len() {
                    row[c] = ch;
                } else {
                    row.push(ch);
                }
                c += 1;
            }
        }
        i += 1;
    }
    rows.into_iter()
        .map(|row| row.into_iter().collect::<String>().trim_end().to_owned())
        .collect()
}

/// Runs `args` under `script`, so stallwarden's stdout and stderr are a
/// terminal; returns everything the terminal showed.
fn on_a_terminal(args: &str) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_stallwarden"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        child_within(&mut child, Duration::from_secs(30)).is_some(),
        "did not exit"
    );
    let out = child.wait_with_output().unwrap();
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

// R8.4: on a terminal, a one-line status (elapsed, silence, last output,
// strikes) is redrawn while the command is silent, and the command's own
// lines arrive whole, never with the status mixed in.
#[test]
fn status_line_is_drawn_on_a_terminal_and_never_mixed_into_output() {
    let Some(screen) =
        on_a_terminal("run --idle 20s -- sh -c 'echo first; sleep 2.5; echo second'")
    else {
        return;
    };
    assert!(
        screen.contains("elapsed | silent") && screen.contains("| strikes 0/1"),
        "no status line on the terminal: {screen:?}"
    );
    // The status line is erased before the command writes: on the
    // screen, each of the command's lines stands alone.
    let lines = render(&screen);
    for word in ["first", "second"] {
        assert!(
            lines.iter().any(|l| l == word),
            "`{word}` is not a line of its own: {lines:?}"
        );
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("second") && l.contains("elapsed")),
        "status mixed into the command's line: {lines:?}"
    );
}

// R8.4: never when stderr is not a terminal.
#[test]
fn no_status_line_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stallwarden"))
        .args([
            "run",
            "--idle",
            "20s",
            "--",
            "sh",
            "-c",
            "sleep 2.5; echo done",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"done\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("elapsed"), "status line on a pipe: {err:?}");
    assert!(!err.contains('\x1b'), "escape codes on a pipe: {err:?}");
}

/// Runs `stallwarden args` under `script` (a real pty that is the
/// controlling terminal of a new session, stallwarden in its foreground
/// group), typing `input` once the terminal shows `ready`; returns the
/// exit status and everything the terminal showed.
fn interactive(args: &str, input: &[u8]) -> Option<(Option<i32>, String)> {
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_stallwarden"));
    on_a_pty(&cmd, &[("ready", input, Duration::ZERO)])
}

/// Runs `cmd` under `script` on a real pty that is the controlling
/// terminal of a new session. Each step waits until the screen shows its
/// text (after the previous step's), waits its pause, then types its keys.
/// Returns the exit status and everything the terminal showed.
fn on_a_pty(cmd: &str, steps: &[(&str, &[u8], Duration)]) -> Option<(Option<i32>, String)> {
    use std::io::{Read, Write};
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut script = Command::new("script");
    // Ctrl-C must reach the command even when the suite runs as a shell's
    // background job (INT and QUIT ignored there, and kept so, R8.9).
    common::with_default_signals(&mut script);
    let mut child = script
        .args(["-qec", cmd, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut screen = Vec::new();
    let mut next = 0;
    let mut seen_from = 0;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stuck at step {next}: {}",
            String::from_utf8_lossy(&screen)
        );
        if let Ok(bytes) = rx.recv_timeout(Duration::from_millis(50)) {
            screen.extend(bytes);
        }
        if let Some((wait_for, keys, pause)) = steps.get(next) {
            let text = String::from_utf8_lossy(&screen[seen_from..]).into_owned();
            if let Some(at) = text.find(wait_for) {
                // A real process's pace (a stop that must outlast a
                // budget), reading the screen all along.
                let resume = Instant::now() + *pause;
                while let Some(left) = resume.checked_duration_since(Instant::now()) {
                    if let Ok(bytes) = rx.recv_timeout(left) {
                        screen.extend(bytes);
                    }
                }
                stdin.write_all(keys).unwrap();
                stdin.flush().unwrap();
                seen_from += at + wait_for.len();
                next += 1;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            while let Ok(bytes) = rx.recv_timeout(Duration::from_millis(200)) {
                screen.extend(bytes);
            }
            drop(stdin);
            return Some((status.code(), String::from_utf8_lossy(&screen).into_owned()));
        }
    }
}

/// The pid the command printed as `pid=N`.
fn printed_pid(screen: &str) -> u32 {
    let at = screen.find("pid=").expect("no pid printed") + 4;
    screen[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

// R8.1 (the terminal): an interactive command owns the terminal while it
// runs, so it reads what is typed there, as if run directly (without the
// hand-over its read from a background group would stop it with SIGTTIN).
#[test]
fn interactive_command_reads_the_terminal() {
    let Some((code, screen)) = interactive(
        "run --idle 20s -- sh -c 'echo ready; read x; echo \"got:$x\"'",
        b"hello\n",
    ) else {
        return;
    };
    assert!(screen.contains("got:hello"), "no round-trip: {screen:?}");
    assert_eq!(code, Some(0), "{screen:?}");
}

// R8.1/R8.2: Ctrl-C on the terminal ends a command blocked reading it;
// the run ends with the command's status (130 = 128 + SIGINT), and the
// command is gone.
#[test]
fn ctrl_c_ends_a_command_blocked_reading_the_terminal() {
    let Some((code, screen)) = interactive(
        "run --idle 20s -- sh -c 'echo pid=$$ ready; read x; echo never'",
        b"\x03",
    ) else {
        return;
    };
    assert!(
        !screen.contains("never"),
        "the read was not interrupted: {screen:?}"
    );
    assert_eq!(code, Some(130), "{screen:?}");
    let pid = printed_pid(&screen);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}

/// Under an interactive `bash` on a pty (job control on, as in a user's
/// terminal), starts `stallwarden run ARGS`, presses Ctrl-Z once the command
/// prints `ready`, holds it 2.5 s, types `fg`, then takes the `then` steps;
/// returns everything the terminal showed. Quotes that split the markers in
/// ARGS keep the terminal's echo of the command line from showing them.
fn ctrl_z_held_then_fg(args: &str, then: &[(&str, &[u8], Duration)]) -> Option<String> {
    let cmd = format!("{} run {args}\n", env!("CARGO_BIN_EXE_stallwarden"));
    let mut steps: Vec<(&str, &[u8], Duration)> = vec![
        ("bash", cmd.as_bytes(), Duration::from_millis(200)),
        ("ready", b"\x1a", Duration::from_millis(300)),
        ("Stopped", b"fg\n", Duration::from_millis(2500)),
    ];
    steps.extend_from_slice(then);
    on_a_pty("bash --norc --noprofile -i", &steps).map(|(_, screen)| screen)
}

// R2.8 / R8.1: Ctrl-Z stops the command and stallwarden with it (the shell
// shows the job stopped) and pauses every budget; held longer than `idle`,
// then `fg`: the command goes on and no stall is judged.
#[test]
fn ctrl_z_longer_than_idle_then_fg_resumes_without_a_stall() {
    let Some(screen) = ctrl_z_held_then_fg(
        "--idle 1s -- sh -c 'echo p\"\"id=$$ rea\"\"dy; sleep 2; echo done-\"\"ok'",
        &[
            ("done-ok", b"echo r\"\"c=$?\n", Duration::ZERO),
            ("rc=", b"exit\n", Duration::ZERO),
        ],
    ) else {
        return;
    };
    assert!(
        screen.contains("done-ok"),
        "the command did not go on: {screen:?}"
    );
    assert!(screen.contains("rc=0"), "{screen:?}");
    assert!(!screen.contains("budget"), "a stall was judged: {screen:?}");
    let pid = printed_pid(&screen);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}

// R8.1: a command stopped from outside while stallwarden has no terminal is
// said on stderr, not left silently; its budgets keep running, so the stop
// ends as a stall (124), and the cancel's SIGCONT lets SIGTERM end it.
#[test]
fn a_command_stopped_without_a_terminal_is_reported_and_still_judged() {
    let out = Command::new(env!("CARGO_BIN_EXE_stallwarden"))
        .args(["run", "--idle", "1s", "--grace", "2s", "--", "sh", "-c"])
        .arg("echo pid=$$; kill -STOP $$; echo after")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stderr.contains("stopped by SIGSTOP"), "{stderr}");
    assert!(stderr.contains("idle budget"), "{stderr}");
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    let pid = printed_pid(&stdout);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}

/// Every live status line on `screen`, as (elapsed, silent) in seconds.
fn status_figures(screen: &str) -> Vec<(f64, f64)> {
    screen
        .match_indices("s elapsed | silent ")
        .filter_map(|(at, m)| {
            let elapsed = screen[..at].rsplit(' ').next()?.parse().ok()?;
            let rest = &screen[at + m.len()..];
            let silent = rest[..rest.find('s')?].parse().ok()?;
            Some((elapsed, silent))
        })
        .collect()
}

/// The status lines drawn after the command showed `from` and before it
/// showed `to` (the window in which the command waited; before it, a slow
/// start under load is silence like any other).
fn drawn_between(screen: &str, from: &str, to: &str) -> Vec<(f64, f64)> {
    let start = screen.find(from).expect("start marker not shown") + from.len();
    let end = start + screen[start..].find(to).expect("end marker not shown");
    status_figures(&screen[start..end])
}

// R8.4 with R8.1: while the command waits for the user to type on the
// terminal it holds, no status line is drawn, so none lands in the middle
// of the typed text; the round-trip is intact.
#[test]
fn no_status_line_while_the_command_waits_for_typing() {
    let cmd = format!(
        "{} run --idle 20s -- sh -c 'echo ready; read x; echo \"got:$x\"'",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    // Three redraw periods pass while the command waits in `read`. The
    // answer comes half a period after the third, not on a redraw's tick:
    // between reading the line and writing `got:` the command waits for
    // nothing, and a line drawn (and erased) there is no fault.
    let Some((code, screen)) =
        on_a_pty(&cmd, &[("ready", b"hello\n", Duration::from_millis(3500))])
    else {
        return;
    };
    assert!(screen.contains("got:hello"), "no round-trip: {screen:?}");
    assert_eq!(code, Some(0), "{screen:?}");
    assert!(
        drawn_between(&screen, "ready", "got:").is_empty(),
        "a status line was drawn while the command read the terminal: {screen:?}"
    );
}

// R8.4: the reader may be any thread of the command (here a worker thread
// reads while the main thread waits in `join`); no line while it waits.
#[test]
fn no_status_line_while_a_worker_thread_reads_the_terminal() {
    if !have("python3") {
        return;
    }
    let script = "import sys, threading; print('ready', flush=True); \
                  t = threading.Thread(target=lambda: print('got:' + sys.stdin.readline().strip())); \
                  t.start(); t.join()";
    let cmd = format!(
        "{} run --idle 20s -- python3 -c \"{script}\"",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    let Some((code, screen)) =
        on_a_pty(&cmd, &[("ready", b"hello\n", Duration::from_millis(3500))])
    else {
        return;
    };
    assert!(screen.contains("got:hello"), "no round-trip: {screen:?}");
    assert_eq!(code, Some(0), "{screen:?}");
    assert!(
        drawn_between(&screen, "ready", "got:").is_empty(),
        "a status line was drawn while a thread read the terminal: {screen:?}"
    );
}

// R8.4: a command that puts the terminal in raw mode draws the screen
// itself (an editor, a line-editing REPL): no status line over it.
#[test]
fn no_status_line_over_a_command_in_raw_mode() {
    let Some(screen) = on_a_terminal(
        "run --idle 20s -- sh -c 'stty -icanon; echo raw; sleep 2.5; stty icanon; echo done'",
    ) else {
        return;
    };
    assert!(screen.contains("done"), "{screen:?}");
    assert!(
        drawn_between(&screen, "raw", "done").is_empty(),
        "a status line was drawn in raw mode: {screen:?}"
    );
}

// R2.8 / R8.4: the silence the status line shows leaves out a Ctrl-Z pause,
// as the budgets do; elapsed does not. Held 2.5 s, so elapsed runs ahead of
// silence by at least 2 s (generous: a real shell and process are paced).
#[test]
fn status_line_silence_leaves_out_a_ctrl_z_pause() {
    let Some(screen) = ctrl_z_held_then_fg(
        "--idle 30s -- sh -c 'echo rea\"\"dy; sleep 6; echo done-\"\"ok'",
        &[("done-ok", b"exit\n", Duration::ZERO)],
    ) else {
        return;
    };
    let after_fg = &screen[screen.find("Stopped").expect("no job stop")..];
    let figures = status_figures(after_fg);
    let &(elapsed, silent) = figures
        .last()
        .unwrap_or_else(|| panic!("no status line after fg: {screen:?}"));
    assert!(
        elapsed - silent >= 2.0,
        "the pause counted as silence: elapsed {elapsed}, silent {silent}: {screen:?}"
    );
}

/// Whether `program` runs here; says SKIPPED when it does not.
fn have(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: `{program}` is not installed");
    }
    ok
}

// R8.1, as a user tries it: a REPL under `stallwarden run` reads what is
// typed at its prompt and answers, and exits on `exit()`.
#[test]
fn a_python_repl_works_under_stallwarden() {
    if !have("python3") {
        return;
    }
    let cmd = format!(
        "{} run --idle 20s -- python3 -q -i",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    let Some((code, screen)) = on_a_pty(
        &cmd,
        &[
            (">>> ", b"print(6 * 7)\n", Duration::ZERO),
            ("42", b"exit()\n", Duration::ZERO),
        ],
    ) else {
        return;
    };
    assert!(screen.contains("42"), "the REPL did not answer: {screen:?}");
    assert_eq!(code, Some(0), "{screen:?}");
}

// R8.1: a password prompt (`getpass` opens /dev/tty, turns echo off and
// reads) gets what is typed, and the secret is not shown.
#[test]
fn a_password_prompt_works_under_stallwarden() {
    if !have("python3") {
        return;
    }
    let cmd = format!(
        "{} run --idle 20s -- python3 -c 'import getpass; p = getpass.getpass(\"pass\"\"word: \"); print(\"length\", len(p))'",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    let Some((code, screen)) = on_a_pty(&cmd, &[("password: ", b"s3cr3t\n", Duration::ZERO)])
    else {
        return;
    };
    assert!(screen.contains("length 6"), "no password read: {screen:?}");
    assert!(
        !screen.contains("s3cr3t"),
        "the secret was echoed: {screen:?}"
    );
    assert_eq!(code, Some(0), "{screen:?}");
}

// R8.1: an agent CLI's approval question (Node's readline, the library
// the Node agent CLIs ask with) reads the answer typed at the terminal.
#[test]
fn an_approval_prompt_in_node_works_under_stallwarden() {
    if !have("node") {
        return;
    }
    let script = "const rl = require('readline').createInterface({input: process.stdin, output: process.stdout}); \
                  rl.question('Run rm -rf build? [y/N] ', a => { console.log('answer=' + a); rl.close(); });";
    let cmd = format!(
        "{} run --idle 20s -- node -e \"{script}\"",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    let Some((code, screen)) = on_a_pty(&cmd, &[("[y/N] ", b"y\n", Duration::from_millis(1500))])
    else {
        return;
    };
    assert!(screen.contains("answer=y"), "no answer read: {screen:?}");
    assert!(
        drawn_between(&screen, "[y/N] ", "answer=").is_empty(),
        "a status line was drawn over the question: {screen:?}"
    );
    assert_eq!(code, Some(0), "{screen:?}");
}

// R8.13: a prompt nobody answers is a stall whose line says the command
// waits for input on the terminal (the default, on-input-wait = stall).
#[test]
fn an_unanswered_prompt_stalls_naming_the_terminal_read() {
    let cmd = format!(
        "{} run --idle 2s -- sh -c 'echo as\"\"k; read x; echo g\"\"ot-$x'",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    let Some((code, screen)) = on_a_pty(&cmd, &[("budget", b"", Duration::ZERO)]) else {
        return;
    };
    assert_eq!(code, Some(124), "{screen:?}");
    assert!(
        screen.contains(": waiting for input: reading the terminal /dev/pts/"),
        "{screen:?}"
    );
}

// R8.13, R2.8: with on-input-wait = pause, a prompt held past the idle
// budget is no stall; once answered, the budget runs again and the silence
// after it is judged.
#[test]
fn on_input_wait_pause_holds_a_prompt_then_the_budget_resumes() {
    let cmd = format!(
        "{} run --idle 2s --on-input-wait pause -- sh -c 'echo as\"\"k; read x; echo g\"\"ot-$x; sleep 30'",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    // The answer comes 5 s after the prompt: past the 2 s budget.
    let Some((code, screen)) = on_a_pty(&cmd, &[("ask", b"yes\n", Duration::from_secs(5))]) else {
        return;
    };
    let got = screen.find("got-yes").expect("the answer was read");
    assert!(
        !screen[..got].contains("budget"),
        "a stall while the prompt waited: {screen:?}"
    );
    assert!(
        screen[got..].contains("idle budget 2s exceeded"),
        "the budget did not resume after the answer: {screen:?}"
    );
    assert!(screen[got..].contains("sleeping (nanosleep)"), "{screen:?}");
    assert_eq!(code, Some(124), "{screen:?}");
}

// R8.11 / R8.4: what the user types ahead while the command is busy is
// echoed after the status line; two redraws later, and after the
// command's next output, it is still on the screen (the command's output
// follows it, as without stallwarden), and the status line is gone.
#[test]
fn typeahead_stays_on_screen_through_two_redraws() {
    let cmd = format!(
        "{} run --idle 20s -- sh -c 'echo ready; sleep 5; echo done'",
        env!("CARGO_BIN_EXE_stallwarden")
    );
    // Typed once the first status line is on screen.
    let Some((code, screen)) = on_a_pty(&cmd, &[("elapsed", b"typed-ahead", Duration::ZERO)])
    else {
        return;
    };
    assert_eq!(code, Some(0), "{screen:?}");
    let typed = screen.find("typed-ahead").expect("no echo of the typing");
    assert!(
        status_figures(&screen[typed..]).len() >= 2,
        "fewer than two redraws after the typing: {screen:?}"
    );
    let rows = render(&screen);
    assert!(
        rows.iter().any(|r| r == "typed-aheaddone"),
        "the typed text was erased: {rows:?} from {screen:?}"
    );
    assert!(
        !rows.iter().any(|r| r.contains("elapsed")),
        "a status line was left on screen: {rows:?}"
    );
}

// R8.11 with R2.8 / R8.1: under --pty the command's outputs are a pty of
// stallwarden's, but its group still takes the user's terminal: Ctrl-Z
// stops it and stallwarden, `fg` resumes both, and the pause is no stall.
#[test]
fn ctrl_z_then_fg_works_with_pty() {
    let Some(screen) = ctrl_z_held_then_fg(
        "--pty --idle 1s -- sh -c 'echo p\"\"id=$$ rea\"\"dy; [ -t 1 ] && echo on-a-\"\"tty; sleep 2; echo done-\"\"ok'",
        &[
            ("done-ok", b"echo r\"\"c=$?\n", Duration::ZERO),
            ("rc=", b"exit\n", Duration::ZERO),
        ],
    ) else {
        return;
    };
    assert!(
        screen.contains("on-a-tty"),
        "stdout is not a pty: {screen:?}"
    );
    assert!(
        screen.contains("done-ok"),
        "the command did not go on: {screen:?}"
    );
    assert!(screen.contains("rc=0"), "{screen:?}");
    assert!(!screen.contains("budget"), "a stall was judged: {screen:?}");
    let pid = printed_pid(&screen);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}
