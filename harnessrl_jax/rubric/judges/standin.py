"""A local stand-in of an OpenAI-compatible judge server (POST /v1/chat/completions, and SGLang's native POST
/generate over a prompt or a list of them), for tests and benchmarks that need a server which answers fast and
deterministically, slowly, or not at all.

    server = StandInServer(latency_s=0.2)           # a slow remote judge
    judge = OpenAIJudge(server.base_url, "standin")
    server.mode = "drop"                            # every connection closed unanswered ('503': Service Unavailable)
    server.fail_after = 40                          # requests after the 40th dropped (the server dies there)
    server.stop(); server.start()                   # the port closed (connection refused), then open again
    with StandInProcess() as server: ...            # one in a child process: a benchmarked client pays none of its time

Verdicts follow this package's prompts: a criterion is met when every term it quotes occurs in the response,
case-insensitively, else when the response's length is even (`standin_verdict`); it is answered in the verdict
schema's JSON, or in words for a criterion marked '(in words)', or unreadably for one marked '(unreadable)'. The
hacking check answers 'not spurious', the LLM proposer 'no action', the pairwise oracle prefers more letters 'q'.
Requests are recorded (`requests`, `by_prompt`, `max_inflight`); with `api_key` set, a request without its Bearer
key gets 401.
"""

from __future__ import annotations

import collections
import http.server
import json
import multiprocessing
import re
import socket
import threading
from typing import Any

MODES = ("up", "drop", "503")
_DUMPS = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(obj, ensure_ascii=False), one encoder for all
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")


def quoted_terms(criterion: str) -> list[str]:
    """The terms a criterion quotes ('q', "buenos días")."""
    return [a or b for a, b in _QUOTED.findall(criterion)]


def standin_verdict(criterion: str, response: str) -> bool:
    """The stand-in's verdict: every quoted term occurs in the response (case-insensitive); with none, an even
    response length."""
    terms = quoted_terms(criterion)
    if terms:
        return all(t.lower() in response.lower() for t in terms)
    return len(response) % 2 == 0


