"""The profile's nodes block: check's multi-node rules, render per rank, the launcher's rank."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.loader import load_profile
from specserve.profile.nodes import Placement, PlacementError
from specserve.profile.render import render_argv
from tests.profile.helpers import REPO, check_json, kimi_doc, run_cli, write_doc

MULTI = REPO / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"


def multi_doc() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(MULTI.read_text(encoding="utf-8")))


def _errors(tmp: Path, doc: dict[str, Any]) -> list[dict[str, str]]:
    code, report = check_json(write_doc(tmp, doc), "--configs-only")
    found: list[dict[str, str]] = report["errors"]
    assert (code == 1) == bool(found), report
    return found


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_single_node_profiles_render_no_distributed_flags() -> None:
    argv = render_argv(load_profile(REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"))
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(argv)


def test_each_rank_renders_its_own_rank_and_the_same_rendezvous() -> None:
    profile = load_profile(MULTI)
    argvs = [render_argv(profile, placement=Placement(r, "10.0.0.1")) for r in (0, 1)]
    assert [_flag(a, "--node-rank") for a in argvs] == ["0", "1"]
    assert {_flag(a, "--nnodes") for a in argvs} == {"2"}
    assert {_flag(a, "--dist-init-addr") for a in argvs} == {"10.0.0.1:25000"}
    # Everything but the rank is the same command on every node.
    strip = [[w for i, w in enumerate(a) if i != a.index("--node-rank") + 1] for a in argvs]
    assert strip[0] == strip[1]


def test_the_profile_rendezvous_host_is_used_unless_the_deploy_gives_one(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["nodes"]["rendezvous_host"] = "rank0.example.internal"
    profile = load_profile(write_doc(tmp_path, doc))
    assert _flag(render_argv(profile), "--dist-init-addr") == "rank0.example.internal:25000"
    deploy = render_argv(profile, placement=Placement(1, "fd00::1"))
    assert _flag(deploy, "--dist-init-addr") == "[fd00::1]:25000"


def test_rank_outside_the_group_and_an_unknown_rendezvous_are_refused() -> None:
    profile = load_profile(MULTI)
    with pytest.raises(PlacementError, match=r"node rank 2: .* ranks are 0\.\.1\. Fix: pass"):
        render_argv(profile, placement=Placement(2, "h"))
    with pytest.raises(PlacementError, match=r"no rendezvous address is known\. Fix: set"):
        render_argv(profile)
    code, _, err = run_cli("render", str(MULTI), "--node-rank", "1")
    assert code == 2 and "nodes.rendezvous_host" in err and "--rendezvous-host" in err
    code, out, _ = run_cli("render", str(MULTI), "--format", "argv", "--node-rank", "1",
                           "--rendezvous-host", "h.example")  # fmt: skip
    assert code == 0 and "--node-rank\n1\n" in out and "--dist-init-addr\nh.example:25000\n" in out


def test_check_accepts_the_multinode_profile(tmp_path: Path) -> None:
    assert _errors(tmp_path, multi_doc()) == []


def test_check_refuses_a_gpu_count_that_does_not_add_up(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["gpu"]["count"] = 4  # 2 x 4 = 8, but tp 16
    (issue,) = _errors(tmp_path, doc)
    assert issue["field"] == "nodes.count"
    assert issue["problem"] == ("nodes.count x gpu.count = 2 x 4 = 8 GPUs but tp = 16 GPUs")
    assert (
        issue["fix"] == "make them equal: gpu.count: 8 per node, or tp: 8 (the GPUs the nodes give)"
    )


def test_the_gpu_sum_counts_dp_without_attention_and_tp_with_it(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["parallelism"] = {"tp": 8, "dp": 2, "enable_dp_attention": True}
    doc["gpu"]["count"] = 8  # 2 x 8 = 16, DP attention lives inside tp 8
    (issue,) = _errors(tmp_path, doc)
    assert issue["problem"] == "nodes.count x gpu.count = 2 x 8 = 16 GPUs but tp = 8 GPUs"
    doc["gpu"]["count"] = 4
    assert _errors(tmp_path, doc) == []


def test_check_refuses_what_sglang_asserts_across_nodes(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["nodes"]["count"] = 3
    doc["parallelism"] = {"tp": 16}
    doc["gpu"]["count"] = 8
    fields = {i["field"]: i for i in _errors(tmp_path, doc)}
    assert "tp_size must be divisible by number of nodes" in fields["parallelism.tp"]["problem"]
    assert fields["parallelism.tp"]["fix"] == "make tp a multiple of 3"
    assert (
        "nodes.count x gpu.count = 3 x 8 = 24 GPUs but tp = 16 GPUs"
        in (fields["nodes.count"]["problem"])
    )
    doc = multi_doc()
    doc["parallelism"] = {"tp": 8, "dp": 2}
    (issue,) = _errors(tmp_path, doc)
    assert issue["field"] == "parallelism.dp"
    assert "enable_dp_attention: true" in issue["fix"]


def test_check_refuses_a_bind_all_rendezvous_and_a_port_clash(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["nodes"]["rendezvous_host"] = "0.0.0.0"
    doc["nodes"]["rendezvous_port"] = doc["server"]["port"]
    fields = {i["field"] for i in _errors(tmp_path, doc)}
    assert fields == {"nodes.rendezvous_host", "nodes.rendezvous_port"}


def test_single_node_rules_are_unchanged_and_a_stray_rendezvous_warns(tmp_path: Path) -> None:
    doc = kimi_doc()
    doc["gpu"]["count"] = 4
    (issue,) = _errors(tmp_path, doc)
    assert issue["problem"] == "tp x dp = 8 GPUs but gpu.count asks for 4"
    doc = kimi_doc()
    doc["nodes"] = {"count": 1, "rendezvous_host": "h"}
    code, report = check_json(write_doc(tmp_path, doc), "--configs-only")
    assert code == 0
    assert [i["field"] for i in report["warnings"]].count("nodes.rendezvous_host") == 1


def test_the_stand_in_runs_one_rank_per_node(tmp_path: Path) -> None:
    doc = yaml.safe_load(
        (REPO / "tests/fixtures/profiles/multinode-standin-2rank.yaml").read_text()
    )
    for section in ("target", "drafter"):  # the fixture paths are relative to its own directory
        doc[section]["path"] = str(REPO / "tests/fixtures/models" / Path(doc[section]["path"]).name)
    assert _errors(tmp_path, doc) == []
    doc["parallelism"]["tp"] = 1
    fixes = sorted(i["fix"] for i in _errors(tmp_path, doc))
    assert fixes == ["make tp a multiple of 2", "set tp: 2"]


def test_extra_args_may_not_set_the_distributed_flags(tmp_path: Path) -> None:
    for flag in ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr"):
        doc = multi_doc()
        doc["server"]["extra_args"] = [flag, "1"]
        found = _errors(tmp_path, doc)
        owned = [i for i in found if i["field"].startswith("server.extra_args")]
        assert any(flag in i["problem"] for i in owned), (flag, found)


def test_launcher_takes_the_rank_and_rendezvous_from_the_deploy(tmp_path: Path) -> None:
    doc = multi_doc()
    doc["server"]["launch_command"] = [sys.executable, "-c", "pass"]
    doc["server"]["api_key"] = None
    path = write_doc(tmp_path, doc)

    def launch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specserve.launch.launcher", "--dry-run", *args, str(path)],
            capture_output=True, text=True, timeout=60, check=False, env=dict(os.environ),
        )  # fmt: skip

    ok = launch("--node-rank", "1", "--rendezvous-host", "leader.example")
    assert ok.returncode == 0, ok.stderr
    assert "--node-rank 1" in ok.stderr and "--dist-init-addr leader.example:25000" in ok.stderr
    bad = launch("--node-rank", "1")
    assert bad.returncode == 2 and "nothing was started" in bad.stderr
    assert "nodes.rendezvous_host" in bad.stderr
