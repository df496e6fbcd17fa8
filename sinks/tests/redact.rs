//! What a monitor agent is shown of a command's output (R6.6): secrets
//! masked by `redact` (bearer tokens, PEM key blocks, secret pairs and
//! flags, URL passwords, prefixed API keys, AWS key ids), terminal control
//! dropped by `clean_output`, and ordinary output that only looks like a
//! secret (prose, ports, comparisons, help text, certificates) left alone.
//! A separator or a secret flag cut off at either end of the text is kept
//! as is, never a panic (R10.2). Pure functions on text: no guard, no
//! clock, no time. That no secret reaches an agent through the monitor sink
//! is checked end to end in `monitor.rs`.

mod secrets;

use secrets::SECRETS;
use stallwarden_sinks::monitor::{clean_output, redact};

// --- Secrets, one or several in a text -----------------------------------

// R6.6: every real-shaped fake secret is masked: no part of it that must
// stay hidden is left in the text.
#[test]
fn redact_masks_every_fake_secret() {
    for (line, secret) in SECRETS {
        let out = redact(line);
        assert!(
            !out.contains(secret),
            "{secret:?} leaked from {line:?}: {out:?}"
        );
    }
}

// R6.6: two secrets in one text are masked each on its own; the text
// between them stays.
#[test]
fn two_secrets_are_masked_apart() {
    assert_eq!(
        redact("password=a1b2 user=ci token=c3d4"),
        "password=[REDACTED] user=ci token=[REDACTED]"
    );
}

// --- Bearer tokens -------------------------------------------------------

// R6.6: a bare `Bearer <token>` (a curl line, a log) is masked on its own,
// without an `Authorization:` key before it (kills `<` for `==` in the
// bearer scan's bound).
#[test]
fn a_bare_bearer_token_is_masked() {
    assert_eq!(
        redact("curl -H 'X-Auth: Bearer abcdefgh.1234_xyz' https://api"),
        "curl -H 'X-Auth: Bearer [REDACTED]' https://api"
    );
}

// R6.6: only the word `bearer` introduces a token; any other six-letter
// word followed by a long word is left alone (kills `&&` for `||` in the
// bearer scan).
#[test]
fn a_six_letter_word_before_a_long_one_is_not_a_bearer() {
    let text = "passed 12345678 tests, failed 0";
    assert_eq!(redact(text), text);
}

// R6.6: `bearer` as a word is masked only with a space and a long token
// after it: prose, a word that merely starts with it, and trailing spaces
// are left alone (and never index past the text).
#[test]
fn bearer_needs_a_space_and_a_long_token() {
    for text in [
        "the bearer of bad news",
        "bearertokens1234567890 is one word",
        "sent as bearer   ",
    ] {
        assert_eq!(redact(text), text);
    }
    assert_eq!(
        redact("sent as bearer 0123456789abcdef"),
        "sent as bearer [REDACTED]"
    );
}

// --- Prefixed API keys and AWS key ids -----------------------------------

// R6.6: a token prefix masks only a body of at least its minimum length
// (16 after `sk-`), counted without the prefix: a short hyphenated word that
// starts like a key is ordinary output (kills `-` for `+` in
// `prefixed_tokens`, which counted the prefix twice and masked the word).
#[test]
fn a_key_prefix_with_a_short_body_is_not_a_secret() {
    let text = "pip install sk-video-utils";
    assert_eq!(redact(text), text);
    // 16 characters after the prefix: a key.
    assert_eq!(
        redact("key sk-abcdefgh12345678 set"),
        "key sk-[REDACTED] set"
    );
}

// R6.6: an AWS access key id is AKIA or ASIA and exactly 16 upper-case
// letters or digits; shorter look-alikes are ordinary words.
#[test]
fn only_a_whole_aws_key_id_is_masked() {
    assert_eq!(redact("id AKIAIOSFODNN7EXAMPLE ok"), "id [REDACTED] ok");
    assert_eq!(
        redact("see AKIAEXAMPLE12 in the docs"),
        "see AKIAEXAMPLE12 in the docs"
    );
}

// --- PEM blocks ----------------------------------------------------------

// R6.6: a PEM key block is masked up to its closing dashes; what follows
// on the END line stays (kills `+` for `*` in finding the closing dashes).
#[test]
fn text_after_a_pem_end_marker_on_its_line_stays() {
    let text = "key follows:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY----- (2048 bits)\nnext";
    assert_eq!(
        redact(text),
        "key follows:\n[REDACTED PRIVATE KEY] (2048 bits)\nnext"
    );
}

// R6.6: a key block whose BEGIN fell out of the tail window is masked back
// over its base64 lines, and the line before it keeps its line break
// (kills `+` for `*` in finding the start of the END line).
#[test]
fn an_orphan_pem_end_is_masked_back_to_its_base64_lines() {
    let text = "tail of a log\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\nnext";
    assert_eq!(redact(text), "tail of a log\n[REDACTED PRIVATE KEY]\nnext");
    // Only the END line left: the line before it keeps its line break.
    assert_eq!(
        redact("tail of a log\n-----END PRIVATE KEY-----\nnext"),
        "tail of a log\n[REDACTED PRIVATE KEY]\nnext"
    );
}

