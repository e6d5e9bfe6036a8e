"""Follow a Docker container's logs through the Docker Engine API (docker SDK).

The container is found by name on every (re)connect, so a restart (same container) and a
re-creation (a new container under the same name, as Ansible does on a profile change) are both
followed. Timestamps from the API let a reconnect resume right after the last line counted.
"""

from __future__ import annotations

import time

import docker
import docker.errors
import requests.exceptions

from .base import ErrorReason, LineBuffer, LineSink, ReconnectingSource, SourceState
from .timestamped import TimestampStripper


class DockerSource(ReconnectingSource):
    kind = "docker"

    def __init__(
        self,
        container: str,
        sink: LineSink,
        *,
        from_beginning: bool = False,
        retry_interval: float = 1.0,
        client: docker.DockerClient | None = None,
    ) -> None:
        super().__init__(retry_interval)
        self.container_name = container
        self._from_beginning = from_beginning
        self._stripper = TimestampStripper(sink)
        self._client = client
        self._stream: object | None = None
        self._connected_once = False
        # "Start at the end" means: skip what the container had printed when the exporter
        # started. A container absent at start has no such history; and once history was
        # skipped, a reconnect before any new line arrived must keep skipping it (`since`).
        self._seen_absent = False
        self._history_end: float | None = None

    def stop(self) -> None:
        super().stop()
        stream = self._stream
        if stream is not None and hasattr(stream, "close"):
            stream.close()  # unblocks the reader thread

    def _follow_once(self) -> None:
        try:
            client = self._client or docker.from_env()
            self._client = client
            container = client.containers.get(self.container_name)
        except docker.errors.NotFound:
            self._seen_absent = True
            self.set_state(SourceState.WAITING, f"container {self.container_name} not found")
            return
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self.set_state(
                SourceState.ERROR,
                f"Docker Engine API unreachable ({exc}): mount /var/run/docker.sock or set "
                "DOCKER_HOST",
                ErrorReason.API,
            )
            return
        kwargs: dict[str, object] = {"stream": True, "follow": True, "timestamps": True}
        if self._stripper.last_time is not None:
            kwargs["since"] = self._stripper.last_time
        elif self._history_end is not None:
            kwargs["since"] = self._history_end
        elif not self._from_beginning and not self._connected_once and not self._seen_absent:
            kwargs["tail"] = 0  # like tail -F: only what is written from now on
            self._history_end = time.time()
        if self._connected_once:
            self.count_reopen()
        self._connected_once = True
        self._stripper.resume()
        buffer = LineBuffer(self._stripper)
        try:
            self._stream = container.logs(**kwargs)
            self.set_state(
                SourceState.FOLLOWING, f"container {container.name} ({container.short_id})"
            )
            for chunk in self._stream:  # type: ignore[attr-defined]
                buffer.write(chunk)
                if self.stop_event.is_set():
                    break
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self.set_state(SourceState.WAITING, f"log stream ended: {exc}")
        except (AttributeError, ValueError, OSError):
            # The stream was closed under us by stop(): a normal way out.
            pass
        finally:
            buffer.flush()
            self._stream = None
        if not self.stop_event.is_set():
            self.set_state(SourceState.WAITING, f"container {self.container_name} stopped")
