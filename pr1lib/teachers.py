"""Teachers that write parallel-format reasoning traces for cold-start SFT.

Every teacher has a ``name`` (part of the cache key) and one method, ``generate(problems) ->
traces``: ``problems`` are ``pr1lib.data`` records (``id``, ``question``, ``answer_text``,
``answer``); each trace is a dict ``{"id", "teacher", "text", "error"}`` in the same order, with
``error`` ``None`` on success and ``text`` ``""`` on failure.

- ``RuleTeacher`` needs no model: it rewrites a GSM8K-style reference solution, recomputing one
  intermediate result in a second (or third) genuinely different way inside a ``<Parallel>`` block
  (the arithmetic lives in ``pr1lib.arithmetic``).
- ``HFTeacher`` samples any causal LM through transformers with the paper's v3 prompt.
- ``OpenAITeacher`` calls any chat-completions server (vLLM, TGI, llama.cpp, a hosted API).
- ``StandInServer`` is a loopback stand-in for such a server (the rule teacher behind HTTP), used
  by the tests and by notebook 02 where no real model is available. It is not a language model.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Protocol

from pr1lib.arithmetic import (ALTERNATIVES, ANNOTATION, alternatives, annotate, check_arithmetic, evaluate,
                               format_number, parse_expr)
from pr1lib.prompts import chat_prompt, linear_solution, prompt_text, split_gsm8k_answer


class Teacher(Protocol):
    """What every teacher offers: a stable ``name`` and ``generate``."""

    name: str

    def generate(self, problems: list[dict]) -> list[dict]: ...


def make_trace(problem: dict, teacher: str, text: str = "", error: str | None = None) -> dict:
    """One trace record, the shape every teacher returns.

    >>> make_trace({"id": "q1"}, "rule", "Final Answer: 3")
    {'id': 'q1', 'teacher': 'rule', 'text': 'Final Answer: 3', 'error': None}
    """
    return {"id": problem["id"], "teacher": teacher, "text": text, "error": error}


def strip_thinking(text: str) -> str:
    """Keep only what follows the last ``</think>`` (the paper keeps the non-thinking part).

    >>> strip_thinking("<think>hmm, 2+2</think>\\n\\nIt is 4.\\nFinal Answer: 4")
    'It is 4.\\nFinal Answer: 4'
    """
    _, sep, tail = text.rpartition("</think>")
    return tail.strip() if sep else text.strip()


# --------------------------------------------------------------------------- rule teacher
_PLAIN_EQ = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:\s*[-+*/x×]\s*\d+(?:\.\d+)?)+)\s*=\s*\$?(\d+(?:\.\d+)?)(?![\d%])")
# One wording per path count: every extra template is a coin flip a small model has to learn, and
# a garbled flip mid-summary was the tiny model's most common slip after SFT.
SUMMARY_2 = "Both paths give {v}."
SUMMARY_N = "All {n} paths give {v}."
_WORDS = {2: "two", 3: "three", 4: "four"}


def step_candidates(step: str) -> list[tuple[str, str, dict[str, str]]]:
    """``(expr, result, alternatives)`` for each checkable calculation in one solution line:
    ``<<…>>`` annotations, or plain ``a + b = c`` text when the line has none."""
    found = ANNOTATION.findall(step)
    if not found:
        found = [(e.replace("x", "*").replace("×", "*"), r) for e, r in _PLAIN_EQ.findall(step)]
    out = []
    for expr, result in found:
        alts = alternatives(expr, result)
        if alts:
            out.append((expr.strip(), format_number(float(result.replace(",", ""))), alts))
    return out


RULE_VERSION = 4  # bump when a change to the rule teacher changes its traces (it keys the caches)
_RARITY = (ast.Div, ast.Sub, ast.Add, ast.Mult)  # rarest first in GSM8K / TinyGSM solution steps


def op_rarity(expr: str) -> int:
    """Rank of ``expr``'s outermost operator in ``_RARITY`` (0 = division, the rarest).

    >>> op_rarity("30/5"), op_rarity("2*12+3"), op_rarity("4*7")
    (0, 2, 3)
    """
    node = parse_expr(expr)
    op = type(node.op) if isinstance(node, ast.BinOp) else None
    return _RARITY.index(op) if op in _RARITY else len(_RARITY)


@dataclass
class RuleTeacher:
    """Turn a GSM8K-format reference solution into a parallel-format trace, no model needed.

    One step of the solution becomes a ``<Parallel>`` block: the original line is one path, and
    one or two other paths recompute the same number differently (another order, a split
    product, repeated addition, an inverse check, regrouping, or multiplying out a bracket). A short summary states
    the shared value; the remaining steps and ``Final Answer: N`` follow. Every annotation is
    re-checked. Deterministic given ``seed`` and the problem id.

    ``original_path="first"`` keeps the reference line as the first path (the others follow in
    random order), so the model opens the block with the computation it already knows; ``"last"``
    puts it last, ``"any"`` shuffles. ``summary="calculation"`` restates the reference calculation
    (``48/2=<<48/2=24>>24``), so the summary recomputes the shared result instead of copying
    whichever path came last; ``"value"`` states the bare number. On the tiny model (notebook 03)
    these defaults, with the inverse path computing before it checks and one summary wording, moved
    easy accuracy after SFT from 47 % (shuffled paths, answer-first check, bare value) to 78 %.
    ``step_choice="rare_op"`` puts the block on the step whose operator is rarest (division,
    subtraction, addition, multiplication) when a solution has several, so the summaries do not
    learn "restate a product" as a prior (it had turned ``30/5`` into ``30*5``); ``"any"`` draws
    the step uniformly.

    >>> p = {"id": "ex", "question": "?", "answer": "72",
    ...      "answer_text": "She sold 48/2=<<48/2=24>>24 in May.\\nIn all 48+24=<<48+24=72>>72.\\n#### 72"}
    >>> print(RuleTeacher(seed=1).generate([p])[0]["text"])
    <Parallel><Path>She sold 48/2=<<48/2=24>>24 in May.</Path><Path>48/2=<<48/2=24>>24; check: 24*2=<<24*2=48>>48.</Path></Parallel>
    <Summary>Both paths give 48/2=<<48/2=24>>24.</Summary>
    In all 48+24=<<48+24=72>>72.
    Final Answer: 72
    """

    seed: int = 0
    extra_path_rate: float = 0.25  # chance of a third path when two alternatives exist
    max_blocks: int = 1
    original_path: str = "first"  # first | last | any: where the reference line goes among the paths
    summary: str = "calculation"  # calculation | value: what the summary restates (see above)
    kinds: tuple[str, ...] = tuple(ALTERNATIVES)  # which alternative computations may become paths
    step_choice: str = "rare_op"  # any | rare_op: blocks only on the steps with the rarest operator
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"rule-s{self.seed}-{self.fingerprint()}"
        if self.original_path not in ("first", "last", "any") or self.summary not in ("calculation", "value"):
            raise ValueError(f"original_path must be first|last|any and summary calculation|value, "
                             f"got {self.original_path!r} and {self.summary!r}")
        if self.step_choice not in ("any", "rare_op"):
            raise ValueError(f"step_choice must be any|rare_op, got {self.step_choice!r}")
        if not self.kinds or set(self.kinds) - set(ALTERNATIVES):
            raise ValueError(f"kinds must be a non-empty subset of {tuple(ALTERNATIVES)}, got {self.kinds!r}")

    def fingerprint(self) -> str:
        """Six hex digits of the options and ``RULE_VERSION``: part of ``name``, so a trace cache
        written with other options (or by an older teacher) is not reused."""
        knobs = (RULE_VERSION, self.extra_path_rate, self.max_blocks, self.original_path, self.summary,
                 sorted(self.kinds), self.step_choice)
        return hashlib.sha256(repr(knobs).encode()).hexdigest()[:6]

    def generate(self, problems: list[dict]) -> list[dict]:
        return [self.trace(p) for p in problems]

    def trace(self, problem: dict) -> dict:
        """One trace; ``error`` says why when the problem has no usable reference solution."""
        solution = problem.get("answer_text") or ""
        try:
            steps, final = split_gsm8k_answer(solution)
        except ValueError:
            return make_trace(problem, self.name, error="no reference solution with '#### N'")
        rng = random.Random(f"{self.seed}:{problem['id']}")
        options = [(i, (e, r, alts)) for i, step in enumerate(steps) for e, r, a in step_candidates(step)
                   if (alts := {k: v for k, v in a.items() if k in self.kinds})]
        if not options:  # nothing to branch on: a plain solution (the filter rejects it)
            return make_trace(problem, self.name, linear_solution(solution))
        if self.step_choice == "rare_op":  # only the steps whose operator is rarest in word problems
            rarest = min(op_rarity(c[0]) for _, c in options)
            options = [o for o in options if op_rarity(o[1][0]) == rarest]
        chosen = sorted(rng.sample(options, min(self.max_blocks, len(options))), key=lambda o: o[0])
        lines = list(steps)
        for index, cand in {i: c for i, c in chosen}.items():
            lines[index] = self._block(steps[index], cand, rng)
        text = "\n".join([*lines, f"Final Answer: {final}"])
        bad = check_arithmetic(text)
        return make_trace(problem, self.name, "" if bad else text, "; ".join(bad) or None)

    def _block(self, step: str, cand: tuple[str, str, dict[str, str]], rng: random.Random) -> str:
        expr, result, alts = cand
        kinds = sorted(alts)
        extra = 2 if len(kinds) >= 2 and rng.random() < self.extra_path_rate else 1
        paths = [step] + [alts[k] for k in rng.sample(kinds, extra)]
        if self.original_path == "any":
            rng.shuffle(paths)
        elif self.original_path == "last":
            paths = paths[1:] + paths[:1]
        n = len(paths)
        value = annotate(expr.replace(" ", ""), result) if self.summary == "calculation" else result
        summary = (SUMMARY_2 if n == 2 else SUMMARY_N).format(v=value, n=_WORDS.get(n, n))
        body = "".join(f"<Path>{p}</Path>" for p in paths)
        return f"<Parallel>{body}</Parallel>\n<Summary>{summary}</Summary>"


# --------------------------------------------------------------------------- HF teacher
@dataclass
class HFTeacher:
    """Sample any causal LM through transformers, one trace per problem, in batches.

    ``model`` is a loaded model or a hub id / local folder (then loaded with
    ``pr1lib.models.load_policy``, 4-bit NF4 if ``load_in_4bit``). Prompts are the paper's v3
    instruction in the tokenizer's chat template (``pr1lib.prompts.chat_prompt``); the text after
    the last ``</think>`` is kept, tags included.
    """

    model: Any
    tokenizer: Any = None
    load_in_4bit: bool = False
    batch_size: int = 8
    max_new_tokens: int = 2048
    temperature: float = 0.7
    top_p: float = 0.95
    prompt_style: str = "v3"
    seed: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            self.name = self.name or f"hf:{self.model}"
            self.model, self.tokenizer = _load_hf(self.model, self.load_in_4bit)
        self.name = self.name or f"hf:{getattr(self.model.config, '_name_or_path', '') or 'model'}"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def generate(self, problems: list[dict]) -> list[dict]:
        traces = []
        for start in range(0, len(problems), self.batch_size):
            batch = problems[start:start + self.batch_size]
            for problem, text in zip(batch, self.sample([p["question"] for p in batch], batch[0]["id"])):
                text = strip_thinking(text)
                traces.append(make_trace(problem, self.name, text, None if text else "empty output"))
        return traces

    def sample(self, questions: list[str], key: str = "") -> list[str]:
        """Decoded continuations (special tokens other than the parallel tags removed)."""
        import torch
        import zlib

        tok = self.tokenizer
        tok.padding_side = "left"
        prompts = [chat_prompt(q, tok, self.prompt_style) for q in questions]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        torch.manual_seed(zlib.crc32(f"{self.seed}:{key}".encode()))
        with torch.no_grad():
            out = self.model.generate(
                **enc, do_sample=self.temperature > 0, temperature=self.temperature or None,
                top_p=self.top_p, max_new_tokens=self.max_new_tokens, pad_token_id=tok.pad_token_id)
        return [self._decode(row.tolist()) for row in out[:, enc["input_ids"].shape[1]:]]

    def _decode(self, ids: list[int]) -> str:
        eos = self.model.generation_config.eos_token_id
        stops = {self.tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
        cut = next((i for i, t in enumerate(ids) if t in stops), len(ids))
        text = self.tokenizer.decode(ids[:cut], skip_special_tokens=False)
        from pr1lib.format import TAGS

        for special in set(self.tokenizer.all_special_tokens) - set(TAGS):
            text = text.replace(special, "")
        return text


def _load_hf(name: str, load_in_4bit: bool):
    """Model and tokenizer for a hub id or folder, on GPU in half precision when there is one."""
    import torch

    from pr1lib.config import ModelConfig
    from pr1lib.models import load_policy

    dtype = "float32"
    if torch.cuda.is_available():
        dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    model, tokenizer, _ = load_policy(config=ModelConfig(name=name, load_in_4bit=load_in_4bit, dtype=dtype))
    return model.eval(), tokenizer


# --------------------------------------------------------------------------- OpenAI-compatible teacher
class TeacherError(RuntimeError):
    """A request that can never succeed as configured (bad key, unknown model, bad URL): stop."""


class _Retryable(Exception):
    """A failure worth retrying: HTTP 408/429/5xx, a timeout, a dropped connection."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class RateLimiter:
    """At most ``per_minute`` request starts per minute, evenly spaced, shared by threads.

    >>> RateLimiter(0).wait()  # 0 means no limit
    0.0
    """

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.clock, self.sleep, self.next = clock, sleep, 0.0
        self.lock = threading.Lock()

    def wait(self) -> float:
        """Block until this request may start; returns the seconds waited."""
        if not self.interval:
            return 0.0
        with self.lock:
            now = self.clock()
            start = max(now, self.next)
            self.next = start + self.interval
        if start > now:
            self.sleep(start - now)
        return start - now