// R6.6: an END whose BEGIN is missing is masked back over its base64 lines
// even after a whole block earlier in the text.
#[test]
fn an_orphan_pem_end_after_a_whole_block_is_masked_too() {
    let text = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n\
                log line\nkqhkiG9w0BAQEF\n-----END RSA PRIVATE KEY-----\nnext";
    assert_eq!(
        redact(text),
        "[REDACTED PRIVATE KEY]\nlog line\n[REDACTED PRIVATE KEY]\nnext"
    );
}

// R6.6: a certificate is not a secret (TLS debugging prints them): it is
// kept, and the private key after it is still masked.
#[test]
fn a_certificate_is_kept_and_the_key_after_it_masked() {
    let text = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n\
                -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\nok";
    assert_eq!(
        redact(text),
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n\
         [REDACTED PRIVATE KEY]\nok"
    );
}

// --- `key=value` pairs ---------------------------------------------------

// R6.6: spaces before the separator still leave the key a secret's name
// (kills `>` for `<` in the key walk of `pairs`).
#[test]
fn a_spaced_out_secret_pair_is_masked() {
    assert_eq!(redact("password = hunter2"), "password = [REDACTED]");
}

// R6.6/R10.2: a separator at the very start of the text has no key; it is
// kept as is, never a panic (kills `>` for `>=` in the quote check).
#[test]
fn a_separator_at_the_start_is_kept_without_a_panic() {
    for text in ["=x", ": value", "= 1"] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: `==` is a comparison, not a pair; `=/` starts a secret path value,
// while `:/` starts a URL; a single-quoted key (a Python dict) is a key.
#[test]
fn pairs_tell_comparisons_urls_and_quoted_keys_apart() {
    for text in ["assert token == expected", "secret://vault/db"] {
        assert_eq!(redact(text), text);
    }
    assert_eq!(redact("password=/run/secrets/db"), "password=[REDACTED]");
    assert_eq!(
        redact("{'password': 'hunter2', 'user': 'ci'}"),
        "{'password': '[REDACTED]', 'user': 'ci'}"
    );
}

// --- Secret flags --------------------------------------------------------

// R6.6: only a flag naming a secret hides its value, and only a flag that
// starts a word (kills `||` for `&&` and `>` for `<` in `flags`).
#[test]
fn only_secret_flags_that_start_a_word_hide_their_value() {
    assert_eq!(
        redact("mysql --password hunter2 --user admin"),
        "mysql --password [REDACTED] --user admin"
    );
    for text in ["cargo test --package core", "see page--token counts below"] {
        assert_eq!(redact(text), text);
    }
}

// R6.6/R10.2: a secret flag at the very end of the output (a command line
// cut by the tail window, `--password ` with nothing after it) is kept as
// is, never a panic (kills `<` for `<=` in `e + 1 < b.len()` in `flags`,
// which indexed past the end).
#[test]
fn a_secret_flag_at_the_end_of_the_text_is_kept_without_a_panic() {
    for text in ["mysql --password ", "mysql --password", "run --token  "] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: a secret flag in help text (`mysql --help`: `--password[=name]`),
// one that ends the text and one followed by another flag (mysql then
// prompts) have no value to hide; an empty value is not masked into one.
#[test]
fn help_text_a_trailing_flag_and_an_empty_value_are_left_alone() {
    for text in [
        "  -p, --password[=name]\n",
        "mysql --password ",
        "mysql --password --user admin",
        "password=\"\" user=ci",
        "password=; user=ci",
    ] {
        assert_eq!(redact(text), text);
    }
}

// --- URL passwords -------------------------------------------------------

// R6.6: only `user:password@` in a URL is a password; a `host:port` is
// not, at the end of the text neither (kills `&&` for `||` in
// `url_passwords`, which masked ports and indexed past the end).
#[test]
fn a_url_port_is_not_a_password() {
    assert_eq!(
        redact("fetch https://bot:s3cr3t@example.com/x"),
        "fetch https://bot:[REDACTED]@example.com/x"
    );
    for text in ["GET http://localhost:8080/health ok", "see http://host:80"] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: a URL with an empty password (`user:@host`) has nothing to mask,
// and the output is not altered (kills `>` for `>=` in `url_passwords`,
// which inserted `[REDACTED]` into the URL).
#[test]
fn a_url_with_an_empty_password_is_left_alone() {
    let text = "git clone https://bot:@example.com/repo.git";
    assert_eq!(redact(text), text);
}

// --- Terminal control (`clean_output`) -----------------------------------

// R6.6: the output shown to a monitor has carriage returns folded: CRLF is
// one line break, a lone CR (a progress bar redraw) is a line break too
// (kills `!=` for `==` in `clean_output`).
#[test]
fn carriage_returns_become_single_line_breaks() {
    assert_eq!(clean_output(b"a\r\nb\rc\n"), "a\nb\nc\n");
}

// R6.6: colour and cursor sequences (CSI, as cargo and pytest print them)
// and window titles (OSC, ended by BEL or ESC \\) leave no trace in what the
// monitor reads; the text around them stays.
#[test]
fn escape_sequences_are_dropped_whole() {
    assert_eq!(
        clean_output(b"\x1b[1m\x1b[32m   Compiling\x1b[0m core v0.1.0\n"),
        "   Compiling core v0.1.0\n"
    );
    assert_eq!(clean_output(b"\x1b[2K\x1b[1Gdone\n"), "done\n");
    assert_eq!(clean_output(b"\x1b]0;build\x07ok\n"), "ok\n");
    assert_eq!(clean_output(b"\x1b]0;build\x1b\\ok\n"), "ok\n");
}
