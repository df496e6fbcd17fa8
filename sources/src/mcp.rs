//! MCP progress notifications (R5.8).
//!
//! [`McpProgress`] takes JSON-RPC messages as they arrive from an MCP server
//! and renews the task when a `notifications/progress` value rises for its
//! progress token (R2.6). Every other message is ignored; malformed ones are
//! typed rejections, counted on the task (`mcp.` keys, R10.6). Sending progress tokens with requests, and
//! ending a task when its request completes, is the runner's business.
//!
//! Rises are judged per token: two requests in flight each count their own
//! progress. The core's [`Recorder::progress`] keeps one maximum per task,
//! so when a token rises below another token's high-water mark the adapter
//! records the `progress` signal directly. The first value seen for a token
//! counts as a rise. Only a keyed 64-bit hash of each token is kept,
//! whatever its length.
//!
//! A token lives as long as its request (R5.8). The adapter reads both
//! directions of the session when it is given them: a request that carries
//! `params._meta.progressToken` ties the token to the request's id, and the
//! response or error to that id, or `notifications/cancelled` naming it,
//! retires the token. A response also retires a token equal to its id, as
//! the TypeScript SDK uses the request id as the token, so a runner that
//! feeds only the server's messages still sees tokens retired. Tokens never
//! retired are evicted oldest first past [`MAX_TOKENS`]; a new token is
//! never refused, so a session of any length keeps renewing.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use serde_json::Value;
use watchdog_core::{Recorder, SignalKind};

pub use crate::refusal::Step;
use crate::refusal::{count, refusals, refuse, Refusal};

/// The most progress tokens tracked at once; past this the oldest is
/// evicted, never a new one refused (R5.8).
pub const MAX_TOKENS: usize = 1024;

/// Why a message did not renew the task; every rejection is counted on the
/// task under `mcp.` and the reason (R10.6).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::mcp::McpRejection;
/// use stallwarden_sources::Refusal;
/// assert_eq!(McpRejection::BadToken.key(), "mcp.bad_token");
/// assert_eq!(McpRejection::NotRising.to_string(), "progress did not rise for its token");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum McpRejection {
    /// Not JSON (or not UTF-8).
    #[error("not valid JSON")]
    InvalidJson,
    /// Not a JSON-RPC 2.0 message (no `"jsonrpc": "2.0"`, not an object, or
    /// an empty batch).
    #[error("not a JSON-RPC 2.0 message")]
    NotJsonRpc,
    /// `params` missing or not an object.
    #[error("progress notification has no params object")]
    MalformedParams,
    /// `progressToken` missing or neither a string nor a number.
    #[error("progressToken must be a string or a number")]
    BadToken,
    /// `progress` missing, not a number, negative or not finite.
    #[error("progress must be a finite non-negative number")]
    BadProgress,
    /// `progress` equal to or below the token's last value (R2.6).
    #[error("progress did not rise for its token")]
    NotRising,
}

impl McpRejection {
    /// Every reason.
    pub const ALL: [McpRejection; 6] = [
        McpRejection::InvalidJson,
        McpRejection::NotJsonRpc,
        McpRejection::MalformedParams,
        McpRejection::BadToken,
        McpRejection::BadProgress,
        McpRejection::NotRising,
    ];
}

impl Refusal for McpRejection {
    /// `mcp.` and the reason, e.g. `mcp.not_rising`.
    fn key(&self) -> &'static str {
        match self {
            McpRejection::InvalidJson => "mcp.invalid_json",
            McpRejection::NotJsonRpc => "mcp.not_json_rpc",
            McpRejection::MalformedParams => "mcp.malformed_params",
            McpRejection::BadToken => "mcp.bad_token",
            McpRejection::BadProgress => "mcp.bad_progress",
            McpRejection::NotRising => "mcp.not_rising",
        }
    }
}

/// Renews a task on rising MCP progress notifications (R5.8).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::mcp::{McpProgress, McpRejection, Step};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("tool-call", Profile::default()).unwrap();
/// let mut mcp = McpProgress::new(task.recorder());
/// let note = |p: u32| format!(
///     r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t1","progress":{p},"total":100}}}}"#
/// );
/// assert_eq!(mcp.feed(&note(10)), Ok(Step::Renewed));
/// assert_eq!(mcp.feed(&note(10)), Err(McpRejection::NotRising));
/// assert_eq!(mcp.feed(&note(11)), Ok(Step::Renewed));
/// assert_eq!(mcp.feed(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Ok(Step::Ignored));
/// assert_eq!(mcp.rejections(McpRejection::NotRising), 1);
/// ```
pub struct McpProgress {
    recorder: Recorder,
    hasher: RandomState,
    /// Last value per token hash.
    tokens: HashMap<u64, Token>,
    /// Token keys with the sequence number they were created with, oldest
    /// first; an entry whose token is gone (or was re-created) is stale.
    order: VecDeque<(u64, u64)>,
    /// Request id key to the token key its request carried.
    requests: HashMap<u64, u64>,
    next_seq: u64,
}