def _between(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    return text[i + len(start): j if j >= 0 else None]


def _section(prompt: str, header: str) -> str:
    """The text under a template's header, up to the next header or the closing reply instructions: the
    templates may order their sections either way."""
    body = _between(prompt, header, "\n\n# ") or ""
    return body.split("\n\nReply with", 1)[0]


def _criterion_text(line: str) -> str:
    """The criterion's own words from its rendered form '[+1 points] text' (llm.render_criterion)."""
    return re.sub(r"^\s*(\d+\.\s*)?\[[^\]]*points[^\]]*\]\s*", "", line).strip()


def answer(prompt: str) -> dict[str, Any] | str:
    """The stand-in's answer to one prompt of this package's templates: an object to send as JSON, or text."""
    if "# Responses that MEET the criterion" in prompt:  # evolver/prompts/hacking_check.txt
        return {"explanation": "stand-in", "pattern": "none", "phrase": "", "spurious": False}
    if '"actions"' in prompt and "rationale" in prompt:  # evolver/prompts/proposer.txt
        return {"rationale": "stand-in: no change", "actions": []}
    if "# Response A" in prompt and "# Response B" in prompt:  # eval/prompts/oracle_pairwise.txt
        a = _between(prompt, "# Response A\n", "\n\n# Response B") or ""
        b = _between(prompt, "# Response B\n", "\n\n# How to decide") or ""
        qa, qb = a.count("q"), b.count("q")
        return {"reasoning": "counted the q's", "winner": "A" if qa > qb else "B" if qb > qa else "tie"}
    response = _between(prompt, "<response>\n", "\n</response>")
    if response is None:
        response = _between(prompt, "# Response to grade\n", "\n\n# Criteri") or ""
    if "# Criteria\n" in prompt:  # rubric/prompts/rubric.txt
        listing = _section(prompt, "# Criteria\n")
        lines = [line for line in listing.splitlines() if re.match(r"\s*\d+\.", line)]
        return {str(n): {"explanation": "stand-in", "criteria_met": standin_verdict(_criterion_text(line), response)}
                for n, line in enumerate(lines, 1)}
    criterion = _criterion_text(_section(prompt, "# Criterion\n"))
    met = standin_verdict(criterion, response)
    if "(unreadable)" in criterion:
        return "I cannot grade this."
    if "(in words)" in criterion:
        return "MET" if met else "NOT MET: stand-in"
    return {"explanation": "stand-in", "criteria_met": met}


def _text(answer: dict[str, Any] | str) -> str:
    return answer if isinstance(answer, str) else _DUMPS(answer)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # start() after stop() takes the same port
    request_queue_size = 256  # a judge's whole pool may connect at once

    def handle_error(self, request, client_address):  # a client that died mid-request is no server error
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class StandInServer:
    """A threaded stand-in server on 127.0.0.1 (a free port unless given); see the module docstring."""

    def __init__(self, *, latency_s: float = 0.0, mode: str = "up", api_key: str | None = None, port: int = 0,
                 fail_after: int | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.latency_s, self.mode, self.api_key = latency_s, mode, api_key
        self.fail_after = fail_after  # requests after this many are dropped, as if the server died there
        self.echo_auth = False  # error pages show the request's Authorization header (as some proxies do)
        self.requests = 0
        self.by_prompt: collections.Counter = collections.Counter()
        self.inflight = self.max_inflight = 0
        self.lock = threading.Lock()
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self.port = port
        self.httpd: _HTTPServer | None = None
        self.start()

    @property
    def base_url(self) -> str:
        """The URL an OpenAIJudge takes (with /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The URL an SGLangJudge takes (the server's root)."""
        return f"http://127.0.0.1:{self.port}"

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with server.lock:
                    server._connections.add(self.connection)

            def finish(self):
                with server.lock:
                    server._connections.discard(self.connection)
                super().finish()

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):  # /v1/models, as checks.needs probes it
                self._send(200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                native = self.path.rstrip("/") == "/generate"  # SGLang's native route: a prompt or a list
                if native:
                    texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
                else:
                    texts = [body["messages"][-1]["content"]]
                with server.lock:
                    server.requests += 1
                    late = server.fail_after is not None and server.requests > server.fail_after
                    server.by_prompt.update(texts)
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    if server.mode == "drop" or late:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    seen = f" (request header Authorization: {self.headers.get('authorization')})" \
                        if server.echo_auth else ""
                    if server.mode == "503":
                        return self._send(503, {"error": {"message": f"stand-in: service unavailable{seen}"}})
                    if server.api_key is not None and self.headers.get("authorization") != f"Bearer {server.api_key}":
                        return self._send(401, {"error": {"message": f"stand-in: missing or wrong API key{seen}"}})
                    if server.latency_s:
                        server._closing.wait(server.latency_s)
                    if native:
                        items = [{"text": _text(answer(t)),
                                  "meta_info": {"id": str(n), "finish_reason": {"type": "stop", "matched": 0},
                                                "prompt_tokens": len(t.split()), "completion_tokens": 8}}
                                 for n, t in enumerate(texts)]
                        return self._send(200, items if isinstance(body["text"], list) else items[0])
                    prompt = texts[0]
                    content = _text(answer(prompt))
                    self._send(200, {"id": "standin", "object": "chat.completion", "model": body.get("model", ""),
                                     "choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": content}}],
                                     "usage": {"prompt_tokens": len(prompt.split()),
                                               "completion_tokens": len(content.split())}})
                finally:
                    with server.lock:
                        server.inflight -= 1

        return Handler

    def start(self) -> None:
        """Listens (again) on the port: the server is up."""
        if self.httpd is not None:
            return
        self._closing.clear()
        self.httpd = _HTTPServer(("127.0.0.1", self.port), self._handler())
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        """Closes the port: connections are refused until `start`."""
        if self.httpd is None:
            return
        self._closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:  # kept-alive connections die with the server
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections.clear()
        self.httpd = None

    def close(self) -> None:
        self.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _serve_child(conn, kwargs) -> None:
    import time

    with StandInServer(**kwargs) as server:
        conn.send(server.port)
        while (what := conn.recv()) != "stop":
            conn.send(server.requests if what == "requests" else time.process_time())


class StandInProcess:
    """A StandInServer (settings as its constructor's) in a child process with its own interpreter: the URLs, the
    request count and the CPU time of one, none of its time spent in this process."""

    def __init__(self, **kwargs):
        spawn = multiprocessing.get_context("spawn")  # a fresh interpreter, whatever threads this process runs
        self._conn, child = spawn.Pipe()
        self._process = spawn.Process(target=_serve_child, args=(child, kwargs), daemon=True)
        self._process.start()
        self.port = self._conn.recv()

    base_url, root_url = StandInServer.base_url, StandInServer.root_url

    def _ask(self, what: str):
        self._conn.send(what)
        return self._conn.recv()

    @property
    def requests(self) -> int:
        return self._ask("requests")

    @property
    def cpu_s(self) -> float:
        """The child's CPU seconds so far (every thread of the server)."""
        return self._ask("cpu_s")

    def close(self) -> None:
        if self._process.is_alive():
            self._conn.send("stop")
            self._process.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
