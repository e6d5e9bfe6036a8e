"""Bounded input for `specserve check`, `specserve render` and the launcher's profile loading.

Every hostile input the issue lists (billion laughs, 100k-deep nesting, invalid UTF-8, a profile
over 1 MiB, a huge extra_args, symlink loops for the profile / a model path / a shard / the
weights root, a directory, a FIFO, /dev/zero) must end in one line naming the problem and the
fix, exit 1 or 2, no traceback, under 2 s of CPU and 200 MB of memory, measured on a real
`specserve` process. A property test then feeds random bytes and random structures in-process.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES, PROFILES, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specserve.profile import bounded
from specserve.profile.bounded import (
    MAX_DEPTH,
    MAX_EXPANDED_BYTES,
    MAX_ITEMS,
    MAX_NODES,
    MAX_PROFILE_BYTES,
    InputError,
    check_structure,
)

SPECSERVE = str(Path(sys.executable).with_name("specserve"))
LAUNCH = str(Path(sys.executable).with_name("specserve-launch"))
CPU_LIMIT_S = 2.0
RSS_LIMIT_MIB = 200

# Runs the command in a fresh forked child and reports the child's own CPU time and peak RSS
# (a child that Python starts with vfork would inherit pytest's peak RSS).
PROBE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\nPROBE " + json.dumps({"cpu": usage.ru_utime + usage.ru_stime,
    "rss_kib": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}) + "\\n")
"""


def measured(*cmd: str, env: dict[str, str] | None = None) -> tuple[int, str, float, float]:
    """Exit code, stdout + stderr, CPU seconds and peak RSS (MiB) of one real process."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *cmd],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    err, _, probe = proc.stderr.rpartition("\nPROBE ")
    stats = json.loads(probe)
    return stats["code"], proc.stdout + err, stats["cpu"], stats["rss_kib"] / 1024


def standin_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((PROFILES / "standin-cpu.yaml").read_text())
    doc["target"]["path"] = str(FIXTURES / "Llama-3.1-8B-Instruct")
    doc["drafter"]["path"] = str(FIXTURES / "EAGLE3-LLaMA3.1-Instruct-8B")
    return doc


def good_text() -> str:
    return yaml.safe_dump(standin_doc(), sort_keys=False)


def assert_refused(
    code: int, output: str, cpu: float, rss: float, *, expect: str, codes: tuple[int, ...] = (1, 2)
) -> None:
    assert "Traceback" not in output, output[-3000:]
    assert code in codes, (code, output[-2000:])
    assert expect in output, output[-2000:]
    named = [line for line in output.splitlines() if expect in line]
    assert "Fix:" in named[0], f"the message names no fix: {named[0]}"
    assert len(named[0]) < 400, "one short line, not a dump"
    assert len(output) < 4000, f"{len(output)} bytes of output"
    assert cpu < CPU_LIMIT_S, f"{cpu:.2f} s of CPU"
    assert rss < RSS_LIMIT_MIB, f"{rss:.0f} MiB peak RSS"


def billion_laughs() -> str:
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        rows.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(rows) + "\n" + good_text().replace("name: standin-cpu", "name: *i")


def content_cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Hostile profile contents: name -> (file, text the one-line message must hold)."""
    good = good_text()
    cases: dict[str, tuple[bytes, str]] = {
        "billion laughs in name": (billion_laughs().encode(), "aliases counted"),
        "100k-deep flow nesting": (b"name: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nest"),
        "deep block nesting": (
            "".join(f"{'  ' * i}k{i}:\n" for i in range(200)).encode() + b"  " * 200 + b"v\n",
            "nested deeper",
        ),
        "invalid UTF-8": (
            good.replace("CPU stand-in", "CPU \udcff stand-in").encode("utf-8", "surrogateescape"),
            "not valid UTF-8 at line",
        ),
        "over 1 MiB": (good.encode() + b"#" + b"x" * MAX_PROFILE_BYTES + b"\n", "byte limit"),
        "300k extra_args under 1 MiB": (
            good.replace(
                "enable_metrics: true",
                "enable_metrics: true\n  extra_args: [" + ",".join(["a"] * 300_000) + "]",
            ).encode(),
            "has over",
        ),
        "5M extra_args by alias": (
            (
                "x: &x ["
                + ",".join(["--a"] * 1000)
                + "]\n"
                + good.replace(
                    "enable_metrics: true",
                    "enable_metrics: true\n  extra_args: [" + ",".join(["*x"] * 5000) + "]",
                )
            ).encode(),
            "aliases counted",
        ),
        # 1,001 values, under MAX_NODES, but 900 MB of argv: render ran for minutes.
        "900 KB anchor aliased 1,000 times": (
            good.replace(
                "enable_metrics: true",
                "enable_metrics: true\n  extra_args: [--chat-template, &t "
                + "t" * 900_000
                + ", "
                + ", ".join(["*t"] * 1000)
                + "]",
            ).encode(),
            "expands to 900,900,",
        ),
        # Past the text limit the walk goes on counting (to name the whole size): it must
        # stay as cheap over the rest of a 1 MiB file as the item limit was.
        "text over the limit, then 300k items": (
            (
                "x: &x "
                + "x" * 2000
                + "\ny: ["
                + ",".join(["*x"] * 600)
                + "]\nz: ["
                + ",".join(["a"] * 300_000)
                + "]\n"
            ).encode(),
            "bytes of text (aliases counted",
        ),
        "recursive alias": (b"name: &n [*n]\n", "recursive"),
        "YAML syntax error": (b"name: [unclosed\n", "not valid YAML at line"),
    }
    out = {}
    for i, (name, (data, expect)) in enumerate(cases.items()):
        path = tmp / f"case{i}.yaml"
        path.write_bytes(data)
        out[name] = (path, expect)
    return out