/// What the adapter keeps of one live progress token.
#[derive(Clone, Copy, Debug)]
struct Token {
    /// The highest progress seen; `None` until the first notification.
    last: Option<f64>,
    seq: u64,
    /// The key of the request that carried it, when that request was seen.
    request: Option<u64>,
}

impl fmt::Debug for McpProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpProgress")
            .field("task", &self.recorder.id())
            .field("tokens", &self.tokens.len())
            .field("rejections", &refusals(&self.recorder, "mcp"))
            .finish()
    }
}

impl McpProgress {
    /// Creates an adapter renewing `recorder`'s task.
    pub fn new(recorder: Recorder) -> Self {
        McpProgress {
            recorder,
            hasher: RandomState::new(),
            tokens: HashMap::new(),
            order: VecDeque::new(),
            requests: HashMap::new(),
            next_seq: 0,
        }
    }

    /// Feeds one JSON-RPC message as text.
    pub fn feed(&mut self, message: &str) -> Result<Step, McpRejection> {
        self.feed_bytes(message.as_bytes())
    }

    /// Feeds one JSON-RPC message as raw bytes; invalid UTF-8 is
    /// [`McpRejection::InvalidJson`].
    pub fn feed_bytes(&mut self, message: &[u8]) -> Result<Step, McpRejection> {
        match serde_json::from_slice::<Value>(message) {
            Ok(v) => self.feed_value(&v),
            Err(_) => Err(self.reject(McpRejection::InvalidJson)),
        }
    }

