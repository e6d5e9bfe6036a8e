"""Where the SGLang log lives: the one path convention of every image, deploy path and doc.

The launcher tees SGLang's output into a profile's `logging.file` and the exporter follows that
file; the shipped profiles set it to LOG_FILE. LOG_DIR is a directory of its own because every
deploy path shares it between the server (read-write) and the exporter (read-only): the SGLang
and stand-in images create it for their user, Ansible mounts the host directory of the same name
(`server_log_dir`), the chart mounts a volume there, and the exporter image's default command and
the exporter's `--file` default follow LOG_FILE. The path is the same on the host and in the
containers, so a log path in a message, a doc or `docker inspect` means one place.

Imported by the exporter too, so this module imports nothing. tests/test_log_path.py checks the
Dockerfiles, the chart, the Ansible defaults, the shipped profiles and the docs against it.
"""

from __future__ import annotations

LOG_DIR = "/var/log/specserve/sglang"
LOG_FILE = f"{LOG_DIR}/sglang.log"
