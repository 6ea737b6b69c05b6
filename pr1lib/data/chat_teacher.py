"""The OpenAI-compatible teacher: any chat-completions server (vLLM, SGLang, TGI, llama.cpp, a
hosted API).

It speaks through the ``openai`` package (the optional extra ``pip install 'pr1lib[teacher]'``),
whose async client brings the HTTP details, typed errors, timeouts and retries with backoff and
``Retry-After``. On top of that, per request: a wall-clock ``deadline`` (``asyncio.wait_for``
cancels the request, so a server that trickles a byte a second cannot hold it), and every failure
becomes that problem's trace, with ``error`` and a ``kind`` from ``FAILURE_KINDS``. Per run: a
rate limit, a concurrency limit, and a stop after ``max_consecutive_failures`` failed problems in
a row (``TeacherError`` carrying the traces finished so far, for the caller to keep).

>>> FAILURE_KINDS
('connection', 'protocol', 'timeout', 'deadline', 'rate_limited', 'server_error', 'rejected', 'bad_response')
"""  # noqa: E501 - doctest output / table rows stay whole

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from pr1lib.format.prompts import prompt_text
from pr1lib.worlds.teachers import TeacherError, make_trace, strip_thinking
from pr1lib.config.checks import url_problem

# connection: refused or dropped; protocol: a truncated body or a status line that is not HTTP;
# timeout: no byte for `timeout` s; deadline: the problem's wall-clock budget ran out; rejected:
# another 4xx for this request (e.g. a prompt over the context); bad_response: 200 but no content.
FAILURE_KINDS = (
    "connection",
    "protocol",
    "timeout",
    "deadline",
    "rate_limited",
    "server_error",
    "rejected",
    "bad_response",
)
FATAL_STATUS = (401, 403, 404)  # bad key, forbidden, unknown model or URL: no request can succeed


def _openai():
    """The ``openai`` module, imported on first use: it is an optional extra and slow to import."""
    try:
        import openai
    except ImportError:
        raise TeacherError(
            "the openai teacher needs the openai package: pip install 'pr1lib[teacher]' "
            "(or pip install 'openai>=1.40')"
        ) from None
    return openai