CONTENT = [
    "billion laughs in name",
    "100k-deep flow nesting",
    "deep block nesting",
    "invalid UTF-8",
    "over 1 MiB",
    "300k extra_args under 1 MiB",
    "5M extra_args by alias",
    "900 KB anchor aliased 1,000 times",
    "text over the limit, then 300k items",
    "recursive alias",
    "YAML syntax error",
]


@pytest.mark.parametrize("case", CONTENT)
@pytest.mark.parametrize("command", ["check", "render"])
def test_hostile_content_is_refused_in_one_line_quickly(
    tmp_path: Path, case: str, command: str
) -> None:
    path, expect = content_cases(tmp_path)[case]
    code, output, cpu, rss = measured(SPECSERVE, command, str(path))
    assert_refused(code, output, cpu, rss, expect=expect, codes=(1,))


def test_the_launcher_refuses_hostile_content_too(tmp_path: Path) -> None:
    path, expect = content_cases(tmp_path)["billion laughs in name"]
    code, output, cpu, rss = measured(LAUNCH, str(path), env={**os.environ, "PATH": "/bin"})
    assert_refused(code, output, cpu, rss, expect=expect, codes=(1,))


def special_paths(tmp: Path) -> dict[str, tuple[str, str]]:
    loop = tmp / "loop1"
    loop.symlink_to(tmp / "loop2")
    (tmp / "loop2").symlink_to(loop)
    (tmp / "adir").mkdir()
    os.mkfifo(tmp / "fifo")
    return {
        "symlink loop": (str(loop), "is a symlink loop"),
        "directory": (str(tmp / "adir"), "is a directory"),
        "FIFO without a writer": (str(tmp / "fifo"), "is a FIFO"),
        "/dev/zero": ("/dev/zero", "is a character device"),
        "missing": (str(tmp / "nope.yaml"), "no such file"),
    }


SPECIAL = ["symlink loop", "directory", "FIFO without a writer", "/dev/zero", "missing"]


@pytest.mark.parametrize("case", SPECIAL)
@pytest.mark.parametrize("command", ["check", "render", "launch"])
def test_a_path_that_is_no_profile_file_is_a_usage_error(
    tmp_path: Path, case: str, command: str
) -> None:
    path, expect = special_paths(tmp_path)[case]
    if command == "launch":
        cmd: tuple[str, ...] = (LAUNCH, path)
        if case == "missing":
            expect = "not found"  # the launcher's own wording: it names $SPECSERVE_PROFILE
    else:
        cmd = (SPECSERVE, command, path)
    start = time.monotonic()
    code, output, cpu, rss = measured(*cmd)
    assert time.monotonic() - start < 30, "a FIFO or a device must not block the reader"
    if case == "missing" and command == "launch":
        assert code == 2 and expect in output and "Traceback" not in output
        return
    assert_refused(code, output, cpu, rss, expect=expect, codes=(2,))