    /// Feeds one parsed JSON-RPC message or batch. In a batch, the result is
    /// [`Step::Renewed`] if any notification renewed, else its first
    /// rejection; each rejection is counted.
    pub fn feed_value(&mut self, message: &Value) -> Result<Step, McpRejection> {
        match message {
            Value::Array(batch) if !batch.is_empty() => {
                let mut first_err = None;
                let mut renewed = false;
                for m in batch {
                    match self.one(m) {
                        Ok(Step::Renewed) => renewed = true,
                        Ok(Step::Ignored | Step::Tracked) => {}
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
                match (renewed, first_err) {
                    (true, _) => Ok(Step::Renewed),
                    (false, Some(e)) => Err(e),
                    (false, None) => Ok(Step::Ignored),
                }
            }
            m => self.one(m),
        }
    }

    /// Stops tracking `token` (a string or number), as when its request
    /// completed; returns whether it was tracked.
    pub fn forget(&mut self, token: &Value) -> bool {
        token_key(&self.hasher, token).is_some_and(|k| self.retire(k))
    }

    /// Returns how many tokens are tracked.
    pub fn tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Returns how many times the task counted `reason` (R10.6: read
    /// from the task, where every MCP adapter on it counts; 0 once the
    /// task finished).
    pub fn rejections(&self, reason: McpRejection) -> u64 {
        count(&self.recorder, reason.key())
    }

    /// Returns how many `mcp.` refusals the task counted, all reasons.
    pub fn total_rejections(&self) -> u64 {
        refusals(&self.recorder, "mcp").values().sum()
    }

    fn one(&mut self, m: &Value) -> Result<Step, McpRejection> {
        self.progress(m).map_err(|r| self.reject(r))
    }

    fn progress(&mut self, m: &Value) -> Result<Step, McpRejection> {
        if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(McpRejection::NotJsonRpc);
        }
        let method = match m.get("method") {
            None => {
                // A response or an error: its request is over.
                if m.get("result").is_some() || m.get("error").is_some() {
                    if let Some(id) = m.get("id").and_then(|id| token_key(&self.hasher, id)) {
                        self.request_over(id);
                    }
                }
                return Ok(Step::Ignored);
            }
            Some(method) => method.as_str().ok_or(McpRejection::NotJsonRpc)?,
        };
        match method {
            "notifications/progress" => {}
            "notifications/cancelled" => {
                let request = m
                    .get("params")
                    .and_then(|p| p.get("requestId"))
                    .and_then(|id| token_key(&self.hasher, id));
                if let Some(id) = request {
                    self.request_over(id);
                }
                return Ok(Step::Ignored);
            }
            _ => {
                // A request that asks for progress ties its token to its id.
                let token = m
                    .get("params")
                    .and_then(|p| p.get("_meta"))
                    .and_then(|meta| meta.get("progressToken"))
                    .and_then(|t| token_key(&self.hasher, t));
                let id = m.get("id").and_then(|id| token_key(&self.hasher, id));
                if let (Some(token), Some(id)) = (token, id) {
                    self.entry(token).request = Some(id);
                    self.requests.insert(id, token);
                }
                return Ok(Step::Ignored);
            }
        }
        let params = m
            .get("params")
            .filter(|p| p.is_object())
            .ok_or(McpRejection::MalformedParams)?;
        let key = params
            .get("progressToken")
            .and_then(|t| token_key(&self.hasher, t))
            .ok_or(McpRejection::BadToken)?;
        let value = params
            .get("progress")
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or(McpRejection::BadProgress)?;
        let token = self.entry(key);
        if token.last.is_some_and(|last| value <= last) {
            return Err(McpRejection::NotRising);
        }
        token.last = Some(value);
        if !self.recorder.progress(value) {
            // Rose for this token, not above another token's value.
            self.recorder.signal(SignalKind::Progress);
        }
        Ok(Step::Renewed)
    }

    /// Returns the live token `key`, creating it (and evicting the oldest
    /// past [`MAX_TOKENS`]) when it is new.
    fn entry(&mut self, key: u64) -> &mut Token {
        if !self.tokens.contains_key(&key) {
            while self.tokens.len() >= MAX_TOKENS {
                let Some((oldest, seq)) = self.order.pop_front() else {
                    break;
                };
                if self.tokens.get(&oldest).is_some_and(|t| t.seq == seq) {
                    tracing::debug!(task = %self.recorder.id(), "oldest mcp progress token evicted");
                    self.retire(oldest);
                }
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            self.order.push_back((key, seq));
            self.tokens.insert(
                key,
                Token {
                    last: None,
                    seq,
                    request: None,
                },
            );
            self.compact();
        }
        self.tokens.get_mut(&key).expect("inserted above")
    }

    /// Retires token `key` and its request link; returns whether it lived.
    fn retire(&mut self, key: u64) -> bool {
        match self.tokens.remove(&key) {
            Some(token) => {
                if let Some(request) = token.request {
                    self.requests.remove(&request);
                }
                true
            }
            None => false,
        }
    }

    /// Retires the token of the request whose id key is `id`, and a token
    /// equal to the id (the TypeScript SDK's choice of token).
    fn request_over(&mut self, id: u64) {
        if let Some(token) = self.requests.remove(&id) {
            self.retire(token);
        }
        self.retire(id);
    }

    /// Drops stale order entries once they outnumber the live tokens, so the
    /// queue stays within a small multiple of [`MAX_TOKENS`].
    fn compact(&mut self) {
        if self.order.len() > 2 * MAX_TOKENS {
            let tokens = &self.tokens;
            self.order
                .retain(|(key, seq)| tokens.get(key).is_some_and(|t| t.seq == *seq));
        }
    }

    fn reject(&mut self, reason: McpRejection) -> McpRejection {
        refuse(&self.recorder, reason)
    }
}

/// Hashes a string or number token; strings and numbers never collide.
fn token_key(hasher: &RandomState, token: &Value) -> Option<u64> {
    match token {
        Value::String(s) => Some(hasher.hash_one((0u8, s.as_str()))),
        // serde_json prints a number the same way each time it is parsed.
        Value::Number(n) => Some(hasher.hash_one((1u8, n.to_string()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchdog_core::{Guard, ManualClock, Profile};

    #[test]
    fn the_eviction_order_stays_within_twice_the_cap_however_many_tokens_pass() {
        // R5.8 (bounded memory), R9.1 (cost): ten times the cap of tokens
        // that come and go leave the queue no longer than its compaction
        // point, and it does reach that point: stale entries are dropped in
        // one pass once the queue passes twice the cap, so a pass over the
        // queue is paid once per 2 x MAX_TOKENS new tokens, never on each
        // (kills the issue-26 mutants of compact's threshold, `> 2 *
        // MAX_TOKENS` as `==`, `>=`, `<`, `2 + MAX_TOKENS`, `2 / MAX_TOKENS`).
        let guard = Guard::builder().clock(ManualClock::new()).build();
        let task = guard.start("order", Profile::default()).unwrap();
        let mut mcp = McpProgress::new(task.recorder());
        let mut longest = 0;
        for i in 0..10 * MAX_TOKENS {
            let token = Value::from(i);
            let message = serde_json::json!({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1.0},
            });
            assert_eq!(mcp.feed_value(&message), Ok(Step::Renewed));
            assert!(mcp.forget(&token));
            longest = longest.max(mcp.order.len());
        }
        assert_eq!(longest, 2 * MAX_TOKENS);
    }
}
