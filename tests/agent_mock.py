#!/usr/bin/env python3
"""A scripted model server on loopback for tests/real_agent_clis.rs (R5.10).

It speaks just enough of two streaming APIs for a real agent CLI to run one
turn against it: the Anthropic Messages API (`POST /v1/messages`, SSE, for
Claude Code through ANTHROPIC_BASE_URL) and the OpenAI Responses API
(`POST /v1/responses`, SSE, for Codex through a custom model provider).

The script, chosen by the first argument:
  tool        the first request gets a shell tool call (`sleep 4`); a request
              that carries the tool's result gets a short text answer.
  background  the same, but the call asks Claude Code's Bash tool to run
              `sleep 6` in the background (`run_in_background: true`).
  hang        the response starts streaming, then sends nothing more until
              the client goes away.
  stop        a background `sleep 30` as in `background`; once its result
              names the task id, a TaskStop call for it; then text.
  approve     the first request gets a shell tool call that needs the
              user's approval (`touch approved`); the request that carries
              its result starts streaming, then hangs as in `hang`.
  compact     every request gets a short text answer; Claude Code's request
              for a summary of the conversation (`/compact`) waits 4 s in
              silence first.

It prints `PORT <n>` on stdout once listening, and one line per request on
stderr (method, path, what it answered). Standard library only.
"""

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = sys.argv[1] if len(sys.argv) > 1 else "tool"
SHELL = {"background": "sleep 6", "stop": "sleep 30", "approve": "touch approved"}.get(SCRIPT, "sleep 4")


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def has_tool_result(body):
    """True when the request carries a tool's result (Anthropic or OpenAI)."""
    for m in body.get("messages", []) or []:
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return True
    for item in body.get("input", []) or []:
        if isinstance(item, dict) and item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            return True
    return False


def last_text(body):
    """The text of the request's last message, for scripts that match it."""
    messages = body.get("messages") or []
    if not messages:
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def background_id(body):
    """The task id in the last tool result ("... with ID: b9miywpi3."), if
    no TaskStop call was made yet."""
    text = json.dumps(body.get("messages", []))
    if '"name": "TaskStop"' in text:
        return None
    m = re.search(r"running in background with ID: ([A-Za-z0-9_-]+)", text)
    return m.group(1) if m else None


def is_compaction(body):
    """True for Claude Code's request for a summary of the conversation."""
    return "summary of the conversation" in json.dumps(body).lower()


