//! Redaction of secrets in command output before any of it reaches a monitor
//! agent (R6.6), plus the cleaning that makes terminal output readable text.
//!
//! Plain byte scanning, no regex: every pattern here is a literal prefix or a
//! `key=value` shape, so a scanner is short, allocation-light and linear.
//! Redaction errs towards hiding: `tokens: 12` loses its number, which is
//! cheaper than a leaked key.

/// What replaces a secret value.
const MASK: &str = "[REDACTED]";

/// Token prefixes that are secrets on their own: `(prefix, shortest body)`.
///
/// The body is the rest of the token (letters, digits, `_` and `-`); a body
/// shorter than the minimum is left alone so that words like `sk-learn` pass.
const PREFIXES: &[(&str, usize)] = &[
    ("sk-", 16), // OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    ("sk_live_", 12),
    ("sk_test_", 12),
    ("rk_live_", 12),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("xoxb-", 8),
    ("xoxp-", 8),
    ("xoxa-", 8),
    ("xoxr-", 8),
    ("xoxs-", 8),
    ("xapp-", 8),
    ("AIza", 30),
    ("hf_", 30),
    ("npm_", 30),
];

/// Key names whose value is a secret in a `key=value` or `key: value` pair,
/// matched as a lowercase substring of the key (`DB_PASSWORD`, `api-key`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "access_key",
    "accesskey",
    "private_key",
    "credential",
    "authorization",
];

/// Replaces secrets in `text` with `[REDACTED]`.
///
/// Covered: API keys by prefix (`sk-…` including `sk-proj-` and `sk-ant-`,
/// `ghp_…`, `github_pat_…`, `glpat-…`, `xoxb-`/`xoxp-` Slack tokens, Stripe
/// keys, Google `AIza…`), AWS key ids (`AKIA…`/`ASIA…`), bearer tokens and
/// `Authorization:` headers, `password=`/`passwd:`/`secret=`/`token=`-style
/// pairs (also quoted, JSON, and `--password value` flags), passwords in
/// URLs (`scheme://user:pass@host`), and PEM private key blocks, including a
/// block cut off at either end.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::redact;
///
/// let out = redact("export OPENAI_API_KEY=sk-proj-Abc123Def456Ghi789Jkl\nok");
/// assert!(!out.contains("Abc123"));
/// assert!(out.ends_with("\nok"));
/// assert_eq!(redact("password=hunter2 done"), "password=[REDACTED] done");
/// ```
pub fn redact(text: &str) -> String {
    let b = text.as_bytes();
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    pem_blocks(b, &mut spans);
    prefixed_tokens(b, &mut spans);
    bearer_tokens(b, &mut spans);
    pairs(b, &mut spans);
    flags(b, &mut spans);
    url_passwords(b, &mut spans);
    apply(text, spans)
}

/// Turns raw output bytes into text a model can read: invalid UTF-8 is
/// replaced, ANSI escape sequences and control characters are dropped, and a
/// lone carriage return (a progress bar redraw) becomes a line break.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::clean_output;
/// assert_eq!(clean_output(b"\x1b[32mok\x1b[0m 10%\r20%\r\n"), "ok 10%\n20%\n");
/// ```
pub fn clean_output(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters, then one final byte in @..~
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: until BEL or ESC \
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn is_tok(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn is_key_char(c: u8) -> bool {
    is_tok(c) || c == b'.'
}

fn is_bearer_char(c: u8) -> bool {
    is_tok(c) || matches!(c, b'.' | b'~' | b'+' | b'/' | b'=')
}

fn starts_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[..needle.len()].eq_ignore_ascii_case(needle)
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from > hay.len() || needle.is_empty() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn line_end(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| p + from)
}

/// PEM private key blocks. A block whose END is missing (the output stops
/// mid-key) is masked to the end; an END whose BEGIN fell out of the tail
/// window is masked back over the base64 lines before it.
fn pem_blocks(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while let Some(begin) = find(b, i, b"-----BEGIN ") {
        let header_end = line_end(b, begin);
        if !contains(&b[begin..header_end], b"PRIVATE KEY") {
            i = begin + 1;
            continue;
        }
        let end = match find(b, header_end, b"-----END ") {
            Some(e) => {
                let close = find(b, e + 9, b"-----").map_or(line_end(b, e), |c| c + 5);
                close.min(line_end(b, e))
            }
            None => b.len(),
        };
        spans.push((begin, end, "[REDACTED PRIVATE KEY]".into()));
        i = end;
    }
    // Orphan END markers: the BEGIN was cut off by the tail window.
    let mut i = 0;
    while let Some(e) = find(b, i, b"-----END ") {
        let close = line_end(b, e);
        i = close;
        if !contains(&b[e..close], b"PRIVATE KEY") || spans.iter().any(|s| s.0 <= e && e < s.1) {
            continue;
        }
        let mut start = b[..e]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        // Walk back over base64 lines.
        while start > 0 {
            let prev_start = b[..start - 1]
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |p| p + 1);
            let line = &b[prev_start..start - 1];
            let base64 = !line.is_empty()
                && line
                    .iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
            if !base64 {
                break;
            }
            start = prev_start;
        }
        spans.push((start, close, "[REDACTED PRIVATE KEY]".into()));
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, 0, needle).is_some()
}

