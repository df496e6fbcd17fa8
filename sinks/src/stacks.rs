//! Stacks at the verdict (R8.14): for the few most likely suspects, the
//! user-space stack, taken before the stop with the tools people already
//! trust: `py-spy dump` for a Python process, `eu-stack` (or `gdb`) for
//! native code. Each is bounded in time and output and all of them run at
//! once, so the whole takes at most one tool's bound. The stall report
//! shows the frames that matter (the innermost frames of the program's own
//! code: function, file and line); the whole stacks go into the `stalled`
//! event. A tool that is absent or refused is said in a word.
//!
//! [`Stacks`] is an [`AtStall`] step: a guard takes it before the `stalled`
//! event reaches any sink, so before the process sink's SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use watchdog_core::sys;
use watchdog_core::{AtStall, ChildInfo, Event, EventKind, ProcState, StallNote, StallReport};

use crate::hook::{run_bounded, Ended};

/// The most suspects whose stack is taken at one stall.
pub const MAX_STACKS: usize = 5;
/// How long one stack tool may run by default; they run at once, so this
/// bounds the whole.
pub const TOOL_BOUND: Duration = Duration::from_secs(3);
/// The most output kept from one stack tool (32 KiB).
pub const STACK_BYTES: usize = 32 * 1024;
/// The frames of the program's own code shown on the stall report.
const SHOWN_FRAMES: usize = 3;

/// Takes the stacks of a stall's suspects (R8.14): at most [`MAX_STACKS`],
/// the most likely first, all at once, each within its bound and
/// [`STACK_BYTES`]; each note's `frames` are the innermost frames of the
/// program's own code.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use stallwarden_sinks::process::ProcessSink;
/// use stallwarden_sinks::stacks::Stacks;
/// use watchdog_core::Guard;
///
/// // Stacks are taken at each stall, before the process sink's SIGTERM.
/// let guard = Guard::builder()
///     .at_stall(Stacks::new(Duration::from_secs(3)))
///     .sink(ProcessSink::new())
///     .build();
/// # drop(guard);
/// ```
#[derive(Clone, Debug)]
pub struct Stacks {
    /// Where tools are looked for (`PATH`).
    path: Option<std::ffi::OsString>,
    bound: Duration,
}

impl Stacks {
    /// Takes stacks with the tools found on `PATH`, each within `bound`.
    pub fn new(bound: Duration) -> Self {
        Stacks {
            path: std::env::var_os("PATH"),
            bound,
        }
    }

    /// One note per suspect (at most [`MAX_STACKS`], the most likely
    /// first), each taken at once on a thread of its own.
    pub fn take(&self, event: &Event, pid: Option<u32>) -> Vec<StallNote> {
        let suspects = suspects(event, pid);
        std::thread::scope(|s| {
            let takers: Vec<_> = suspects
                .iter()
                .map(|(pid, name)| s.spawn(move || self.one(*pid, name)))
                .collect();
            takers
                .into_iter()
                .zip(&suspects)
                .map(|(t, (pid, _))| {
                    t.join()
                        .unwrap_or_else(|_| StallNote::new("stack", Some(*pid), "failed"))
                })
                .collect()
        })
    }

    /// The stack of one process, with the tool its kind calls for.
    fn one(&self, pid: u32, name: &str) -> StallNote {
        if is_python(pid, name) {
            let Some(tool) = self.find("py-spy") else {
                return StallNote::new("py-spy", Some(pid), "py-spy not installed");
            };
            let mut cmd = Command::new(tool);
            cmd.args(["dump", "--full-filenames", "--pid", &pid.to_string()]);
            return self.run("py-spy", pid, cmd, python_frames);
        }
        if let Some(tool) = self.find("eu-stack") {
            let mut cmd = Command::new(tool);
            cmd.args(["-s", "-m", "-p", &pid.to_string()]);
            return self.run("eu-stack", pid, cmd, eu_stack_frames);
        }
        if let Some(tool) = self.find("gdb") {
            let mut cmd = Command::new(tool);
            cmd.args(["-batch", "-nx", "-p", &pid.to_string()])
                .args(["-ex", "thread apply all bt"]);
            return self.run("gdb", pid, cmd, gdb_frames);
        }
        StallNote::new("eu-stack", Some(pid), "eu-stack and gdb not installed")
    }

    fn run(
        &self,
        source: &str,
        pid: u32,
        cmd: Command,
        frames: fn(&str) -> Vec<String>,
    ) -> StallNote {
        let run = run_bounded(cmd, self.bound, STACK_BYTES);
        let status = match &run.ended {
            _ if refused(&run.output) => "refused (ptrace not permitted)".to_owned(),
            Ended::Exited(0) => "ok".to_owned(),
            Ended::TimedOut(after) => {
                format!("timed out after {}", humantime::format_duration(*after))
            }
            other => other.to_string(),
        };
        let mut note = StallNote::new(source, Some(pid), status)
            .output(run.output.clone())
            .truncated(run.truncated);
        note.frames = frames(&run.output);
        note
    }

