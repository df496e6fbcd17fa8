//! `stallwarden check [FILE]` (R7.3): validate a config and print each
//! profile's effective budgets, one column per profile.

use std::path::{Path, PathBuf};

use stallwarden::config::{Config, ConfigError, RunOptions, DEFAULTS_NAME};
use stallwarden::Profile;

/// The config file `run` and `check` read when none is named.
pub(crate) const DEFAULT_FILE: &str = "stallwarden.toml";

/// Loads `file`, or `./stallwarden.toml` if present, or the built-in defaults.
pub(crate) fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
    match file {
        Some(path) => Config::load(path),
        None if Path::new(DEFAULT_FILE).exists() => Config::load(DEFAULT_FILE),
        None => Ok(Config::default()),
    }
}

/// Runs `check`; returns the process exit status.
pub(crate) fn run(file: Option<PathBuf>) -> u8 {
    let config = match load(file.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stallwarden: {e}");
            return super::EXIT_ERROR;
        }
    };
    let mut columns: Vec<(String, Profile, RunOptions)> = Vec::new();
    let mut streams = Vec::new();
    let names = std::iter::once(None).chain(config.profile_names().into_iter().map(Some));
    for name in names {
        match config
            .profile(name)
            .and_then(|p| Ok((p, config.stream(name)?, config.run_options(name)?)))
        {
            Ok((mut p, stream, r)) => {
                // R5.10: as `run` does, a profile that streams an agent's
                // events and sets no execution budget gets 30m.
                super::inputs::stream_default(&mut p, stream.is_some(), false);
                columns.push((name.unwrap_or(DEFAULTS_NAME).to_owned(), p, r));
                streams.push(stream);
            }
            Err(e) => {
                eprintln!("stallwarden: {e}");
                return super::EXIT_ERROR;
            }
        }
    }
    let n = config.profile_names().len();
    println!(
        "{}: ok, [defaults] and {n} profile{}",
        config.origin(),
        if n == 1 { "" } else { "s" }
    );
    println!();
    print!("{}", table(&columns, &streams));
    if columns.iter().any(|(_, p, _)| p.execution.is_none()) {
        println!();
        println!(
            "With --stream FORMAT, a profile whose execution is off gets execution = {} (R5.10).",
            humantime::format_duration(super::inputs::STREAM_EXECUTION)
        );
    }
    0
}

/// Renders profiles as a table: one row per key, one column per profile;
/// `streams` holds each column's `stream` format (R5.10), not a budget.
pub(crate) fn table(
    columns: &[(String, Profile, RunOptions)],
    streams: &[Option<stallwarden::sources::agent::Format>],
) -> String {
    let rows: Vec<(&str, Vec<String>)> = Config::keys()
        .iter()
        .map(|key| {
            let cells = columns.iter().enumerate().map(|(i, (_, p, r))| match *key {
                "stream" => streams
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or_else(|| "none".into(), |f| f.to_string()),
                _ => value(p, r, key),
            });
            (*key, cells.collect())
        })
        .collect();
    let key_width = Config::keys().iter().map(|k| k.len()).max().unwrap_or(0);
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| {
            rows.iter()
                .map(|(_, vals)| vals[i].len())
                .chain([name.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let mut line = |first: &str, cells: &mut dyn Iterator<Item = String>| {
        let mut l = format!("{first:key_width$}");
        for (cell, w) in cells.zip(&widths) {
            l.push_str(&format!("  {cell:w$}"));
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line("", &mut columns.iter().map(|(n, _, _)| n.clone()));
    for (key, vals) in rows {
        line(key, &mut vals.into_iter());
    }
    out
}

/// Renders one key of an effective profile as a person reads it, saying
/// what "off" falls back to where it falls back; the core shows the rest
/// (R10.6).
fn value(p: &Profile, r: &RunOptions, key: &str) -> String {
    let d = |v: Option<std::time::Duration>| stallwarden::Limit::from(v).to_string();
    match key {
        "execution" => match p.execution {
            Some(_) => d(p.execution_budget()),
            None => format!("= idle ({})", d(p.idle)),
        },
        "startup" => match p.startup {
            Some(_) => d(p.startup),
            None => format!("= idle ({})", d(p.idle)),
        },
        "terminate-after" if p.terminate_after == 0 => "0 (notify only)".into(),
        "leak-timeout" => d(Some(r.leak_timeout)),
        "on-leftover" => r.on_leftover.as_str().into(),
        "on-input-wait" => r.on_input_wait.as_str().into(),
        "pty" => r.pty.to_string(),
        "on-stall" => r.on_stall.clone().unwrap_or_else(|| "none".into()),
        "on-stall-timeout" => d(Some(r.on_stall_timeout)),
        "restart" => r.restart.as_str().into(),
        "restart-delay" => d(Some(r.restart_delay)),
        "restart-max-delay" => d(Some(r.restart_max_delay)),
        "max-restarts" => r.max_restarts.to_string(),
        "stacks" => r.stacks.to_string(),
        key => stallwarden::OptionSpec::find(key).map_or_else(String::new, |o| o.show(p)),
    }
}