/// Tokens recognised by their prefix, and AWS access key ids.
fn prefixed_tokens(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while i < b.len() {
        if !is_tok(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_tok(b[i]) {
            i += 1;
        }
        let run = &b[start..i];
        // Prefixes may sit inside a run (`key-sk-…` is unlikely, but
        // `OPENAI_KEY=sk-…` splits at '='); check every run start and every
        // position after a '-' or '_' would over-match words, so only the
        // run start counts.
        for (prefix, min) in PREFIXES {
            let p = prefix.as_bytes();
            if run.starts_with(p) && run.len() - p.len() >= *min {
                spans.push((start, i, format!("{prefix}{MASK}")));
                break;
            }
        }
        // AWS access key ids: AKIA/ASIA plus 16 upper-case letters or digits.
        if run.len() == 20
            && (run.starts_with(b"AKIA") || run.starts_with(b"ASIA"))
            && run[4..]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            spans.push((start, i, MASK.into()));
        }
    }
}

/// `Bearer <token>` anywhere (headers, curl -H, logs).
fn bearer_tokens(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while i + 6 < b.len() {
        let at_word = i == 0 || !is_tok(b[i - 1]);
        if at_word && starts_with_ci(&b[i..], b"bearer") {
            let mut j = i + 6;
            let spaces = j;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let v = j;
            while j < b.len() && is_bearer_char(b[j]) {
                j += 1;
            }
            if j > spaces && v > spaces && j - v >= 8 {
                spans.push((v, j, MASK.into()));
                i = j;
                continue;
            }
        }
        i += 1;
    }
}

/// `key=value`, `key: value`, `"key": "value"` where the key names a secret.
/// An `Authorization` key masks its whole value (scheme included).
fn pairs(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    for (p, &sep) in b.iter().enumerate() {
        if sep != b'=' && sep != b':' {
            continue;
        }
        // `==`, `:=`… the value starts after the last separator char.
        if p + 1 < b.len() && (b[p + 1] == b'=' || (sep == b':' && b[p + 1] == b'/')) {
            continue;
        }
        // The key: optional spaces and closing quote, then key chars.
        let mut k = p;
        while k > 0 && b[k - 1] == b' ' {
            k -= 1;
        }
        if k > 0 && (b[k - 1] == b'"' || b[k - 1] == b'\'') {
            k -= 1;
        }
        let key_end = k;
        while k > 0 && is_key_char(b[k - 1]) {
            k -= 1;
        }
        if k == key_end {
            continue;
        }
        let key = b[k..key_end].to_ascii_lowercase();
        if !SECRET_KEYS.iter().any(|s| contains(&key, s.as_bytes())) {
            continue;
        }
        let whole_line = contains(&key, b"authorization");
        if let Some((vs, ve)) = value_at(b, p + 1, whole_line) {
            spans.push((vs, ve, MASK.into()));
        }
    }
}