@dataclass
class OpenAITeacher:
    """Any chat-completions server: vLLM, TGI, llama.cpp's server, or a hosted API.

    ``base_url`` (…/v1), ``model`` and ``api_key`` come from the arguments or from
    ``OPENAI_BASE_URL``, ``PR1_TEACHER_MODEL`` (or ``OPENAI_MODEL``) and ``OPENAI_API_KEY``.
    What each outcome does:

    - 200 with a well-formed body: the trace is the message content after any ``</think>``;
    - 408, 429, 5xx, a timeout (``timeout`` seconds) or a dropped connection: retried up to
      ``max_retries`` times, waiting ``backoff * 2**attempt`` seconds (capped at ``max_backoff``;
      a ``Retry-After`` header wins); then the trace records the error;
    - 200 with a body that is not the expected JSON: not retried, the trace records the error;
    - any other 4xx (bad key, unknown model, bad URL): ``TeacherError`` stops the run.

    Error traces are not cached as done, so a re-run asks again. ``requests_per_minute`` spaces
    requests out; ``concurrency`` requests run at once.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 30.0
    requests_per_minute: float = 0.0
    concurrency: int = 4
    max_tokens: int = 2048
    temperature: float = 0.7
    prompt_style: str = "v3"
    name: str = ""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def __post_init__(self) -> None:
        env = os.environ
        self.base_url = (self.base_url or env.get("OPENAI_BASE_URL", "")).rstrip("/")
        self.model = self.model or env.get("PR1_TEACHER_MODEL") or env.get("OPENAI_MODEL", "")
        self.api_key = self.api_key or env.get("OPENAI_API_KEY", "")
        if not self.base_url or not self.model:
            raise ValueError("OpenAITeacher needs base_url and model: pass them, or set OPENAI_BASE_URL "
                             "(e.g. http://127.0.0.1:8000/v1) and PR1_TEACHER_MODEL")
        self.name = self.name or f"openai:{self.model}"
        self.limiter = RateLimiter(self.requests_per_minute, sleep=self.sleep)

    def generate(self, problems: list[dict]) -> list[dict]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            return list(pool.map(self.trace, problems))

    def trace(self, problem: dict) -> dict:
        """One trace; transient and malformed failures become the trace's ``error``."""
        try:
            return make_trace(problem, self.name, strip_thinking(self.complete(problem["question"])))
        except (_Retryable, ValueError) as err:
            return make_trace(problem, self.name, error=str(err))

    def complete(self, question: str) -> str:
        """The assistant's reply to the v3 prompt for ``question``, retrying transient failures."""
        body = json.dumps({"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature,
                           "messages": [{"role": "user", "content": prompt_text(question, self.prompt_style)}]})
        for attempt in range(self.max_retries + 1):
            self.limiter.wait()
            try:
                return parse_completion(self._post(body.encode()))
            except _Retryable as err:
                if attempt == self.max_retries:
                    raise _Retryable(f"gave up after {attempt + 1} attempts: {err}") from err
                wait = err.retry_after if err.retry_after is not None else self.backoff * 2 ** attempt
                self.sleep(min(self.max_backoff, wait))
        raise AssertionError("unreachable")

    def _post(self, data: bytes) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as err:
            if err.code in (408, 429) or err.code >= 500:
                raise _Retryable(f"HTTP {err.code}", _retry_after(err.headers.get("Retry-After"))) from err
            raise TeacherError(f"HTTP {err.code} from {self.base_url}: {err.read()[:200]!r}") from err
        except (TimeoutError, ConnectionError, urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            kind = "timeout" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "connection error"
            raise _Retryable(f"{kind}: {reason}") from err


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def parse_completion(body: bytes) -> str:
    """The first choice's message content of a chat-completions response body.

    >>> parse_completion(b'{"choices": [{"message": {"role": "assistant", "content": "Hi"}}]}')
    'Hi'
    >>> parse_completion(b'{"choices": []}')
    Traceback (most recent call last):
    ...
    ValueError: malformed response: no choices[0].message.content in b'{"choices": []}'
    """
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
        if isinstance(content, str):
            return content
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    raise ValueError(f"malformed response: no choices[0].message.content in {body[:200]!r}")


# --------------------------------------------------------------------------- loopback stand-in server
def question_from_prompt(content: str) -> str:
    """The problem inside a v3 / tiny / baseline prompt (the text after the last ``Problem:``).

    >>> question_from_prompt(prompt_text("What is 2+3?", "tiny"))
    'What is 2+3?'
    """
    _, sep, tail = content.rpartition("Problem:")
    tail = tail if sep else content
    tail = tail.rsplit("\nSolution:", 1)[0]
    return tail.split(" Let's think step by step", 1)[0].strip()


class StandInServer:
    """A STAND-IN for an OpenAI-compatible server on 127.0.0.1 (ephemeral port), for tests and demos.

    It is not a language model: it looks the problem up among ``problems`` and answers with the
    rule teacher's trace (after a short ``<think>`` note, as reasoning models do). ``faults`` are
    played one per request before normal service: ``"429"``, ``"500"``, ``"401"``, ``"malformed"``
    or ``"timeout"`` (hang ``hang_s`` seconds, then answer). Use it as a context manager.
    """

    def __init__(self, problems: Iterable[dict] = (), teacher: Any = None, faults: Iterable[str] = (),
                 hang_s: float = 2.0):
        self.by_question = {p["question"].strip(): p for p in problems}
        self.teacher = teacher or RuleTeacher()
        self.faults, self.hang_s = list(faults), hang_s
        self.requests = 0
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "StandInServer":
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StandInHandler)
        self.httpd.daemon_threads = True
        self.httpd.standin = self
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_fault(self) -> str | None:
        with self.lock:
            self.requests += 1
            return self.faults.pop(0) if self.faults else None

    def answer(self, content: str) -> str:
        problem = self.by_question.get(question_from_prompt(content))
        if problem is None:
            return "I do not know this problem.\nFinal Answer: unknown"
        trace = self.teacher.generate([problem])[0]
        return "<think>stand-in server: no model here, the rule teacher wrote this</think>\n\n" + trace["text"]


class _StandInHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test and notebook output clean
        pass

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(code)
            for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        standin: StandInServer = self.server.standin
        length = min(int(self.headers.get("Content-Length", 0)), 1 << 20)
        request = json.loads(self.rfile.read(length) or b"{}")
        fault = standin.next_fault()
        if not self.path.endswith("/chat/completions"):
            return self._send(404, b'{"error": "not found"}')
        if fault in ("429", "500", "401"):
            return self._send(int(fault), b'{"error": "%s"}' % fault.encode(), {"Retry-After": "0"})
        if fault == "malformed":
            return self._send(200, b'{"choices": [ this is not JSON')
        if fault == "timeout":
            time.sleep(standin.hang_s)
        content = standin.answer(request["messages"][-1]["content"])
        reply = {"id": f"standin-{standin.requests}", "object": "chat.completion", "model": request.get("model"),
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}]}
        self._send(200, json.dumps(reply).encode())
