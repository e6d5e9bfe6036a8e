"""`specserve-exporter`: wire a source, the parser state and the HTTP server together."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from prometheus_client import CollectorRegistry, generate_latest

from .collector import LogCollector
from .config import ConfigError, ExporterConfig, load_config
from .http import HttpServer, make_app
from .ingest import Ingestor
from .sources.base import LineSink, Source, SourceState
from .state import LogState


def build_source(config: ExporterConfig, sink: LineSink) -> Source:
    if config.source == "file":
        from .sources.file import FileSource

        assert config.file is not None
        return FileSource(
            config.file, sink, from_beginning=config.from_beginning or config.once,
            poll_interval=config.poll_interval,
        )
    if config.source == "docker":
        from .sources.docker import DockerSource

        assert config.docker_container is not None
        return DockerSource(config.docker_container, sink, from_beginning=config.from_beginning)
    if config.source == "kubernetes":
        from .sources.kubernetes import KubernetesSource, load_api

        return KubernetesSource(
            load_api(config.kubeconfig), sink, namespace=config.k8s_namespace,
            pod=config.k8s_pod, selector=config.k8s_selector, container=config.k8s_container,
            from_beginning=config.from_beginning,
        )
    from .sources.stream import StreamSource

    return StreamSource(sys.stdin.buffer, sink)


def run_once(registry: CollectorRegistry, source: Source) -> int:
    """Read what the source has now, print the metrics, exit: for demos and benchmarks."""
    from .sources.file import FileSource

    if isinstance(source, FileSource):
        source.poll_once()
        if source.status().state is not SourceState.FOLLOWING:
            print(f"specserve-exporter: {source.status().detail}", file=sys.stderr)
            return 1
    else:
        source.run()
    sys.stdout.write(generate_latest(registry).decode())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = load_config(argv)
    except ConfigError as exc:
        print(f"specserve-exporter: error: {exc}", file=sys.stderr)
        return 2
    state = LogState(config.speculation)
    ingestor = Ingestor(state)
    source = build_source(config, ingestor.feed)
    registry = CollectorRegistry()
    registry.register(LogCollector(state, source))
    if config.once:
        return run_once(registry, source)

    try:
        server = HttpServer(config.listen_host, config.listen_port, make_app(registry, source))
    except OSError as exc:
        print(
            f"specserve-exporter: error: cannot listen on {config.listen_host}:"
            f"{config.listen_port}: {exc.strerror}; choose another --listen-address",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    reader = threading.Thread(target=source.run, name=f"source-{source.kind}", daemon=True)
    reader.start()
    print(
        f"specserve-exporter: reading {source.kind} source, serving "
        f"http://{config.listen_host}:{server.port}/metrics",
        file=sys.stderr, flush=True,
    )
    while not stop.wait(0.5):
        if not reader.is_alive() and source.kind != "stdin":
            print("specserve-exporter: source thread died; exiting", file=sys.stderr)
            server.stop()
            return 1
    source.stop()
    reader.join(timeout=5)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
