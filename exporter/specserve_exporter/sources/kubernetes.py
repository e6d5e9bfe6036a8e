"""Follow a pod container's logs through the Kubernetes API (kubernetes client).

The pod is named, or found by label selector on every (re)connect: a Deployment replaces pods
under new names. Container restarts end the log stream; the source reconnects and resumes after
the last line counted (the API's timestamps). RBAC needed: get/list on pods and get on pods/log in
the pod's namespace, nothing else (the chart's Role grants exactly that).
"""

from __future__ import annotations

import time

import urllib3.exceptions
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from .base import ErrorReason, LineBuffer, LineSink, ReconnectingSource, SourceState
from .timestamped import TimestampStripper


def load_api(kubeconfig: str | None = None) -> k8s.CoreV1Api:
    """In-cluster service account when there is one, else a kubeconfig file."""
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig)
    else:
        try:
            k8s_config.load_incluster_config()
        except k8s_config.ConfigException:
            k8s_config.load_kube_config()
    return k8s.CoreV1Api()


class KubernetesSource(ReconnectingSource):
    kind = "kubernetes"

    def __init__(
        self,
        api: k8s.CoreV1Api,
        sink: LineSink,
        *,
        namespace: str,
        pod: str | None = None,
        selector: str | None = None,
        container: str | None = None,
        from_beginning: bool = False,
        retry_interval: float = 1.0,
    ) -> None:
        super().__init__(retry_interval)
        if not pod and not selector:
            raise ValueError("give a pod name or a label selector")
        self.api = api
        self.namespace, self.pod, self.selector = namespace, pod, selector
        self.container = container
        self._from_beginning = from_beginning
        self._stripper = TimestampStripper(sink)
        self._connected_once = False
        self._response: object | None = None
        # "Start at the end" skips what the pod had logged when the exporter started: not when
        # no pod was there at start, and still after a reconnect that came before a new line.
        self._seen_absent = False
        self._history_end: float | None = None

    def stop(self) -> None:
        super().stop()
        response = self._response
        if response is not None and hasattr(response, "release_conn"):
            response.release_conn()

    def _api_error(self, action: str, exc: Exception) -> str:
        """One line naming what failed and the fix (ApiException's str() is a multi-line dump)."""
        if not isinstance(exc, ApiException):
            return (f"Kubernetes API unreachable, cannot {action} ({exc}): check --kubeconfig or "
                    "the pod's service account")
        message = f"Kubernetes API refused to {action}: {exc.status} {exc.reason}"
        if exc.status in (401, 403):
            message += (f"; grant the exporter's service account get/list on pods and get on "
                        f"pods/log in namespace {self.namespace} (the chart's Role does)")
        return message

    def _pod_name(self) -> str | None:
        if self.pod:
            return self.pod
        pods = self.api.list_namespaced_pod(self.namespace, label_selector=self.selector)
        running = [p for p in pods.items if p.status and p.status.phase == "Running"]
        if not running:
            return None
        # The newest running pod: after a rollout the old one is on its way out.
        newest = max(running, key=lambda p: p.metadata.creation_timestamp or 0)
        name: str = newest.metadata.name
        return name

    def _follow_once(self) -> None:
        try:
            pod = self._pod_name()
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            self.set_state(SourceState.ERROR, self._api_error("list pods", exc), ErrorReason.API)
            return
        if pod is None:
            self._seen_absent = True
            self.set_state(SourceState.WAITING, f"no running pod matches {self.selector!r}")
            return
        kwargs: dict[str, object] = {
            "follow": True, "timestamps": True, "_preload_content": False,
        }
        if self.container:
            kwargs["container"] = self.container
        last = self._stripper.last_time
        resume_after = last if last is not None else self._history_end
        if resume_after is not None:
            # The API has no sub-second `sinceTime` in this client: ask a little early and let
            # the timestamp filter drop what was already counted (or skipped at start).
            kwargs["since_seconds"] = max(1, int(time.time() - resume_after) + 2)
        elif not self._from_beginning and not self._connected_once and not self._seen_absent:
            kwargs["tail_lines"] = 0
            self._history_end = time.time()
        if self._connected_once:
            self.count_reopen()
        self._connected_once = True
        self._stripper.resume(floor=resume_after)
        buffer = LineBuffer(self._stripper)
        try:
            self._response = self.api.read_namespaced_pod_log(pod, self.namespace, **kwargs)
            self.set_state(SourceState.FOLLOWING, f"pod {self.namespace}/{pod}")
            for chunk in self._response.stream(64 * 1024):  # type: ignore[attr-defined]
                buffer.write(chunk)
                if self.stop_event.is_set():
                    break
        except ApiException as exc:
            state = SourceState.ERROR if exc.status in (401, 403) else SourceState.WAITING
            self.set_state(
                state, self._api_error(f"read the log of pod {pod}", exc), ErrorReason.API)
        except (urllib3.exceptions.HTTPError, OSError, AttributeError) as exc:
            self.set_state(SourceState.WAITING, f"pod log stream ended: {exc}")
        finally:
            buffer.flush()
            self._response = None
        if not self.stop_event.is_set() and self.status().state is SourceState.FOLLOWING:
            self.set_state(SourceState.WAITING, f"pod {pod} log stream ended")
