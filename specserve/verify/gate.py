"""The verification gate: health, real decode lines at the exporter, accept length over the
window above the floor, graph state and speculation as the profile says.

The Ansible verify role, the Helm test pod and a person at a shell run this one gate
(`specserve verify`). Every message names the knob that sets its budget or floor; a caller
passes its own names for them (the role's `verify_accept_length_floor`, the chart's values).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from specserve.profile.facts import facts
from specserve.profile.model import Profile
from specserve.verify import exporters, gpus, server
from specserve.verify.exporters import ScrapeError
from specserve.verify.options import OPTIONS, default
from specserve.verify.server import RequestFailed
from specserve.verify.window import Snapshot, Window

# The budgets and floors a message may name, with the `specserve verify` flag that sets each;
# a caller renames them with --knob NAME=LABEL.
DEFAULT_KNOBS: dict[str, str] = {
    **{o.name: o.flag for o in OPTIONS if o.name not in ("prompt", "graph_label", "dcgm")},
    "api_key": "--api-key-file",
    "dcgm_wait": "--dcgm-wait",
}


@dataclass(frozen=True)
class Settings:
    """Every default is the one in specserve.verify.options (the command and the role share it)."""

    server: str  # base URL, no trailing slash
    exporters: list[str]
    profile: Profile
    each_address: bool = False
    api_key: str | None = None
    api: str = "generate"
    prompt: str = default("prompt")
    requests: int = default("requests")
    max_tokens: int = default("max_tokens")
    request_timeout: float = default("request_timeout")
    metrics_timeout: float = default("metrics_timeout")
    min_decode_lines: int = default("min_decode_lines")
    floor: float = default("floor")
    require_graph: bool = default("require_graph")
    graph_label: str = default("graph_label")
    dcgm: str = default("dcgm")  # the DCGM exporter's /metrics URL; empty: GPUs not checked
    since: Path | None = None
    title: str = "Verification gate"
    on: str = ""  # where it ran, for the first line (the inventory host)
    knobs: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_KNOBS))

    @property
    def speculative(self) -> bool:
        return facts(self.profile).speculating

    @property
    def graph_required(self) -> bool:
        # A profile that turns CUDA graphs off (allow_disable_cuda_graph) asks for none.
        return self.require_graph and not self.profile.server.disable_cuda_graph


@dataclass(frozen=True)
class Served:
    """What the server's own server_info says that the checks use (server.py reads it)."""

    draft_tokens: int | None = None  # speculative_num_draft_tokens it resolved
    silent_because: str | None = None  # the setting that keeps its decode lines out of the log


@dataclass
class Verdict:
    passed: bool
    lines: list[str]  # what the gate saw and needed, one check a line, failures first


def _fmt(value: float) -> str:
    return f"{value:g}"


def _graph_state(window: Window) -> str:
    ranks = [" ".join(f"{k}{v}" for k, v in sorted(g.labels.items()) if k != "graph")
             + f" {g.labels.get('graph', '?')}={_fmt(g.value)}" for g in window.graphs]
    return ", ".join(ranks) or "no decode line reported one"


def _graph_ok(s: Settings, window: Window) -> bool:
    on = [g for g in window.graphs if g.labels.get("graph") == s.graph_label and g.value == 1.0]
    return bool(on) and not any(g.value == 0.0 for g in window.graphs)


def judge(s: Settings, window: Window, served: Served | None = None) -> Verdict:
    """The checks on one window (and what the server said of itself); pure, so every outcome is
    testable without a server."""
    served = served or Served()
    profile_facts = facts(s.profile)
    k = s.knobs
    failed: list[str] = []
    seen: list[str] = []

    def check(ok: bool, line: str) -> None:
        (seen if ok else failed).append(line)

    source = "in the window" if s.since else "from the warm-up"
    need = (f"> {s.min_decode_lines - 1}" if s.min_decode_lines <= 1
            else f">= {s.min_decode_lines}: {k['min_decode_lines']}")
    warmup = ("" if s.since else f"; warm-up: {k['requests']} = {s.requests} of "
              f"{k['max_tokens']} = {s.max_tokens}")
    enough = window.decode_lines >= max(s.min_decode_lines, 1)
    why = f"; {served.silent_because}" if served.silent_because and not enough else ""
    check(enough,
          f"decode lines {source}: {_fmt(window.decode_lines)} (need {need}; the exporter had "
          f"{_fmt(s.metrics_timeout)} s to count them: {k['metrics_timeout']}{warmup}){why}")
    mean = window.accept_length
    if s.speculative:
        shown = "none" if mean is None else f"{round(mean, 3)}"
        check(mean is not None and mean > s.floor,
              f"mean accept length: {shown} over {_fmt(window.accept_windows)} decode windows "
              f"(need > {_fmt(s.floor)}: {k['floor']}; 1.00 means no draft token is accepted"
              + ("; no decode line carried an accept length: the profile turns speculation "
                 "on, is the server speculating?)" if mean is None else ")"))
        # Adaptive servers change the count at run time; the fact is only their start.
        draft = None if profile_facts.adaptive else profile_facts.draft_tokens
        if draft is not None and served.draft_tokens is not None:
            check(served.draft_tokens == draft,
                  f"draft tokens: the server runs {served.draft_tokens} (server_info), the "
                  f"profile {draft} (its tree, or SGLang's choice for it)")
        if draft is not None and mean is not None:
            # A verify pass accepts at most every draft token: above that, the exporter misreads
            # the lines or the server runs another tree than the profile's.
            check(mean <= draft,
                  f"mean accept length: {round(mean, 3)} within the {draft} draft tokens")
    else:
        check(window.accept_windows == 0,
              f"speculation: {_fmt(window.accept_windows)} decode windows with an accept "
              "length (need 0: the profile turns speculation off)")
    if s.graph_required:
        check(_graph_ok(s, window),
              f"graph state per rank: {_graph_state(window)} (need {s.graph_label} graph = 1 "
              f"on every rank: {k['require_graph']})")
    marked = [f"FAIL {line}" for line in failed] + [f"ok   {line}" for line in seen]
    return Verdict(not failed, marked)


