"""Chat-completion load on the stand-in: on for the whole end-to-end test, bounded in time."""

from __future__ import annotations

import threading
import time

import requests


class LoadGenerator:
    """`clients` threads each sending one chat completion after another while switched on."""

    def __init__(self, url: str, clients: int, max_tokens: int, deadline_s: float) -> None:
        self._base = url
        self._url = url + "/v1/chat/completions"
        self._model = ""
        self._max_tokens = max_tokens
        self._on = threading.Event()
        self._stop = threading.Event()
        self._deadline = time.monotonic() + deadline_s
        self._lock = threading.Lock()
        self.completed = 0
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)
        ]

    def start(self) -> None:
        # The served model name, as a client asks it: SGLang's router (smg) routes by `model`
        # (a body without one is a 400) where SGLang itself ignores it.
        models = requests.get(self._base + "/v1/models", timeout=30)
        models.raise_for_status()
        self._model = str(models.json()["data"][0]["id"])
        for thread in self._threads:
            thread.start()

    def on(self) -> None:
        self._on.set()

    def off(self) -> None:
        self._on.clear()

    def stop(self) -> None:
        self._stop.set()
        self._on.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _client(self, index: int) -> None:
        # No keyword from the stand-in's content_factors ("code", "poem"): factor 1.
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": f"Summarise the weather report {index}."}],
            "max_tokens": self._max_tokens,
            "ignore_eos": True,
        }
        session = requests.Session()
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            if not self._on.wait(timeout=0.2) or self._stop.is_set():
                continue
            try:
                response = session.post(self._url, json=body, timeout=15)
                response.raise_for_status()
                usage = response.json()["usage"]
                if usage["completion_tokens"] != self._max_tokens:
                    raise ValueError(f"asked {self._max_tokens} tokens, got {usage}")
            except (requests.RequestException, ValueError, KeyError) as exc:
                with self._lock:
                    self.errors.append(repr(exc))
                time.sleep(0.2)
                continue
            with self._lock:
                self.completed += 1
