"""Import SGLang once, then run each request in a fork of this process (tests only).

Runs INSIDE an SGLang venv. Importing `sglang.srt.server_args` (torch, transformers, SGLang)
costs 5-8 s of CPU; the contract tests make dozens of requests per run. Each request runs in a
fresh fork of a process that has imported SGLang and nothing else, so it sees exactly the state
a new `python SCRIPT` would after that import: no request sees another's changes.

Protocol, one JSON object a line. stdin: {"args": ["SCRIPT.py" | "-c", "CODE", ...],
"stdin": "..."}; stdout: {"rc": N, "stdout": "...", "stderr": "..."}. The server itself writes
nothing else to stdout; it ends at EOF on stdin.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
import threading
import traceback

import sglang.srt.server_args  # noqa: F401  (the import every request shares)

# Nothing imported above may have started a thread: a fork copies only the calling one.
assert threading.active_count() == 1, f"threads before fork: {threading.enumerate()}"


def _child(args: list[str], stdin_path: str, out_path: str, err_path: str) -> None:
    """Become `python ARGS` with the request's stdin, and exit with its status."""
    sys.stdin = open(stdin_path, encoding="utf-8")  # noqa: SIM115  (exits with the process)
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    code: int = 0
    try:
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path[0] = ""
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exit_:
        if isinstance(exit_.code, int) or exit_.code is None:
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:  # reported as `python` would, then exit 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    # Anything SGLang prints later must not mix with the replies.
    os.dup2(2, 1)
    with tempfile.TemporaryDirectory(prefix="specserve-forkserver-") as scratch:
        paths = [os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")]
        for line in sys.stdin:
            request = json.loads(line)
            for path, content in zip(paths, (request.get("stdin") or "", "", ""), strict=True):
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(content)
            pid = os.fork()
            if pid == 0:
                _child(request["args"], *paths)
            _, status = os.waitpid(pid, 0)
            with open(paths[1], encoding="utf-8", errors="replace") as out, \
                 open(paths[2], encoding="utf-8", errors="replace") as err:
                answer = {"rc": os.waitstatus_to_exitcode(status), "stdout": out.read(),
                          "stderr": err.read()}
            reply.write(json.dumps(answer) + "\n")
            reply.flush()


if __name__ == "__main__":
    main()