    /// The executable `tool` on `PATH`, if any.
    fn find(&self, tool: &str) -> Option<PathBuf> {
        std::env::split_paths(self.path.as_ref()?)
            .map(|dir| dir.join(tool))
            .find(|p| is_executable(p))
    }
}

impl AtStall for Stacks {
    fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport {
        StallReport {
            stacks: self.take(event, pid),
            on_stall: None,
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a tool's output says the kernel refused it the process.
fn refused(output: &str) -> bool {
    output.contains("Operation not permitted")
        || output.contains("ptrace: Permission denied")
        || output.contains("Permission Denied")
}

/// The suspects of a stall, the most likely first: processes blocked on
/// something else than their own child (a shell waiting for its command is
/// rarely the culprit), then the rest; never a zombie; at most
/// [`MAX_STACKS`]. Without a look at the tree, the watched process.
fn suspects(event: &Event, pid: Option<u32>) -> Vec<(u32, String)> {
    let children: &[ChildInfo] = match &event.kind {
        EventKind::Stalled {
            children: Some(c), ..
        } => c,
        _ => &[],
    };
    let live = children.iter().filter(|c| c.state != ProcState::Zombie);
    let waits_for_child = |c: &&ChildInfo| {
        c.blocked_on
            .as_deref()
            .is_some_and(|b| b.starts_with("waiting for child"))
    };
    let (parents, leaves): (Vec<&ChildInfo>, Vec<&ChildInfo>) = live.partition(waits_for_child);
    let mut out: Vec<(u32, String)> = leaves
        .into_iter()
        .chain(parents)
        .map(|c| (c.pid, c.name.clone()))
        .take(MAX_STACKS)
        .collect();
    if out.is_empty() {
        if let Some(pid) = pid {
            let name = sys::comm(sys::proc_root(), pid).unwrap_or_default();
            out.push((pid, name.trim().to_owned()));
        }
    }
    out
}

/// Whether `pid` runs a Python interpreter: its name or its executable's.
fn is_python(pid: u32, name: &str) -> bool {
    let exe = sys::exe(sys::proc_root(), pid);
    let exe_name = exe
        .as_ref()
        .and_then(|e| e.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("python") || exe_name.starts_with("python")
}

/// Whether a Python file is the program's own (not the standard library,
/// not an installed package).
fn own_python_file(file: &str) -> bool {
    !(file.contains("/lib/python")
        || file.contains("site-packages")
        || file.contains("dist-packages")
        || file.starts_with('<'))
}

/// The innermost frames of the program's own code in `py-spy dump` output:
/// `    func (file:line)` lines of the first thread that has any.
fn python_frames(output: &str) -> Vec<String> {
    let mut thread = Vec::new();
    for line in output.lines() {
        if line.starts_with("Thread ") {
            if !thread.is_empty() {
                break;
            }
            continue;
        }
        let Some(frame) = line.strip_prefix("    ") else {
            continue;
        };
        let Some((func, rest)) = frame.rsplit_once(" (") else {
            continue;
        };
        let Some(place) = rest.strip_suffix(')') else {
            continue;
        };
        let file = place.rsplit_once(':').map_or(place, |(f, _)| f);
        if own_python_file(file) {
            thread.push(format!("{} ({place})", func.trim()));
        }
    }
    thread.truncate(SHOWN_FRAMES);
    thread
}

/// The innermost frames of the program's own code in `eu-stack -s -m`
/// output: `#N 0xADDR func - module` lines of a module that is no shared
/// library, each with the `file:line` of the line below it when there is
/// one; the first thread that has any.
fn eu_stack_frames(output: &str) -> Vec<String> {
    let mut frames: Vec<String> = Vec::new();
    let mut lines = output.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("TID ") && !frames.is_empty() {
            break;
        }
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        // `N  0xADDR func - module`
        let mut parts = rest.split_whitespace();
        let (_, _) = (parts.next(), parts.next());
        let tail: Vec<&str> = parts.collect();
        let tail = tail.join(" ");
        // No symbol: `- module`.
        let (func, module) = match tail.strip_prefix("- ") {
            Some(module) => ("", module),
            None => tail.rsplit_once(" - ").unwrap_or((tail.as_str(), "")),
        };
        let source = lines
            .peek()
            .filter(|l| l.starts_with("    "))
            .map(|l| l.trim().to_owned());
        if source.is_some() {
            lines.next();
        }
        if module.contains(".so") || func.is_empty() || func == "??" || func.starts_with('_') {
            continue;
        }
        let place = source.map(|s| {
            // `file:line:column` → `file:line`
            match s.rsplit_once(':').map(|x| x.0) {
                Some(fl) if fl.contains(':') => fl.to_owned(),
                _ => s,
            }
        });
        frames.push(match place {
            Some(p) => format!("{func} ({p})"),
            None => func.to_owned(),
        });
    }
    frames.truncate(SHOWN_FRAMES);
    frames
}

/// The innermost frames of the program's own code in `gdb` `bt` output:
/// `#N 0xADDR in func (args) at file:line` lines not `from` a library.
fn gdb_frames(output: &str) -> Vec<String> {
    let mut frames = Vec::new();
    for line in output.lines() {
        if line.starts_with("Thread ") && !frames.is_empty() {
            break;
        }
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        if rest.contains(" from ") {
            continue;
        }
        let body = rest.split_once(" in ").map_or_else(
            || rest.split_once(' ').map_or(rest, |(_, b)| b.trim_start()),
            |(_, b)| b,
        );
        let func = body.split(" (").next().unwrap_or(body).trim();
        if func.is_empty() || func == "??" || func.starts_with('_') {
            continue;
        }
        let place = body.rsplit_once(" at ").map(|(_, p)| p.trim());
        if place.is_some_and(|p| p.starts_with("../") || p.starts_with("./")) {
            continue;
        }
        frames.push(match place {
            Some(p) => format!("{func} ({p})"),
            None => func.to_owned(),
        });
    }
    frames.truncate(SHOWN_FRAMES);
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    // R8.14: py-spy's dump of a program stuck in socket.recv, as py-spy
    // 0.4.3 printed it; the program's own frames, innermost first.
    #[test]
    fn python_frames_are_the_programs_own() {
        let dump = [
            "Process 7901: /usr/bin/python3 /tmp/x/stuck.py",
            "Python v3.11.7 (/usr/bin/python3.11)",
            "",
            "Thread 7901 (idle): \"MainThread\"",
            "    recv_into (/usr/lib/python3.11/socket.py:706)",
            "    wait_for_reply (/tmp/x/stuck.py:4)",
            "    main (/tmp/x/stuck.py:10)",
            "    <module> (/tmp/x/stuck.py:12)",
            "    extra (/tmp/x/stuck.py:13)",
            "Thread 7902 (idle): \"worker\"",
            "    run (/tmp/x/other.py:1)",
        ]
        .join("\n");
        assert_eq!(
            python_frames(&dump),
            [
                "wait_for_reply (/tmp/x/stuck.py:4)",
                "main (/tmp/x/stuck.py:10)",
                "<module> (/tmp/x/stuck.py:12)"
            ]
        );
    }

    // R8.14: eu-stack 0.188's `-s -m` output of a C program stuck in read,
    // and gdb's `bt` of the same.
    #[test]
    fn native_frames_skip_libc() {
        let out = [
            "PID 8014 - process",
            "TID 8014:",
            "#0  0x00007f626a6822ad read - /usr/lib/x86_64-linux-gnu/libc.so.6",
            "    ../sysdeps/unix/sysv/linux/read.c:26:10",
            "#1  0x000055d8363b218a wait_for_input - /tmp/x/stuck",
            "    /tmp/x/stuck.c:3:57",
            "#2  0x000055d8363b21c8 main - /tmp/x/stuck",
            "    /tmp/x/stuck.c:4:81",
            "#3  0x00007f626a5b124a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6",
            "    ../sysdeps/nptl/libc_start_call_main.h:58:16",
            "#5  0x000055d8363b20a1 _start - /tmp/x/stuck",
            "#6  0x000055d8363b20a1 - /usr/bin/dash",
        ]
        .join("\n");
        assert_eq!(
            eu_stack_frames(&out),
            [
                "wait_for_input (/tmp/x/stuck.c:3)",
                "main (/tmp/x/stuck.c:4)"
            ]
        );
        let gdb = [
            "#0  0x00007f62 in __GI___libc_read (fd=3, buf=0x7ff, nbytes=1) at ../sysdeps/unix/sysv/linux/read.c:26",
            "#1  0x000055d8 in wait_for_input (fd=3) at stuck.c:3",
            "#2  0x000055d8 in main () at stuck.c:4",
            "#3  0x00007f62 in __libc_start_call_main () from /lib/x86_64-linux-gnu/libc.so.6",
        ]
        .join("\n");
        assert_eq!(
            gdb_frames(&gdb),
            ["wait_for_input (stuck.c:3)", "main (stuck.c:4)"]
        );
    }

    // R8.14: hostile output (no frames, odd lines) gives no frame, no panic.
    #[test]
    fn odd_output_gives_no_frames() {
        for odd in [
            "",
            "#",
            "#0",
            "    (",
            "Thread \n    x (",
            "#1 0x1 - \n    :",
        ] {
            assert!(python_frames(odd).len() <= 1, "{odd:?}");
            let _ = eu_stack_frames(odd);
            let _ = gdb_frames(odd);
        }
    }
}