def model_tree(tmp: Path) -> dict[str, Path]:
    """A target directory whose shards include a symlink loop, and model paths that loop."""
    target = tmp / "models" / "target"
    target.mkdir(parents=True)
    src = FIXTURES / "Llama-3.1-8B-Instruct"
    for name in ("config.json", "model.safetensors.index.json"):
        (target / name).write_bytes((src / name).read_bytes())
    index = json.loads((target / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    for shard in shards[1:]:
        (target / shard).write_bytes(b"x")
    (target / shards[0]).symlink_to(target / "shard-loop")
    (target / "shard-loop").symlink_to(target / shards[0])
    (tmp / "models" / "mloop").symlink_to(tmp / "models" / "mloop2")
    (tmp / "models" / "mloop2").symlink_to(tmp / "models" / "mloop")
    (tmp / "wloop").symlink_to(tmp / "wloop2")
    (tmp / "wloop2").symlink_to(tmp / "wloop")
    return {"target": target, "shard": target / shards[0], "mloop": tmp / "models" / "mloop"}


def write_profile(tmp: Path, doc: dict[str, Any], name: str = "p.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_model_path_that_is_a_symlink_loop_is_an_error_naming_the_field(tmp_path: Path) -> None:
    tree = model_tree(tmp_path)
    doc = standin_doc()
    doc["target"]["path"] = str(tree["mloop"])
    code, output, cpu, rss = measured(SPECSERVE, "check", str(write_profile(tmp_path, doc)))
    assert_refused(code, output, cpu, rss, expect="target.path: ", codes=(1,))
    assert f"{tree['mloop']} is a symlink loop" in output
    assert "not on this machine" not in output  # it is on this machine, broken


def test_a_relative_model_path_that_loops_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    model_tree(tmp_path)
    doc = standin_doc()
    doc["target"]["path"] = "./models/mloop"
    for command in ("check", "render"):
        code, output, cpu, rss = measured(SPECSERVE, command, str(write_profile(tmp_path, doc)))
        assert_refused(code, output, cpu, rss, expect="is a symlink loop", codes=(1,))


def test_a_shard_that_is_a_symlink_loop_is_named(tmp_path: Path) -> None:
    tree = model_tree(tmp_path)
    doc = standin_doc()
    doc["target"]["path"] = str(tree["target"])
    code, output, cpu, rss = measured(SPECSERVE, "check", str(write_profile(tmp_path, doc)))
    assert_refused(code, output, cpu, rss, expect="symlink loops", codes=(1,))
    assert tree["shard"].name in output


def test_a_config_json_that_is_dev_zero_or_a_fifo_is_an_error(tmp_path: Path) -> None:
    for i, make in enumerate(("zero", "fifo")):
        model = tmp_path / f"m{i}"
        model.mkdir()
        if make == "zero":
            (model / "config.json").symlink_to("/dev/zero")
        else:
            os.mkfifo(model / "config.json")
        doc = standin_doc()
        doc["target"]["path"] = str(model)
        code, output, cpu, rss = measured(
            SPECSERVE, "check", str(write_profile(tmp_path, doc)), "--configs-only"
        )
        expect = "is a character device" if make == "zero" else "is a FIFO"
        assert_refused(code, output, cpu, rss, expect=expect, codes=(1,))


def test_a_weights_root_that_loops_is_a_usage_error_not_not_on_this_machine(
    tmp_path: Path,
) -> None:
    model_tree(tmp_path)
    doc = standin_doc()
    doc["target"]["path"] = "/models/Llama-3.1-8B-Instruct"
    code, output, cpu, rss = measured(
        SPECSERVE,
        "check",
        str(write_profile(tmp_path, doc)),
        "--weights-root",
        str(tmp_path / "wloop"),
    )
    assert_refused(code, output, cpu, rss, expect="--weights-root", codes=(2,))
    assert "symlink loop" in output and "not on this machine" not in output


def test_limits_are_generous_for_real_profiles() -> None:
    for path in sorted(PROFILES.glob("*.yaml")):
        assert path.stat().st_size * 100 < MAX_PROFILE_BYTES
        _, out, err = run_cli("render", str(path))
        assert "Traceback" not in err and "(file)" not in out + err, (path, err)
    doc = standin_doc()
    doc["server"]["extra_args"] = ["--log-level", "info"] * (MAX_ITEMS // 2)
    _, out, _ = run_cli(
        "check",
        str(write_profile(Path(os.environ.get("TMPDIR", "/tmp")), doc, f"lim{os.getpid()}.yaml")),
    )
    assert "has over" not in out, "exactly MAX_ITEMS items is allowed"
    assert MAX_DEPTH >= 8 and MAX_NODES >= 10 * MAX_ITEMS


def test_aliases_count_as_the_bytes_of_text_they_stand_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # key a (1) + "héllo" (6 bytes in UTF-8) + key b (1) + [*x, *x] (12) + key c (1) + the
    # list anchored as &l: "zz" (2) + *x (6) = 8 + key d (1) + *l (8): 38 bytes of text.
    doc = "a: &x héllo\nb: [*x, *x]\nc: &l [zz, *x]\nd: *l\n"
    monkeypatch.setattr(bounded, "MAX_EXPANDED_BYTES", 38)
    check_structure(doc)  # exactly at the limit: allowed
    monkeypatch.setattr(bounded, "MAX_EXPANDED_BYTES", 37)
    with pytest.raises(InputError) as refused:
        check_structure(doc)
    message = str(refused.value)
    assert message.startswith("d: the document expands to 38 bytes of text"), message
    assert "over the 37-byte limit" in message and "Fix: write the value once" in message
    assert "\n" not in message


def test_the_expanded_size_counts_every_alias_even_past_the_limit() -> None:
    """The refusal names the whole expanded size (walked as events, nothing built), not the
    point where the limit was passed."""
    value = "v" * 600_000
    doc = f"a: &x {value}\nb: [{', '.join(['*x'] * 50)}]\n"
    with pytest.raises(InputError) as refused:
        check_structure(doc)
    total = 1 + len(value) + 1 + 50 * len(value)
    assert f"b[0]: the document expands to {total:,} bytes of text" in str(refused.value)
    assert f"over the {MAX_EXPANDED_BYTES:,}-byte limit" in str(refused.value)


def test_a_profile_that_aliases_within_the_limit_still_renders(tmp_path: Path) -> None:
    text = good_text().replace(
        "enable_metrics: true",
        "enable_metrics: true\n  extra_args: [--chat-template, &t " + "t" * 100_000 + "]\n"
        "env:\n  TEMPLATE_COPY: *t",
    )
    path = tmp_path / "aliased.yaml"
    path.write_text(text)
    code, out, err = run_cli("render", str(path), "--configs-only", "--format", "json")
    assert code == 0, err
    rendered = json.loads(out)
    assert rendered["env"]["TEMPLATE_COPY"] == "t" * 100_000
    assert rendered["argv"][-1] == "t" * 100_000


# --- property: random bytes and random structures never give a traceback ----------------


def in_process(path: Path) -> None:
    """check and render on `path`, in-process: any exception escaping is a traceback; each
    call must finish under the time bound and allocate under the memory bound."""
    for args in (
        ("check", str(path)),
        ("render", str(path)),
        ("check", str(path), "--format", "json"),
    ):
        tracemalloc.start()
        start = time.process_time()
        try:
            code, out, err = run_cli(*args)
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        spent = time.process_time() - start
        assert code in (0, 1, 2), (args, code, err)
        assert "Traceback" not in out + err
        # tracemalloc slows Python several-fold, so the CPU bound is loose but still real.
        assert spent < 3 * CPU_LIMIT_S, f"{args}: {spent:.2f} s"
        assert peak < RSS_LIMIT_MIB * 2**20, f"{args}: {peak / 2**20:.0f} MiB allocated"


PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(data=st.binary(max_size=2048))
def test_random_bytes_never_traceback(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "random.yaml"
    path.write_bytes(data)
    in_process(path)


@PROPERTY
@given(data=st.binary(max_size=512), at=st.integers(0, 2000))
def test_random_bytes_spliced_into_a_good_profile_never_traceback(
    tmp_path: Path, data: bytes, at: int
) -> None:
    good = good_text().encode()
    path = tmp_path / "spliced.yaml"
    path.write_bytes(good[:at] + data + good[at:])
    in_process(path)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["EAGLE3", "EAGLE", "none", "--tp-size", "8", "-1"]),
)
KEYS = st.one_of(
    st.sampled_from(
        [
            "path",
            "algorithm",
            "tp",
            "dp",
            "count",
            "extra_args",
            "file",
            "env",
            "preset",
            "overrides",
            "1",
            "api_key",
            "num_steps",
            "eagle_topk",
        ]
    ),
    st.text(max_size=12),
    st.integers(-3, 3),
    st.booleans(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(KEYS, inner, max_size=6)),
    max_leaves=30,
)
SECTIONS = [
    "version",
    "name",
    "target",
    "drafter",
    "parallelism",
    "gpu",
    "server",
    "nccl",
    "logging",
    "baseline",
    "description",
]


@PROPERTY
@given(section=st.sampled_from(SECTIONS), key=st.one_of(st.none(), KEYS), value=VALUES)
def test_random_structures_in_a_good_profile_never_traceback(
    tmp_path: Path, section: str, key: Any, value: Any
) -> None:
    doc = standin_doc()
    if key is None or not isinstance(doc.get(section), dict):
        doc[section] = value
    else:
        doc[section][key] = value
    path = tmp_path / "structure.yaml"
    try:
        path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    except yaml.YAMLError:
        return  # not representable as YAML: nothing to feed
    in_process(path)


def test_rusage_is_measured_for_the_child_not_the_parent() -> None:
    """The probe's figures are the child's own: a child that allocates 300 MB shows it."""
    code, _, _, rss = measured(
        sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    )
    assert code == 0 and rss > 250
    code, _, _, rss = measured(sys.executable, "-c", "pass")
    assert rss < 60, f"a bare interpreter at {rss:.0f} MiB: the parent's peak leaked in"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
