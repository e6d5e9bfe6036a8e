"""What exec refuses (E2BIG) is refused first, in one line naming the argument and the limit.

The model of the kernel's limits (specserve/profile/execlimits.py) is held to the real kernel:
exec of a string at the per-string limit, one byte over it, and argv around the total limit
under a lowered stack limit. Then `specserve check` on a profile with a 200 KB argument (it
passed, and the launcher's dry run ended in an E2BIG traceback) and the dry run's own exec.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from helpers import FIXTURES, PROFILES, run_cli

from specserve.launch.server_parser import run_parser
from specserve.profile.execlimits import USUAL, limits_for, oversizes, this_process

SPECSERVE = str(Path(sys.executable).with_name("specserve"))
TRUE = "/bin/true"
PAGE = os.sysconf("SC_PAGESIZE")


def _exec(argv: list[str], stack: int | None = None) -> str:
    """'ok', or the error exec gave; `stack` lowers the stack soft limit the exec meets."""
    prefix = ["prlimit", f"--stack={stack}:", "--"] if stack else []
    try:
        subprocess.run([*prefix, *argv], env={}, check=True, capture_output=True, timeout=30)
    except subprocess.CalledProcessError as exc:  # prlimit reports its own exec's failure
        return exc.stderr.decode(errors="replace").strip() or f"exit {exc.returncode}"
    except OSError as exc:
        return exc.strerror or str(exc)
    return "ok"


def test_one_string_at_the_per_string_limit_execs_and_one_byte_more_is_refused() -> None:
    limits = this_process()
    assert limits.per_string == 32 * PAGE
    fits = [TRUE, "a" * (limits.per_string - 1)]  # with its NUL, exactly the limit
    over = [TRUE, "a" * limits.per_string]
    assert oversizes(fits, {}, limits) == [] and _exec(fits) == "ok"
    found = oversizes(over, {}, limits)
    assert [o.where for o in found] == ["argument 1 of the command"]
    assert "Argument list too long" in _exec(over)


def test_the_total_limit_never_accepts_what_the_kernel_refuses() -> None:
    stack = 1024 * 1024  # a quarter of it, 256 KiB, is the limit on argv + environment
    limits = limits_for(PAGE, stack, "test")
    assert limits.total == max(stack // 4, 32 * PAGE)
    verdicts = []
    for count in range(50, 80, 2):
        argv = [TRUE, *(["b" * 4000] * count)]
        fits = not oversizes(argv, {}, limits)
        result = _exec(argv, stack)
        assert result == "ok" or not fits, f"{count} args: the model says it fits, exec: {result}"
        verdicts.append((fits, result == "ok"))
    # The range straddles the limit, and the model is short of the kernel by at most 2 args.
    assert (True, True) in verdicts and (False, False) in verdicts
    assert sum(1 for fits, ran in verdicts if ran and not fits) <= 1


def test_the_total_names_the_largest_and_the_limit() -> None:
    argv = ["python3", *(["--chat-template", "c" * 120_000] * 18)]
    found = oversizes(argv, {"NCCL_PROTO": "LL"}, USUAL, ["server.launch_command[0]"])
    assert len(found) == 1
    line = found[0].line()
    assert line.startswith("(command): argv and environment are 2,1")
    assert "over the kernel's 2,097,152-byte limit (a quarter of the usual 8 MiB" in line
    assert "the largest is argument 2 of the command (the value of --chat-template)" in line
    assert "Fix: shorten server.extra_args" in line and "\n" not in line


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((PROFILES / "standin-cpu.yaml").read_text())
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc["drafter"]["path"] = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")
    return doc


def _write(tmp: Path, doc: dict[str, Any]) -> Path:
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 30))
    return path


def test_check_and_render_refuse_a_200_kb_argument_in_one_line(tmp_path: Path) -> None:
    doc = _doc()
    doc["server"]["extra_args"] = ["--chat-template", "x" * 200_000]
    path = _write(tmp_path, doc)
    for command in ("check", "render"):
        proc = subprocess.run(
            [SPECSERVE, command, str(path), "--configs-only"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        output = proc.stdout + proc.stderr
        assert proc.returncode == 1, output[-2000:]
        assert "Traceback" not in output and len(output) < 4000
        [line] = [ln for ln in output.splitlines() if "MAX_ARG_STRLEN" in ln]
        assert line.startswith(
            "error: server.extra_args[1] (the value of --chat-template): is 200,000 bytes, "
            "over the kernel's 131,071-byte limit for one argument or variable"
        ), line
        assert "Fix: pass bulk content as a file" in line


def test_an_argument_at_the_limit_passes_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    for size, code in ((USUAL.per_string - 1, 0), (USUAL.per_string, 1)):
        doc = _doc()
        doc["server"]["extra_args"] = ["--chat-template", "x" * size]
        got, out, err = run_cli("check", str(_write(tmp_path, doc)), "--configs-only")
        assert got == code, (size, out, err)
        assert ("MAX_ARG_STRLEN" in out) is bool(code)


def test_an_oversized_variable_is_named_by_its_field(tmp_path: Path) -> None:
    doc = _doc()
    doc["env"] = {"BIG_TEMPLATE": "y" * 140_000}
    doc["nccl"]["overrides"] = {"NCCL_DEBUG": "INFO"}
    code, out, _ = run_cli("check", str(_write(tmp_path, doc)), "--configs-only")
    assert code == 1
    [line] = [ln for ln in out.splitlines() if "MAX_ARG_STRLEN" in ln]
    assert line.startswith("error: env.BIG_TEMPLATE: is 140,013 bytes"), line


def test_the_dry_runs_parser_exec_failing_is_a_result_not_a_traceback() -> None:
    result = run_parser([sys.executable, "-c", "pass", "z" * 200_000], {})
    assert result.exit_code == 126
    assert result.message == f"cannot run {sys.executable}: Argument list too long"
