"""A loopback STAND-IN for an OpenAI-compatible chat-completions server, with injectable faults.

It is not a language model: it looks the problem up and answers with the rule teacher's trace
(after a short ``<think>`` note, as reasoning models do). Tests use it to drive
``pr1lib.data.chat_teacher.OpenAITeacher`` through real HTTP, and to play the faults a real server
shows (``FAULTS``); notebook 02 uses it where no real model is available.

>>> FAULTS
('429', '500', '401', 'timeout', 'malformed', 'truncated', 'bad_status', 'surrogate', 'trickle')
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

from pr1lib.worlds.teachers import RuleTeacher

# What each fault does to one request (the next request is served normally unless planned too):
# 429 / 500 / 401 - that status (429 and 500 with Retry-After); timeout - wait hang_s, then answer;
# malformed - 200 with a body that is not JSON; truncated - 200 that stops halfway through its
# body; bad_status - a status line that is not HTTP; surrogate - content with a lone surrogate
# (valid JSON, not writable as UTF-8); trickle - the answer one byte every trickle_s seconds.
FAULTS = (
    "429",
    "500",
    "401",
    "timeout",
    "malformed",
    "truncated",
    "bad_status",
    "surrogate",
    "trickle",
)
THINKING = "<think>stand-in server: no model here, the rule teacher wrote this</think>\n\n"


def question_from_prompt(content: str) -> str:
    """The problem inside a v3 / tiny / baseline prompt (the text after the last ``Problem:``).

    >>> from pr1lib.format.prompts import prompt_text
    >>> question_from_prompt(prompt_text("What is 2+3?", "tiny"))
    'What is 2+3?'
    """
    _, sep, tail = content.rpartition("Problem:")
    tail = tail if sep else content
    tail = tail.rsplit("\nSolution:", 1)[0]
    return tail.split(" Let's think step by step", 1)[0].strip()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released), to test connection refused.

    >>> 0 < closed_port() < 65536
    True
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandInServer:
    """A stand-in server on 127.0.0.1 (ephemeral port); use it as a context manager.

    ``faults`` are played one per request, in arrival order, before normal service; ``plan``
    maps a problem id to the faults its own requests get, in order (deterministic under
    concurrency). ``requests`` counts requests, ``asked`` lists their problem ids ("?" for an
    unknown question) and ``arrivals`` their ``time.monotonic()``. ``retry_after`` is the
    Retry-After header of 429 and 500 answers (``None``: no header).
    """

    def __init__(
        self,
        problems: Iterable[dict] = (),
        teacher: Any = None,
        faults: Iterable[str] = (),
        plan: dict[str, Iterable[str]] | None = None,
        hang_s: float = 2.0,
        trickle_s: float = 1.0,
        retry_after: str | None = "0.1",
    ):
        self.by_question = {p["question"].strip(): p for p in problems}
        self.teacher = teacher or RuleTeacher()
        self.faults = list(faults)
        self.plan = {key: list(value) for key, value in (plan or {}).items()}
        unknown = {
            f
            for f in [*self.faults, *(f for fs in self.plan.values() for f in fs)]
            if f not in FAULTS
        }
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; choose from {', '.join(FAULTS)}")
        self.hang_s, self.trickle_s, self.retry_after = hang_s, trickle_s, retry_after
        self.requests, self.asked, self.arrivals, self.closing = 0, [], [], False
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "StandInServer":
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StandInHandler)
        self.httpd.daemon_threads = True
        self.httpd.standin = self
        # a short poll: shutdown() waits for the loop's next look (0.5 s by default)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closing = True  # ends a trickle or a hang still in progress
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_fault(self, problem_id: str) -> str | None:
        """Count the request and pick its fault: the problem's plan first, then the queue."""
        with self.lock:
            self.requests += 1
            self.asked.append(problem_id)
            self.arrivals.append(time.monotonic())
            planned = self.plan.get(problem_id)
            if planned:
                return planned.pop(0)
            return self.faults.pop(0) if self.faults else None

    def problem(self, content: str) -> dict | None:
        return self.by_question.get(question_from_prompt(content))

    def answer(self, problem: dict | None) -> str:
        if problem is None:
            return "I do not know this problem.\nFinal Answer: unknown"
        return THINKING + self.teacher.generate([problem])[0]["text"]

    def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False when the server is closing meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.closing:
                return False
            time.sleep(min(0.02, end - time.monotonic()))
        return not self.closing


def completion_body(content: str, model: Any, number: int) -> bytes:
    """A chat-completions response body (``ensure_ascii`` escapes a lone surrogate as
    ``\\ud800``)."""
    reply = {
        "id": f"standin-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": model or "stand-in",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": content},
            }
        ],
    }
    return json.dumps(reply).encode()


class _StandInHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test and notebook output clean
        pass

    def _head(self, code: int, length: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self._head(code, len(body), headers)
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def do_POST(self) -> None:  # http.server's naming
        standin: StandInServer = self.server.standin
        length = min(int(self.headers.get("Content-Length", 0)), 1 << 20)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
            content = request["messages"][-1]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return self._send(400, b'{"error": "expected a chat-completions request"}')
        if not self.path.endswith("/chat/completions"):
            return self._send(404, b'{"error": "not found"}')
        problem = standin.problem(content)
        fault = standin.next_fault(problem["id"] if problem else "?")
        self._play(standin, fault, problem, request.get("model"))

    def _play(
        self, standin: StandInServer, fault: str | None, problem: dict | None, model: Any
    ) -> None:
        """Answer one request, playing ``fault`` (see ``FAULTS``)."""
        if fault in ("429", "500", "401"):
            wait = {} if standin.retry_after is None else {"Retry-After": standin.retry_after}
            return self._send(int(fault), b'{"error": "%s"}' % fault.encode(), wait)
        if fault == "malformed":
            return self._send(200, b'{"choices": [ this is not JSON')
        if fault == "bad_status":
            self.close_connection = True
            return self._raw(b"HTTP/1.1 twohundred OK\r\n\r\n")
        if fault == "timeout" and not standin.pause(standin.hang_s):
            return None
        text = standin.answer(problem)
        if fault == "surrogate":  # right after the thinking, so it reaches the trace
            text = text.replace("</think>\n\n", "</think>\n\n\ud800 ", 1)
        body = completion_body(text, model, standin.requests)
        if fault == "truncated":
            self.close_connection = True
            return self._partial(body)
        if fault == "trickle":
            return self._trickle(standin, body)
        return self._send(200, body)

    def _raw(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _partial(self, body: bytes) -> None:
        """Promise the whole body, send half, and hang up (an ``IncompleteRead`` for the client)."""
        try:
            self._head(200, len(body))
            self.wfile.write(body[: len(body) // 2])
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _trickle(self, standin: StandInServer, body: bytes) -> None:
        """One byte every ``trickle_s`` seconds: every read succeeds, so only a deadline ends it."""
        try:
            self._head(200, len(body))
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                if not standin.pause(standin.trickle_s):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass
