//! The names calls are shown by: the tool and, for a shell tool, the
//! command it runs (R5.10, R8.1).

use crate::tools::MAX_CALL_ID;

/// The longest command shown in a call's name, in characters.
pub const MAX_SHOWN_COMMAND: usize = 80;

/// Builds the name a call is shown by: the tool's name, and for a shell
/// tool the command it runs, `Bash(sleep 4)`; cut to [`MAX_SHOWN_COMMAND`]
/// characters with `…` and to [`MAX_CALL_ID`] bytes in all, and with
/// control characters replaced (the name reaches stderr lines and
/// terminals, R8.1): newlines and tabs by a space, others by `?`.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::call_name;
/// assert_eq!(call_name("Bash", Some("sleep 4")), "Bash(sleep 4)");
/// assert_eq!(call_name("x\u{1b}[2J", None), "x?[2J");
/// assert_eq!(call_name("Bash", Some("a\nb")), "Bash(a b)");
/// assert!(call_name("Bash", Some(&"y".repeat(500))).ends_with("…)"));
/// ```
pub fn call_name(name: &str, detail: Option<&str>) -> String {
    fn clean(s: &str, out: &mut String, max_chars: usize) -> bool {
        for (i, c) in s.chars().enumerate() {
            if i == max_chars {
                return false;
            }
            out.push(match c {
                '\n' | '\r' | '\t' => ' ',
                c if c.is_control() => '?',
                c => c,
            });
        }
        true
    }
    let mut out = String::new();
    clean(name, &mut out, MAX_CALL_ID);
    let out = cut_bytes(out, MAX_CALL_ID);
    let Some(detail) = detail.map(str::trim).filter(|d| !d.is_empty()) else {
        return out;
    };
    if out.len() + 5 >= MAX_CALL_ID {
        return out;
    }
    let mut out = out;
    let mut shown = String::new();
    let whole = clean(detail, &mut shown, MAX_SHOWN_COMMAND);
    // Room for `(`, `…` (3 bytes) and `)` inside the byte bound.
    let room = MAX_CALL_ID.saturating_sub(out.len() + 5);
    let before = shown.len();
    let shown = cut_bytes(shown, room);
    let truncated = !whole || shown.len() < before;
    out.push('(');
    out.push_str(&shown);
    if truncated {
        out.push('…');
    }
    out.push(')');
    out
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub(super) fn cut_bytes(mut s: String, max: usize) -> String {
    // A string within `max` ends on a boundary and is left whole.
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}
