"""Issue 31 item 2 end to end: a per-class accept length where requests carry a class.

The stand-in's profile sets `server.request_class_label: workload_class`, rendered
`--tokenizer-metrics-allowed-custom-labels workload_class --tokenizer-metrics-custom-labels-header
x-custom-labels` and started by specserve-launch. Clients send their class in that header: three
`chat` clients whose text the drafter fits (acceptance 0.8), one `code` client whose text its
behaviour file makes the drafter reject (content factor 0: accept length 1.0), one client with a
class no rule knows (`tenant-x`) and one without a header. Prometheus scrapes SGLang's (the
stand-in's) own counters: the per-class record holds chat, code and `other` (tenant-x folded in),
nothing for the unlabelled client; SpecDecodeClassAcceptLengthLow reaches the webhook naming
`code` while the server's mean stays above the floor (SpecDecodeAcceptLengthLow silent),
`specserve diagnose` names it first with the class, and it is delivered resolved once the code
client stops. The chain and the 20 s windows are
tests/e2e/stack.py's.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from specserve.monitoring.rules import CLASS_ACCEPT_LENGTH
from specserve.profile.classlabel import CLASS_LABEL_HEADER, RULES_CLASS_LABEL
from tests.e2e.diagnose import diagnosed, first_beyond_blind
from tests.e2e.processes import wait_until
from tests.e2e.stack import WINDOW, Stack, _seconds, running_stack
from tests.e2e.webhook import Delivered

pytestmark = pytest.mark.slow

ALERT = "SpecDecodeClassAcceptLengthLow"
REJECTED = "zqxjk"  # the behaviour file's keyword with content factor 0
DEADLINE_S = _seconds(WINDOW) + 25
MAX_TOKENS = 32


class _Client(threading.Thread):
    """One client sending chat completions of one class until stopped."""

    def __init__(self, url: str, model: str, kind: str | None, text: str) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.completed = 0
        self._url = url + "/v1/chat/completions"
        self._headers = {} if kind is None else {
            CLASS_LABEL_HEADER: json.dumps({RULES_CLASS_LABEL: kind})}
        self._body = {"model": model, "messages": [{"role": "user", "content": text}],
                      "max_tokens": MAX_TOKENS, "ignore_eos": True}

    def run(self) -> None:
        session = requests.Session()
        deadline = time.monotonic() + 300
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                response = session.post(self._url, json=self._body, headers=self._headers,
                                        timeout=15)
                response.raise_for_status()
                self.completed += 1
            except requests.RequestException as exc:
                self.errors.append(repr(exc))
                time.sleep(0.2)


def _delivered(stack: Stack, status: str, since: float) -> Delivered:
    def found() -> list[Delivered]:
        return [d for d in stack.receiver.find(ALERT, status) if d.received_at >= since]

    wait_until(f"{ALERT} delivered {status}", lambda: bool(found()),
               since + DEADLINE_S - time.time(), services=stack.services)  # fmt: skip
    return found()[0]


def test_a_class_the_drafter_does_not_fit_is_delivered_by_name(tmp_path) -> None:
    behaviour = {"acceptance": 0.8, "content_factors": {REJECTED: 0.0}}
    server = {"request_class_label": RULES_CLASS_LABEL}
    with running_stack(tmp_path / "stack", behaviour, server_extra=server) as stack:
        model = requests.get(stack.standin_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        chat = [_Client(stack.standin_url, model, "chat", f"Summarise the weather report {i}.")
                for i in range(3)]  # fmt: skip
        code = _Client(stack.standin_url, model, "code", f"Explain the {REJECTED} module.")
        others = [_Client(stack.standin_url, model, "tenant-x", "Describe a harbour."),
                  _Client(stack.standin_url, model, None, "Describe a lighthouse.")]
        clients = [*chat, code, *others]
        since = time.time()
        for client in clients:
            client.start()
        try:
            fired = _delivered(stack, "firing", since)
            assert fired.labels[RULES_CLASS_LABEL] == "code", fired.labels
            assert "Requests of class code" in fired.annotations["description"]
            record = f"{CLASS_ACCEPT_LENGTH}{WINDOW}"
            rows = {row["metric"][RULES_CLASS_LABEL]: float(row["value"][1])
                    for row in stack.prometheus.query(record)}
            # tenant-x is summed into other; the unlabelled client is no class.
            assert set(rows) == {"chat", "code", "other"}, rows
            assert rows["code"] == pytest.approx(1.0) and rows["chat"] > 1.5, rows
            states = stack.prometheus.alert_states()
            assert "SpecDecodeAcceptLengthLow" not in states, states
            # The operator's next step names the same cause first, with the class.
            exit_code, findings, text = diagnosed(stack)
            assert exit_code == 1, text
            assert first_beyond_blind(findings) == ("cause", ALERT), text
            assert "workload_class=code" in text, text
            code.stop.set()
            code.join(timeout=20)
            _delivered(stack, "resolved", time.time())
        finally:
            for client in clients:
                client.stop.set()
            for client in clients:
                client.join(timeout=20)
        assert not any(client.errors for client in clients), [c.errors for c in clients]
