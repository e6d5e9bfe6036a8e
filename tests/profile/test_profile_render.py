"""Render: golden files per shipped profile, real SGLang flags, and the API key never printed.

Regenerate the golden files with UPDATE=1 pytest tests/profile/test_profile_render.py.
"""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest
from helpers import REPO, SHIPPED, kimi_doc, run_cli, write_doc

from specserve.profile.flags import OWNED_FLAGS
from specserve.profile.loader import load_profile
from specserve.profile.nodes import Placement
from specserve.profile.render import Rendered, argv_with_secret, format_shell, render

GOLDEN = REPO / "tests" / "profile" / "golden"
LEADER = "rank0.example.internal"
FORMATS = {"shell": "sh", "json": "json", "argv": "txt"}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("profile", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_golden_render(profile, fmt):
    # --configs-only as for `check`: no shipped profile's weights are on this machine (the
    # stand-in's models are config-only fixtures, whose shards `render` would otherwise refuse).
    # A profile spanning nodes renders rank 0 at the leader address a deploy would pass.
    leader = ["--rendezvous-host", LEADER] if load_profile(profile).nodes.count > 1 else []
    code, out, err = run_cli("render", str(profile), "--format", fmt, "--configs-only", *leader)
    assert code == 0, err
    # The stand-in profile's relative fixture paths resolve to this checkout's absolute path.
    out = out.replace(str(REPO), "<repo>")
    golden = GOLDEN / f"{profile.stem}.{FORMATS[fmt]}"
    if os.environ.get("UPDATE"):
        golden.write_text(out)
    assert out == golden.read_text()


def test_kimi_render_has_the_seeds_fixes():
    argv = list(render(load_profile(REPO / "profiles/kimi-k2.5-int4-eagle3-8gpu.yaml")).argv)
    pairs = dict(zip(argv, [*argv[1:], ""], strict=True))
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert pairs["--speculative-algorithm"] == "EAGLE3"
    assert pairs["--tp-size"] == "8"
    assert pairs["--mem-fraction-static"] == "0.85"
    assert pairs["--tool-call-parser"] == pairs["--reasoning-parser"] == "kimi_k2"
    assert (
        pairs["--speculative-num-steps"],
        pairs["--speculative-eagle-topk"],
        pairs["--speculative-num-draft-tokens"],
    ) == ("3", "1", "4")
    assert "--disable-custom-all-reduce" in argv
    assert "--disable-cuda-graph" not in argv


def test_every_rendered_flag_is_owned():
    # The extra_args denylist must cover every flag the renderer emits, or a hand-written
    # duplicate could override the profile.
    for path in SHIPPED:
        profile = load_profile(path)
        extra = set(profile.server.extra_args)  # the profile's own words, not the renderer's
        for arg in render(profile, placement=Placement(0, LEADER)).argv:
            if arg.startswith("--") and arg not in extra:
                assert arg in OWNED_FLAGS, arg


def test_shell_render_round_trips_through_shlex(tmp_path):
    doc = kimi_doc()
    doc["server"]["api_key"] = None
    doc["server"]["extra_args"] = [
        "--attention-backend",
        "flashinfer",
        "--chat-template",
        'it\'s a "template" $HOME',
    ]
    code, out, _ = run_cli("render", str(write_doc(tmp_path, doc)))
    assert code == 0
    words = shlex.split(out.replace("\\\n", " "))
    assert words[-1] == 'it\'s a "template" $HOME'
    assert "NCCL_PROTO=LL" in words


def test_api_key_is_never_printed(tmp_path, monkeypatch):
    secret = "sk-very-secret-value"
    key_file = tmp_path / "api-key"
    key_file.write_text(secret + "\n")
    for ref in ({"file": str(key_file)}, {"env": "SPECSERVE_API_KEY"}):
        monkeypatch.setenv("SPECSERVE_API_KEY", secret)
        doc = kimi_doc()
        doc["server"]["api_key"] = ref
        path = write_doc(tmp_path, doc)
        outputs = [run_cli("render", str(path), "--format", f)[1] for f in FORMATS]
        assert all(secret not in o for o in outputs)
        shell = outputs[0]
        expected = '"$SPECSERVE_API_KEY"' if "env" in ref else f'"$(cat {key_file})"'
        assert f"--api-key {expected}" in shell
        assert json.loads(outputs[1])["api_key_secret"]["flag"] == "--api-key"
        # Only the launcher's exec-time resolution puts the real key in argv.
        argv = argv_with_secret(render(load_profile(path)), dict(os.environ))
        assert argv[argv.index("--api-key") + 1] == secret


def test_render_refuses_a_profile_check_rejects(tmp_path):
    doc = kimi_doc()
    doc["server"]["extra_args"] = ["--disable-cuda-graph"]
    code, out, err = run_cli("render", str(write_doc(tmp_path, doc)))
    assert code == 1 and out == ""
    assert "server.extra_args[0]" in err


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_allowed_disable_cuda_graph_renders_the_replacement_of_the_deprecated_flag(
    tmp_path, version
):
    # Both versions deprecate --disable-cuda-graph (DeprecatedStoreTrueAction, new_flag
    # --cuda-graph-backend-{decode,prefill}=disabled); render the replacement, never the flag.
    doc = kimi_doc()
    doc["server"].update(disable_cuda_graph=True, allow_disable_cuda_graph=True)
    path = write_doc(tmp_path, doc)
    code, out, _ = run_cli("render", str(path), "--format", "argv", "--sglang-version", version)
    assert code == 0
    assert "--disable-cuda-graph\n" not in out
    assert "--cuda-graph-backend-decode\ndisabled\n--cuda-graph-backend-prefill\ndisabled\n" in out


def test_shell_render_is_linear_in_a_flags_values():
    """One flag with 4,000 values of 2 KB (8 MB, past any profile the limits let through):
    each value appended to its line's string copied the line, 4 s of CPU on a 2-core machine;
    joined once per line it is 0.04 s. The bound is 25 times that, a quarter of the old."""
    values = tuple(f"{i}".ljust(2000, "p") for i in range(4000))
    rendered = Rendered(argv=("specserve-standin", "--lora-paths", *values), env={}, api_key=None)
    start = time.process_time()
    text = format_shell(rendered)
    spent = time.process_time() - start
    first, flag_line = text.split(" \\\n  ")
    assert first == "specserve-standin" and flag_line == "--lora-paths " + " ".join(values) + "\n"
    assert spent < 1.0, f"{spent:.2f} s of CPU for 8 MB"