def run_async(coro: Awaitable) -> Any:
    """Run ``coro`` to the end from plain code, also where a loop already runs (a notebook cell).

    >>> async def two(): return 2
    >>> run_async(two())
    2
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Jupyter's loop owns this thread: use a fresh one beside it
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class RateLimiter:
    """At most ``per_minute`` request starts per minute, evenly spaced.

    >>> RateLimiter(0).wait()  # 0 means no limit
    0.0
    """

    def __init__(
        self,
        per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.clock, self.sleep, self.next = clock, sleep, 0.0
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Book the next start; returns the seconds to wait before it."""
        if not self.interval:
            return 0.0
        with self.lock:
            now = self.clock()
            start = max(now, self.next)
            self.next = start + self.interval
        return start - now

    def wait(self) -> float:
        """Block until this request may start; returns the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            self.sleep(delay)
        return delay


def describe_failure(
    err: BaseException, timeout: float = 0.0, deadline: float = 0.0
) -> tuple[str, str]:
    """``(kind, detail)`` for a request that failed after the client's retries.

    >>> describe_failure(asyncio.TimeoutError(), deadline=1.5)
    ('deadline', 'no complete answer within the 1.5 s deadline')
    """
    openai = _openai()
    cause = err.__cause__
    if isinstance(err, asyncio.TimeoutError):
        return "deadline", f"no complete answer within the {deadline:g} s deadline"
    if isinstance(err, openai.APITimeoutError):
        return (
            "timeout",
            f"no response byte within the {timeout:g} s timeout ({type(cause).__name__})",
        )
    if isinstance(err, openai.APIConnectionError):
        # by name: the client's HTTP layer is httpx in openai 1.x and httpx2 in 3.x
        kind = "protocol" if "ProtocolError" in type(cause).__name__ else "connection"
        return kind, f"{type(cause).__name__}: {cause}" if cause else str(err)
    if isinstance(err, openai.APIStatusError):
        kind = {429: "rate_limited"}.get(
            err.status_code, "server_error" if err.status_code >= 500 else "rejected"
        )
        return kind, f"HTTP {err.status_code}: {err.response.text[:200]}"
    return "bad_response", f"{type(err).__name__}: {str(err)[:200]}"


@dataclass
class _Streak:
    """Failed problems in a row (a success resets it); sets ``stop`` at the threshold."""

    limit: int
    kinds: list[str] = field(default_factory=list)
    stop: str = ""

    def record(self, trace: dict, where: str) -> None:
        if not trace.get("kind"):
            self.kinds.clear()
            return
        self.kinds.append(trace["kind"])
        if self.limit and len(self.kinds) >= self.limit and not self.stop:
            counts = ", ".join(f"{k} {n}" for k, n in Counter(self.kinds).most_common())
            self.stop = (
                f"stopped after {len(self.kinds)} requests in a row failed ({counts}) at {where}; "
                f"last: {trace['error']}. Finished traces are kept: rerun to resume"
            )


@dataclass
class OpenAITeacher:
    """Any chat-completions server: vLLM, SGLang, TGI, llama.cpp's server, or a hosted API.

    ``base_url`` (…/v1), ``model`` and ``api_key`` come from the arguments or from
    ``OPENAI_BASE_URL``, ``PR1_TEACHER_MODEL`` (or ``OPENAI_MODEL``) and ``OPENAI_API_KEY``.
    What each outcome does:

    - 200 with content: the trace is the message content after any ``</think>``;
    - 408, 409, 429, 5xx, a timeout (no byte for ``timeout`` s), a refused or dropped connection,
      a truncated body or a bad status line: the client retries up to ``max_retries`` times with
      exponential backoff (a ``Retry-After`` header wins); then the trace records the failure;
    - 200 whose body is not a completion, another 4xx, or the ``deadline`` (wall-clock seconds
      for one problem, retries included) running out: the trace records the failure at once;
    - 401, 403 or 404 (bad key, unknown model or URL), or ``max_consecutive_failures`` failed
      problems in a row (0: never stop): no new request starts, and ``TeacherError`` carries
      the traces finished so far.

    Failure traces are not cached as done, so a rerun asks again. ``requests_per_minute`` spaces
    requests out (0: no limit); ``concurrency`` requests run at once.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout: float = 120.0
    deadline: float = 600.0
    max_retries: int = 4
    requests_per_minute: float = 0.0
    concurrency: int = 4
    max_consecutive_failures: int = 8
    max_tokens: int = 2048
    temperature: float = 0.7
    prompt_style: str = "v3"
    name: str = ""

    def __post_init__(self) -> None:
        env = os.environ
        self.base_url = (self.base_url or env.get("OPENAI_BASE_URL", "")).rstrip("/")
        self.model = self.model or env.get("PR1_TEACHER_MODEL") or env.get("OPENAI_MODEL", "")
        self.api_key = self.api_key or env.get("OPENAI_API_KEY", "")
        if not self.base_url or not self.model:
            raise ValueError(
                "OpenAITeacher needs base_url and model: pass them, or set OPENAI_BASE_URL "
                "(e.g. http://127.0.0.1:8000/v1) and PR1_TEACHER_MODEL"
            )
        why = url_problem(self.base_url)
        if why:
            raise ValueError(f"base_url: {why}")
        self._check_limits()
        self.name = self.name or f"openai:{self.model}"
        _openai()  # fail now, with one line, when the extra is missing

    def _check_limits(self) -> None:
        """One clear line for a setting out of range or of the wrong type (e.g. from ``--set``)."""
        rules = [
            ("timeout", self.timeout, float, 0),
            ("deadline", self.deadline, float, 0),
            ("concurrency", self.concurrency, int, 0),
            ("max_retries", self.max_retries, int, -1),
            ("requests_per_minute", self.requests_per_minute, float, -1),
            ("max_consecutive_failures", self.max_consecutive_failures, int, -1),
        ]
        for key, value, kind, above in rules:
            number = (int, float) if kind is float else int
            if not isinstance(value, number) or isinstance(value, bool) or not value > above:
                wanted = "above 0" if above == 0 else "0 or more"
                raise ValueError(
                    f"{key} must be {'a whole number' if kind is int else 'a number'} {wanted}, "
                    f"got {value!r}"
                )

    # generate() hands each trace to on_trace the moment it arrives (pr1lib.data.traces writes it then)
    streams = True

    def generate(
        self, problems: list[dict], on_trace: Callable[[dict], None] | None = None
    ) -> list[dict]:
        """Traces for ``problems``, in order (``TeacherError`` with the finished ones when it must
        stop); ``on_trace(trace)`` runs for each as soon as it is finished, so a caller can keep
        every paid answer even when the run is interrupted."""
        return run_async(self._generate(problems, on_trace))

    async def _generate(
        self, problems: list[dict], on_trace: Callable[[dict], None] | None = None
    ) -> list[dict]:
        streak, limiter = (
            _Streak(self.max_consecutive_failures),
            RateLimiter(self.requests_per_minute),
        )
        gate = asyncio.Semaphore(self.concurrency)

        async def one(client: Any, problem: dict) -> dict | None:
            async with gate:
                if not streak.stop:
                    await asyncio.sleep(limiter.reserve())
                if streak.stop:  # the run stopped while this one waited: leave it for the rerun
                    return None
                trace = await self._trace(client, problem, streak)
                if on_trace is not None:
                    on_trace(trace)
                streak.record(trace, self.base_url)
                return trace

        async with self._client() as client:
            traces = await asyncio.gather(*(one(client, p) for p in problems))
        finished = [t for t in traces if t is not None]
        if streak.stop:
            raise TeacherError(streak.stop, finished)
        return finished

    def _client(self) -> Any:
        # Local servers take any key; the client refuses to start without one.
        return _openai().AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "not-needed",
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    async def _trace(self, client: Any, problem: dict, streak: _Streak) -> dict:
        """One problem's trace; a failure becomes its ``error`` and ``kind`` (a fatal status also
        stops the run)."""
        openai = _openai()
        try:
            content = await asyncio.wait_for(self._ask(client, problem["question"]), self.deadline)
        except (asyncio.TimeoutError, ValueError, openai.APIError) as err:
            kind, detail = describe_failure(err, self.timeout, self.deadline)
            if isinstance(err, openai.APIStatusError) and err.status_code in FATAL_STATUS:
                streak.stop = streak.stop or (
                    f"HTTP {err.status_code} from {self.base_url} ({detail}); check "
                    f"--base-url, --model ({self.model!r}) and OPENAI_API_KEY"
                )
            return make_trace(problem, self.name, error=f"{kind}: {detail}", kind=kind)
        return make_trace(problem, self.name, strip_thinking(content))

    async def _ask(self, client: Any, question: str) -> str:
        """The assistant's reply to the prompt for ``question`` (``ValueError`` when it has
        none)."""
        reply = await client.chat.completions.create(
            model=self.model,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            messages=[{"role": "user", "content": prompt_text(question, self.prompt_style)}],
        )
        choices = getattr(reply, "choices", None) or []
        content = (
            getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        )
        if not isinstance(content, str):
            raise ValueError(
                f"malformed response: no choices[0].message.content in {str(reply)[:200]!r}"
            )
        return content
