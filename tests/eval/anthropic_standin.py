"""A local stand-in of Anthropic's Messages API (POST /v1/messages) for the oracle tests, failing the usual ways.

It answers a pairwise oracle prompt with a `record_verdict` tool call: the response with more letters 'q' wins,
equal counts tie, and when both responses contain BIAS it always picks the first shown (position bias). `faults`
is consumed one request at a time: 429 (rate limit, retry-after 0), 529 (overloaded), 500 (api error),
'timeout' (answers after `slow_s`), 'ok'. Token usage is reported as the prompt's and the answer's word counts.
"""

import http.server
import json
import threading
import time


def verdict(prompt: str) -> str:
    a = prompt.split("# Response A\n", 1)[1].split("\n\n# Response B\n", 1)[0]
    b = prompt.split("\n\n# Response B\n", 1)[1].split("\n\n# How to decide", 1)[0]
    if "BIAS" in a and "BIAS" in b:
        return "A"
    qa, qb = a.count("q"), b.count("q")
    return "A" if qa > qb else "B" if qb > qa else "tie"


class StandIn:
    def __init__(self, faults=(), slow_s: float = 1.0, fail_on: str | None = None):
        self.faults, self.slow_s, self.fail_on = list(faults), slow_s, fail_on
        self.requests, self.usage, self.lock = [], {"input_tokens": 0, "output_tokens": 0}, threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                prompt = body["messages"][0]["content"]
                with outer.lock:
                    outer.requests.append(body)
                    fault = outer.faults.pop(0) if outer.faults else "ok"
                if outer.fail_on and outer.fail_on in prompt:
                    fault = 500
                if fault == "timeout":  # the client has given up by the time this is sent
                    time.sleep(outer.slow_s)
                    fault = 500
                if fault in (429, 529, 500):
                    kind = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}[fault]
                    return self._send(fault, {"type": "error", "error": {"type": kind, "message": kind}},
                                      [("retry-after", "0")] if fault == 429 else [])
                winner = verdict(prompt)
                usage = {"input_tokens": len(prompt.split()), "output_tokens": 7}
                with outer.lock:
                    for k in usage:
                        outer.usage[k] += usage[k]
                tool = body["tools"][0]["name"]
                self._send(200, {"id": "msg_standin", "type": "message", "role": "assistant",
                                 "model": body["model"], "stop_reason": "tool_use", "stop_sequence": None,
                                 "content": [{"type": "tool_use", "id": "toolu_standin", "name": tool,
                                              "input": {"reasoning": "counted the q's", "winner": winner}}],
                                 "usage": usage})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