/// The value after a separator: skips spaces; a quoted value runs to its
/// closing quote on the same line; a bare value runs to whitespace or a
/// delimiter (or to the line's end when `whole_line`).
fn value_at(b: &[u8], from: usize, whole_line: bool) -> Option<(usize, usize)> {
    let mut v = from;
    while v < b.len() && (b[v] == b' ' || b[v] == b'\t') {
        v += 1;
    }
    if v >= b.len() || b[v] == b'\n' {
        return None;
    }
    let (start, end) = if b[v] == b'"' || b[v] == b'\'' {
        let q = b[v];
        let eol = line_end(b, v + 1);
        let close = b[v + 1..eol]
            .iter()
            .position(|&c| c == q)
            .map_or(eol, |p| p + v + 1);
        (v + 1, close)
    } else if whole_line {
        (v, line_end(b, v))
    } else {
        let mut e = v;
        while e < b.len()
            && !b[e].is_ascii_whitespace()
            && !matches!(b[e], b'"' | b'\'' | b',' | b';' | b'&' | b')' | b'}' | b']')
        {
            e += 1;
        }
        (v, e)
    };
    (end > start).then_some((start, end))
}

/// `--password value`, `--api-token value` (a flag naming a secret, then a
/// space, then the value).
fn flags(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while let Some(f) = find(b, i, b"--") {
        i = f + 2;
        if f > 0 && is_tok(b[f - 1]) {
            continue;
        }
        let mut e = i;
        while e < b.len() && is_tok(b[e]) {
            e += 1;
        }
        let key = b[i..e].to_ascii_lowercase();
        if e == i || !SECRET_KEYS.iter().any(|s| contains(&key, s.as_bytes())) {
            continue;
        }
        if e < b.len() && b[e] == b' ' && e + 1 < b.len() && b[e + 1] != b'-' {
            if let Some((vs, ve)) = value_at(b, e + 1, false) {
                spans.push((vs, ve, MASK.into()));
            }
        }
    }
}

/// `scheme://user:password@host`.
fn url_passwords(b: &[u8], spans: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while let Some(s) = find(b, i, b"://") {
        let auth = s + 3;
        i = auth;
        let mut e = auth;
        while e < b.len() && !matches!(b[e], b'/' | b'@' | b' ' | b'\n' | b'\t' | b'"' | b'\'') {
            e += 1;
        }
        if e < b.len() && b[e] == b'@' {
            if let Some(colon) = b[auth..e].iter().position(|&c| c == b':') {
                let ps = auth + colon + 1;
                if e > ps {
                    spans.push((ps, e, MASK.into()));
                }
            }
        }
    }
}

/// Builds the output, merging overlapping spans (the earliest replacement
/// wins; the union of the spans is masked).
fn apply(text: &str, mut spans: Vec<(usize, usize, String)>) -> String {
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut iter = spans.into_iter().peekable();
    while let Some((start, mut end, rep)) = iter.next() {
        while let Some(next) = iter.peek() {
            if next.0 < end {
                end = end.max(next.1);
                iter.next();
            } else {
                break;
            }
        }
        if start < pos {
            // Fully inside an earlier merged span.
            pos = pos.max(end);
            continue;
        }
        out.push_str(&text[pos..start]);
        out.push_str(&rep);
        pos = end;
    }
    out.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_ordinary_output_alone() {
        let s = "Compiling serde v1.0\ntask-runner ok, sk-learn installed\nPWD=/home/x\n";
        assert_eq!(redact(s), s);
    }

    #[test]
    fn masks_pem_block_cut_at_the_start() {
        let s = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nabc+/=\n-----END PRIVATE KEY-----\nnext";
        assert_eq!(redact(s), "[REDACTED PRIVATE KEY]\nnext");
    }

    #[test]
    fn masks_pem_block_cut_at_the_end() {
        let s = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADAN";
        assert_eq!(redact(s), "before\n[REDACTED PRIVATE KEY]");
    }

    #[test]
    fn masks_quoted_and_json_values() {
        assert_eq!(
            redact(r#"{"api_key": "abc def", "n": 1}"#),
            r#"{"api_key": "[REDACTED]", "n": 1}"#
        );
        assert_eq!(
            redact("DB_PASSWORD='p@ss w0rd'"),
            "DB_PASSWORD='[REDACTED]'"
        );
    }

    #[test]
    fn masks_authorization_header_whole_value() {
        assert_eq!(
            redact("Authorization: Basic dXNlcjpwYXNz\nnext"),
            "Authorization: [REDACTED]\nnext"
        );
    }

    #[test]
    fn cleans_osc_and_keeps_multibyte_text() {
        assert_eq!(
            clean_output("\x1b]0;title\x07héllo\u{0}".as_bytes()),
            "héllo"
        );
    }
}
