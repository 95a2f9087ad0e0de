#!/usr/bin/env python3
"""A scripted stand-in for a model API on loopback (Anthropic Messages, OpenAI Responses,
Gemini streamGenerateContent), for driving a real coding agent end to end in tests.

It is not a model: it replays a fixed list of tool calls (the SCRIPT below, or the JSON file
named by --script), one per model turn. It is stateless: the number of tool results already in
the request tells which call comes next, so retries and side requests (titles, token counts)
do not disturb it. Only requests that offer airlock's tools advance the script; any other
request gets a short text answer. Each tool result the client sends back is appended once to
--log as a JSON line {"step", "tool", "is_error", "text"}, with the tool names the client
offered; the test reads that log.

Usage: model_standin.py --api anthropic|openai|gemini --port-file FILE --log FILE [--script F]
"""

import argparse
import http.server
import json
import sys
import threading

SCRIPT = []
LOG = None
LOCK = threading.Lock()
LOGGED = set()


def airlock_name(offered, tool):
    """The client's name for airlock's `tool` among the offered names."""
    for name in offered:
        if "airlock" in name and (name.endswith("__" + tool) or name.endswith("_" + tool)):
            return name
    for name in offered:
        if name == tool:
            return name
    return None


def record(step, tool, is_error, text, offered):
    with LOCK:
        if step in LOGGED:
            return
        LOGGED.add(step)
        with open(LOG, "a") as f:
            f.write(json.dumps({"step": step, "tool": tool, "is_error": is_error,
                                "text": text, "offered": sorted(offered)}) + "\n")


def next_call(offered, results):
    """(tool name as offered, airlock tool, args) of the next call, or None when done."""
    for i, (step_result, is_error) in enumerate(results):
        if i < len(SCRIPT):
            record(i, SCRIPT[i][0], is_error, step_result, offered)
    n = len(results)
    if n >= len(SCRIPT):
        return None
    tool, args = SCRIPT[n]
    name = airlock_name(offered, tool)
    if name is None:
        record(n, tool, True, "the client did not offer airlock's %s" % tool, offered)
        return None
    return name, args


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content)
    if isinstance(content, dict):
        if "text" in content:
            return content["text"]
        if "content" in content:
            return text_of(content["content"])
        if "output" in content:
            return text_of(content["output"])
        return json.dumps(content)
    return json.dumps(content)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send(self, code, obj, ctype="application/json"):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events):
        data = b"".join(
            (("event: %s\n" % ev) if ev else "").encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"
            for ev, obj in events)
        self.send(200, data, "text/event-stream")

    def do_GET(self):
        self.send(200, {"data": [], "models": []})

    def do_HEAD(self):
        self.send(200, b"")

    def do_POST(self):
        req = self.body()
        path = self.path
        if API == "anthropic":
            return self.anthropic(req, path)
        if API == "openai":
            return self.openai(req, path)
        return self.gemini(req, path)

    # -- Anthropic Messages ---------------------------------------------------------------
    def anthropic(self, req, path):
        if "count_tokens" in path:
            return self.send(200, {"input_tokens": 10})
        offered = [t.get("name", "") for t in req.get("tools") or []]
        results = []
        for m in req.get("messages") or []:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        results.append((text_of(b.get("content", "")), bool(b.get("is_error"))))
        call = next_call(offered, results) if airlock_name(offered, "read_file") else None
        n = len(results)
        if call:
            block = {"type": "tool_use", "id": "toolu_%02d" % n, "name": call[0], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(call[1])}]
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": "Done."}]
            stop = "end_turn"
        msg = {"id": "msg_%02d" % n, "type": "message", "role": "assistant",
               "model": req.get("model", "stand-in"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
        if not req.get("stream"):
            full = dict(block)
            if call:
                full["input"] = call[1]
            else:
                full["text"] = "Done."
            msg.update(content=[full], stop_reason=stop)
            return self.send(200, msg)
        events = [("message_start", {"type": "message_start", "message": msg}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": block})]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
                   for d in deltas]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 1}}),
                   ("message_stop", {"type": "message_stop"})]
        self.sse(events)

    # -- OpenAI Responses -----------------------------------------------------------------
    def openai(self, req, path):
        offered = []
        namespaced = {}
        for t in req.get("tools") or []:
            offered.append(t.get("name") or t.get("function", {}).get("name", ""))
            for sub in t.get("tools") or []:  # a namespace of tools (Codex's MCP servers)
                full = "%s__%s" % (t.get("name", ""), sub.get("name", ""))
                namespaced[full] = (t.get("name", ""), sub.get("name", ""))
                offered.append(full)
        results = []
        for item in req.get("input") or []:
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                out = item.get("output")
                results.append((text_of(out), False))
        call = next_call(offered, results) if airlock_name(offered, "read_file") else None
        n = len(results)
        rid = "resp_%02d" % n
        if call:
            item = {"type": "function_call", "id": "fc_%02d" % n, "call_id": "call_%02d" % n,
                    "name": call[0], "arguments": json.dumps(call[1]), "status": "completed"}
            if call[0] in namespaced:
                item["namespace"], item["name"] = namespaced[call[0]]
        else:
            item = {"type": "message", "role": "assistant", "id": "msg_%02d" % n,
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 11}
        self.sse([
            ("response.created", {"type": "response.created",
                                  "response": {"id": rid, "status": "in_progress"}}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed",
                                    "response": {"id": rid, "status": "completed",
                                                 "output": [item], "usage": usage}}),
        ])

    # -- Gemini ---------------------------------------------------------------------------
    def gemini(self, req, path):
        if ":countTokens" in path:
            return self.send(200, {"totalTokens": 10})
        offered = []
        for t in req.get("tools") or []:
            for fd in t.get("functionDeclarations") or []:
                offered.append(fd.get("name", ""))
        results = []
        for c in req.get("contents") or []:
            for p in c.get("parts") or []:
                if "functionResponse" in p:
                    r = p["functionResponse"].get("response", {})
                    results.append((text_of(r), "error" in r))
        call = next_call(offered, results) if airlock_name(offered, "read_file") else None
        if call:
            part = {"functionCall": {"name": call[0], "args": call[1]}}
        elif "generationConfig" in req and (req["generationConfig"] or {}).get("responseJsonSchema"):
            part = {"text": json.dumps({"reasoning": "done", "next_speaker": "user"})}
        else:
            part = {"text": "Done."}
        resp = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1,
                                  "totalTokenCount": 11},
                "modelVersion": "gemini-2.5-pro"}
        if "alt=sse" in path or "streamGenerateContent" in path:
            return self.sse([(None, resp)])
        self.send(200, resp)


def main():
    global API, LOG, SCRIPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True, choices=["anthropic", "openai", "gemini"])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--script", required=True)
    a = ap.parse_args()
    API, LOG = a.api, a.log
    SCRIPT = [tuple(s) for s in json.load(open(a.script))]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(a.port_file + ".tmp", a.port_file)
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