def tool_names(body):
    names = []
    for t in body.get("tools", []) or []:
        if isinstance(t, dict):
            names.append(t.get("name") or (t.get("function") or {}).get("name") or t.get("type"))
    return names


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet default access log
        pass

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def do_GET(self):
        # Model lists and other lookups: an empty, well-formed answer.
        self.json(200, {"data": [], "models": [], "object": "list"})
        log("GET", self.path)

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.read_body()
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self.json(200, {"input_tokens": 10})
            log("POST", path, "count_tokens")
        elif path.endswith("/messages"):
            self.anthropic(body)
        elif path.endswith("/responses"):
            self.openai_responses(body)
        elif path.endswith(":streamGenerateContent"):
            self.gemini(body)
        elif path.endswith(":countTokens"):
            self.json(200, {"totalTokens": 10})
        elif path.endswith(":generateContent"):
            self.json(200, {"candidates": [{"content": {"role": "model", "parts": [{"text": "{}"}]},
                                            "finishReason": "STOP"}]})
            log("POST", path, "generateContent")
        else:
            self.json(404, {"error": {"message": "not here", "type": "not_found"}})
            log("POST", path, "404")

    def json(self, code, value):
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event, data):
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def hang(self):
        # Keep the connection open and silent until the client leaves.
        try:
            while True:
                time.sleep(0.5)
                self.wfile.flush()
        except OSError:
            pass

    # --- Anthropic Messages -------------------------------------------------

    def anthropic(self, body):
        model = body.get("model", "mock")
        wants_tool = "Bash" in tool_names(body) and not has_tool_result(body)
        answer = "hang" if SCRIPT == "hang" and "Bash" in tool_names(body) else (
            "tool" if wants_tool and SCRIPT != "compact" else "text")
        if SCRIPT == "approve" and has_tool_result(body):
            answer = "hang"
        stop_id = background_id(body) if SCRIPT == "stop" else None
        if stop_id:
            answer = "stop"
        if SCRIPT == "compact" and is_compaction(body):
            time.sleep(4)  # a silent 4 s compaction
        log("POST /v1/messages", "stream" if body.get("stream") else "plain", answer,
            repr(last_text(body)[:60]), "summary" if is_compaction(body) else "")
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not body.get("stream"):
            self.json(200, {
                "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": None, "usage": usage,
            })
            return
        self.sse_start()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": "msg_mock_%d" % time.monotonic_ns(), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}})
        if answer == "hang":
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": "Thinking"}})
            self.hang()
            return
        if answer in ("tool", "stop"):
            name, args = "Bash", {"command": SHELL, "description": "Wait"}
            if SCRIPT in ("background", "stop"):
                args["run_in_background"] = True
            if answer == "stop":
                name, args = "TaskStop", {"task_id": stop_id}
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "tool_use", "id": "toolu_mock_%d" % time.monotonic_ns(),
                                                               "name": name, "input": {}}})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}})
            self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            stop = "tool_use"
        else:
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": "Done."}})
            self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            stop = "end_turn"
        self.sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 5}})
        self.sse("message_stop", {"type": "message_stop"})

    # --- OpenAI Responses ---------------------------------------------------

    def openai_responses(self, body):
        names = tool_names(body)
        wants_tool = not has_tool_result(body)
        answer = "hang" if SCRIPT == "hang" else ("tool" if wants_tool else "text")
        log("POST /v1/responses", "tools=%s" % ",".join(str(n) for n in names), answer)
        rid = "resp_mock_%d" % time.monotonic_ns()
        self.sse_start()
        base = {"id": rid, "object": "response", "created_at": int(time.time()),
                "model": body.get("model", "mock"), "output": [], "status": "in_progress"}
        self.sse("response.created", {"type": "response.created", "response": base})
        if answer == "hang":
            self.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "item": {"type": "message", "id": "msg_1", "role": "assistant",
                                                             "status": "in_progress", "content": []}})
            self.sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_1",
                                                    "output_index": 0, "content_index": 0, "delta": "Thinking"})
            self.hang()
            return
        if answer == "tool":
            if "exec_command" in names:
                name, args = "exec_command", {"cmd": SHELL}
            else:
                name, args = "shell", {"command": ["bash", "-lc", SHELL]}
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_mock_%d" % time.monotonic_ns(),
                    "name": name, "arguments": "", "status": "in_progress"}
            self.sse("response.output_item.added", {"type": "response.output_item.added",
                                                    "output_index": 0, "item": item})
            text = json.dumps(args)
            self.sse("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": "fc_1",
                "output_index": 0, "delta": text})
            done = dict(item, arguments=text, status="completed")
            self.sse("response.output_item.done", {"type": "response.output_item.done",
                                                   "output_index": 0, "item": done})
            output = [done]
        else:
            msg = {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
            self.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "item": dict(msg, content=[], status="in_progress")})
            self.sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_2",
                                                    "output_index": 0, "content_index": 0, "delta": "Done."})
            self.sse("response.output_item.done", {"type": "response.output_item.done",
                                                   "output_index": 0, "item": msg})
            output = [msg]
        done = dict(base, status="completed", output=output,
                    usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                           "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens_details": {"reasoning_tokens": 0}})
        self.sse("response.completed", {"type": "response.completed", "response": done})


def gemini_has_result(body):
    for c in body.get("contents", []) or []:
        for p in c.get("parts", []) or []:
            if isinstance(p, dict) and "functionResponse" in p:
                return True
    return False


def gemini_chunk(self, parts, finish=None):
    cand = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    chunk = {"candidates": [cand],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
    self.wfile.write(("data: " + json.dumps(chunk) + "\r\n\r\n").encode())
    self.wfile.flush()


def gemini(self, body):
    """Gemini `streamGenerateContent?alt=sse` (Gemini CLI)."""
    answer = "hang" if SCRIPT == "hang" else ("text" if gemini_has_result(body) else "tool")
    log("POST :streamGenerateContent", answer)
    self.sse_start()
    if answer == "hang":
        gemini_chunk(self, [{"text": "Thinking"}])
        self.hang()
        return
    if answer == "tool":
        gemini_chunk(self, [{"functionCall": {"name": "run_shell_command",
                                              "args": {"command": SHELL, "description": "Wait"}}}], "STOP")
    else:
        gemini_chunk(self, [{"text": "Done."}], "STOP")


Handler.gemini = gemini


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    # End with the parent: stdin closes when the test drops its handle.
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