def pass_line(s: Settings, window: Window) -> str:
    mean = window.accept_length
    accept = (f"{round(mean, 3)}" if s.speculative and mean is not None
              else "n/a (no speculation)")
    graph = f"{s.graph_label} graph on" if s.graph_required else "graph state not required"
    return (f"{'gate' if s.title == 'Verification gate' else s.title} passed: "
            f"{_fmt(window.decode_lines)} decode lines, accept length {accept}, {graph}")


def _wait_for_lines(session: requests.Session, urls: list[str], before: dict[str, Snapshot],
                    s: Settings, sleep: Callable[[float], None]) -> Window:
    """Poll until the exporters counted enough new decode lines and the count stopped moving
    (the last requests' lines reach the exporter a poll interval after their answers), or the
    budget is spent."""
    deadline = time.monotonic() + s.metrics_timeout
    last: Window | None = None
    while True:
        seen = exporters.window_since(before, exporters.scrape_all(session, urls))
        enough = seen.decode_lines >= max(s.min_decode_lines, 1)
        settled = last is not None and seen.decode_lines == last.decode_lines
        if (enough and settled) or time.monotonic() >= deadline:
            return seen
        last = seen if enough else None
        sleep(1.0)


def _gpu_refusal(head: str, failed: list[str], seen: list[str]) -> str:
    return "\n".join([head, *(f"  FAIL {line}" for line in failed),
                      *(f"  ok   {line}" for line in seen)])


def run_gpus(profile: Profile, url: str, out: Callable[[str], None], *, wait: float = 0.0,
             title: str = "GPU check", on: str = "", knobs: dict[str, str] | None = None,
             sleep: Callable[[float], None] = time.sleep) -> bool:
    """Only the gate's GPU check (`specserve verify --gpus-only`): the DCGM exporter at `url`
    against the profile's gpu.count, an exporter that cannot be read yet tried again for `wait`
    seconds. True when the node's GPUs may serve; the refusal is the gate's own, word for word."""
    k = {**DEFAULT_KNOBS, **(knobs or {})}
    where = f" on {on}" if on else ""
    head = f"{title} FAILED{where} (profile {profile.name}):"
    try:
        failed, seen = gpus.check_waiting(requests.Session(), url, facts(profile).gpu_count,
                                          wait, knob=k["dcgm_wait"], sleep=sleep)
    except ScrapeError as exc:
        out(f"{head}\n  {exc}")
        return False
    if failed:
        out(_gpu_refusal(head, failed, seen))
        return False
    for line in seen:
        out(f"gpus: {line}")
    out(f"{title} passed{where}: the GPUs report no error state")
    return True


def run(s: Settings, out: Callable[[str], None],
        sleep: Callable[[float], None] = time.sleep) -> bool:
    """Run the gate, writing what it saw through `out`; True when every check passed."""
    k = s.knobs
    session = requests.Session()
    if s.api_key:
        session.headers["Authorization"] = f"Bearer {s.api_key}"
    head = f"{s.title} FAILED{' on ' + s.on if s.on else ''} (profile {s.profile.name}):"
    try:
        if s.dcgm:
            # The GPUs first: a node whose GPUs report an error state gets no request at all.
            failed, seen = gpus.check(session, s.dcgm, facts(s.profile).gpu_count)
            if failed:
                out(_gpu_refusal(head, failed, seen))
                return False
            for line in seen:
                out(f"gpus: {line}")
        urls = exporters.expand(s.exporters, s.each_address)
        before = exporters.load(s.since) if s.since else exporters.scrape_all(session, urls)
        try:
            server.call(session, s.server + server.HEALTH_PATH, s.request_timeout)
        except RequestFailed as exc:
            raise RequestFailed(f"health: {exc} (may take {k['request_timeout']} = "
                                f"{_fmt(s.request_timeout)} s)", exc.status) from None
        info = server.server_info(session, s.server)
        out(f"server: {server.summary(info, s.api_key)}")
        served = Served(server.draft_tokens_of(info),
                        server.why_no_decode_lines(info, s.max_tokens))
        model = server.model_id(session, s.server, s.request_timeout) if s.api == "chat" else ""
        for n in range(s.requests):
            try:
                server.warm_up(session, s.server, s.api, s.prompt, s.max_tokens,
                               s.request_timeout, model)
            except RequestFailed as exc:
                budget = (f"the API key: {k['api_key']}" if exc.status in (401, 403)
                          else f"each may take {k['request_timeout']} = "
                          f"{_fmt(s.request_timeout)} s")
                raise RequestFailed(f"warm-up request {n + 1} of {s.requests}: {exc} "
                                    f"({budget})") from None
        if not urls:
            out(f"gate passed: {s.requests} warm-up requests answered; no exporter to read "
                "(--no-exporter): decode lines, accept length and graphs not checked")
            return True
        seen = _wait_for_lines(session, urls, before, s, sleep)
    except RequestFailed as exc:
        hint = (f" (the API key: {k['api_key']})" if exc.status in (401, 403)
                and "API key" not in str(exc) else "")
        out(f"{head}\n  {exc}{hint}")
        return False
    except ScrapeError as exc:
        out(f"{head}\n  {exc}")
        return False
    verdict = judge(s, seen, served)
    if verdict.passed:
        out(pass_line(s, seen))
    else:
        out("\n".join([head, *("  " + line for line in verdict.lines)]))
    return verdict.passed
