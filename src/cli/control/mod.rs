//! `stallwarden list` and `stallwarden describe` (R6.5): read a control socket
//! and print rows a person can read, or the JSON snapshots with `--json`.
//! The server is the library's [`stallwarden::control`]; `client.rs` reads it.

mod client;

use serde_json::Value;

use super::args::ControlArgs;
use super::EXIT_ERROR;

/// Runs `list`; returns the exit status.
pub(crate) fn list(args: &ControlArgs) -> u8 {
    match client::list(&args.socket) {
        Ok(tasks) if args.json => print_json(&Value::Array(tasks)),
        Ok(tasks) => {
            print!("{}", rows(&tasks));
            0
        }
        Err(e) => fail(&e),
    }
}

/// Runs `describe`: one task by name, or every task.
pub(crate) fn describe(task: Option<&str>, args: &ControlArgs) -> u8 {
    let tasks = match task {
        Some(name) => client::describe(&args.socket, name).map(|t| vec![t]),
        None => client::list(&args.socket),
    };
    match tasks {
        Ok(tasks) if args.json => print_json(&Value::Array(tasks)),
        Ok(tasks) => {
            for (i, t) in tasks.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                print!("{}", details(t));
            }
            0
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> u8 {
    eprintln!("stallwarden: {e}");
    EXIT_ERROR
}

fn print_json(v: &Value) -> u8 {
    match serde_json::to_string_pretty(v) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(e) => fail(&e),
    }
}

/// One row per task: name, state, elapsed, phase, silence, strikes.
pub(crate) fn rows(tasks: &[Value]) -> String {
    let header = [
        "TASK",
        "STATE",
        "ELAPSED",
        "PHASE",
        "LAST OUTPUT",
        "STRIKES",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for t in tasks {
        table.push(vec![
            text(&t["name"]),
            // R8.15: a restarted task says so beside its state.
            match t.get("restarts") {
                Some(n) => format!("{} (restart {})", text(&t["state"]), text(n)),
                None => text(&t["state"]),
            },
            ms(&t["elapsed_ms"]),
            phase(t),
            t.get("last_output_age_ms")
                .map_or_else(|| "none yet".into(), |v| format!("{} ago", ms(v))),
            text(&t["strikes"]),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| table.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in table {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    if tasks.is_empty() {
        out.push_str("(no live tasks)\n");
    }
    out
}

/// Every field of one task, one per line.
pub(crate) fn details(t: &Value) -> String {
    let mut out = format!("{} ({})\n", text(&t["name"]), text(&t["state"]));
    let mut field = |k: &str, v: String| out.push_str(&format!("  {k:<14} {v}\n"));
    field("started", text(&t["started_at"]));
    field("elapsed", ms(&t["elapsed_ms"]));
    field("phase", phase(t));
    if let Some(step) = t.get("last_step") {
        field("last step", text(step));
    }
    if let Some(call) = t.get("last_call") {
        // R5.10: the agent's tool, how long it has run or how it ended.
        let when = match call.get("outcome") {
            None => format!("running for {}", ms(&call["started"]["age_ms"])),
            Some(outcome) => format!(
                "{}, started {} ago",
                text(outcome),
                ms(&call["started"]["age_ms"])
            ),
        };
        field(
            "last call",
            format!("{} ({}), {when}", text(&call["name"]), text(&call["id"])),
        );
    }
    if let Some(r) = t.get("repeating") {
        // R5.12: what only repeats itself since the last progress.
        let times = format!("{} times in {}", text(&r["count"]), ms(&r["over_ms"]));
        let said = match r["source"].as_str() {
            Some("tool-call") => format!("{} returned the same result {times}", text(&r["shown"])),
            _ => format!("the output repeats \"{}\" {times}", text(&r["shown"])),
        };
        field("repeating", said);
    }
    field(
        "last output",
        t.get("last_output_age_ms")
            .map_or_else(|| "none yet".into(), |v| format!("{} ago", ms(v))),
    );
    field(
        "output",
        format!(
            "{} bytes, {} lines",
            text(&t["total_bytes"]),
            text(&t["total_lines"])
        ),
    );
    field(
        "strikes",
        format!(
            "{} (stalls: {})",
            text(&t["strikes"]),
            text(&t["stall_count"])
        ),
    );
    if let Some(budgets) = t["budgets"].as_array() {
        for b in budgets {
            let active = if b["active"].as_bool() == Some(true) {
                " (active)"
            } else {
                ""
            };
            field(
                &format!("budget {}", text(&b["budget"])),
                format!(
                    "{} left of {}{active}",
                    ms(&b["remaining_ms"]),
                    ms(&b["limit_ms"])
                ),
            );
        }
    }
    // R8.15: how many times the work was started again, and why.
    if let Some(n) = t.get("restarts") {
        field("restarts", text(n));
    }
    if let Some(stall) = t.get("last_stall") {
        field("last stall", text(stall));
    }
    // R8.14: what was taken at the latest stall (the whole stacks are in
    // --json and in the `stalled` event).
    if let Some(report) = t.get("stall_report") {
        stall_report(report, &mut field);
    }
    // R8.7, R4.2: what the task's sources turned away (malformed sd_notify
    // datagrams, refused stream events), by reason.
    if let Some(refused) = t.get("refused").and_then(Value::as_object) {
        if !refused.is_empty() {
            let counts: Vec<String> = refused
                .iter()
                .map(|(reason, n)| format!("{reason} {}", text(n)))
                .collect();
            field("refused", counts.join(", "));
        }
    }
    // R5.6, R4.3: what the task left running in the background.
    if let Some(background) = t.get("background").and_then(Value::as_array) {
        for b in background {
            let launch = b
                .get("launch_id")
                .map_or_else(String::new, |l| format!(", launched by {}", text(l)));
            field(
                "background",
                format!("{} ({}{launch})", text(&b["id"]), text(&b["kind"])),
            );
        }
    }
    if t.get("unnamed_background").and_then(Value::as_bool) == Some(true) {
        field("background", "a task the record could not name".into());
    }
    children(t, &mut field);
    out
}

/// The rows of the latest stall's report (R8.14): each suspect's stack and
/// how the `on-stall` command ended.
fn stall_report(report: &Value, field: &mut impl FnMut(&str, String)) {
    for n in report["stacks"].as_array().into_iter().flatten() {
        let frames: Vec<String> = n["frames"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        let what = if frames.is_empty() {
            text(&n["status"])
        } else {
            frames.join(" < ")
        };
        field(
            "stack",
            format!("pid {} ({}): {what}", text(&n["pid"]), text(&n["source"])),
        );
    }
    if let Some(run) = report.get("on_stall") {
        let bytes = run["output"].as_str().map_or(0, str::len);
        field(
            "on-stall",
            format!("{} ({bytes} bytes of output)", text(&run["status"])),
        );
    }
}

/// The rows of the task's children: those at work one per row, the
/// zombies counted in one (R5.5).
fn children(t: &Value, field: &mut impl FnMut(&str, String)) {
    match t.get("children").and_then(Value::as_array) {
        Some(children) => {
            // A zombie has exited and holds no work: it is not listed as a
            // child at work, only counted (R5.5).
            let (zombies, live): (Vec<&Value>, Vec<&Value>) =
                children.iter().partition(|c| c["state"] == "zombie");
            for c in live {
                let mut line = format!(
                    "{}[{}] {}",
                    text(&c["name"]),
                    text(&c["pid"]),
                    text(&c["state"])
                );
                // R8.13: what it is blocked on (escaped at the source).
                if let Some(b) = c["blocked_on"].as_str() {
                    line.push_str(&format!(": {b}"));
                }
                field("child", line);
            }
            if !zombies.is_empty() {
                let names: Vec<String> = zombies
                    .iter()
                    .map(|c| format!("{}[{}]", text(&c["name"]), text(&c["pid"])))
                    .collect();
                field(
                    "zombies",
                    format!("{} exited, not yet reaped", names.join(", ")),
                );
            }
        }
        None => field("children", "unknown".into()),
    }
}

fn phase(t: &Value) -> String {
    match t["phase"].as_str() {
        Some("executing") => match t["tools"].as_u64() {
            Some(1) => "executing 1 tool".into(),
            _ => format!("executing {} tools", text(&t["tools"])),
        },
        Some(p) => p.to_owned(),
        None => "-".into(),
    }
}

/// A value as printed; names and steps come from the watched processes, so
/// control characters are shown escaped (R8.12).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => super::console::printable(s).into_owned(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn ms(v: &Value) -> String {
    v.as_u64()
        .map_or_else(|| "-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // R4.2, R5.6, R5.5, issue 24: one tool in the singular, the background
    // record listed, zombies not listed as children at work.
    #[test]
    fn describe_says_one_tool_lists_background_and_sets_zombies_apart() {
        let t = json!({
            "name": "agent", "state": "monitoring", "phase": "executing", "tools": 1,
            "last_call": {"id": "toolu_1", "name": "Bash(sleep 4)", "started": {"age_ms": 3000}},
            "background": [{"id": "b9miywpi3", "launch_id": "toolu_1", "kind": "command"}],
            "unnamed_background": true,
            "children": [
                {"name": "sleep", "pid": 12, "state": "sleeping"},
                {"name": "bash", "pid": 13, "state": "zombie"}
            ]
        });
        let d = details(&t);
        assert!(d.contains("phase          executing 1 tool\n"), "{d}");
        assert!(
            d.contains("Bash(sleep 4) (toolu_1), running for 3.0s"),
            "{d}"
        );
        assert!(
            d.contains("background     b9miywpi3 (command, launched by toolu_1)"),
            "{d}"
        );
        assert!(d.contains("a task the record could not name"), "{d}");
        assert!(d.contains("child          sleep[12] sleeping"), "{d}");
        assert!(!d.contains("child          bash[13]"), "{d}");
        assert!(
            d.contains("zombies        bash[13] exited, not yet reaped"),
            "{d}"
        );
        let two = json!({"name": "x", "state": "working", "phase": "executing", "tools": 2});
        let looping = json!({"name": "w", "state": "stalled", "phase": "idle",
            "repeating": {"source": "output", "shown": "waiting...", "count": 9, "over_ms": 9000}});
        assert!(
            details(&looping)
                .contains("repeating      the output repeats \"waiting...\" 9 times in 9.0s"),
            "{}",
            details(&looping)
        );
        assert!(details(&two).contains("executing 2 tools"));
        assert!(rows(&[t]).contains("executing 1 tool "));
    }
}
