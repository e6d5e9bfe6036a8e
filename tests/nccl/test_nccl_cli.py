import json

import pytest

from specserve import cli as specserve_cli
from specserve.nccl import cli
from specserve.nccl.presets import builtin_presets, load_presets_json


def test_dump_presets_round_trips_through_presets_json(tmp_path, capsys):
    assert cli.main(["--dump-presets"]) == 0
    path = tmp_path / "presets.json"
    path.write_text(capsys.readouterr().out)
    assert load_presets_json(path) == builtin_presets()
    names = [p["name"] for p in json.loads(path.read_text())["presets"]]
    assert names == ["default", "pcie-8gpu-seeds", "nvlink"]


def test_specserve_has_the_nccl_bench_subcommand():
    args = specserve_cli.build_parser().parse_args(
        ["nccl-bench", "--presets", "pcie-8gpu-seeds", "--iters", "7", "--env", "NCCL_DEBUG=WARN"]
    )
    assert args.handler is cli.handle
    assert (args.presets, args.iters, args.env) == ("pcie-8gpu-seeds", 7, [("NCCL_DEBUG", "WARN")])
    assert (args.hidden_size, args.dtype, args.warmup) == (7168, "bfloat16", 20)
    assert args.timing == "graph", "GPU runs time all-reduces as SGLang's CUDA-graph decode runs"


def test_timing_reaches_the_worker_spec():
    from specserve.nccl.bench import BenchConfig, worker_spec
    from specserve.nccl.machine import Plan

    node = Plan("cuda", "nccl", 8, "nvlink", "", "python3", "2.11.0")
    config = BenchConfig(sizes=[], hidden_size=7168, dtype="bfloat16", iters=5, warmup=1,
                         timeout_s=10.0, timing="eager")
    assert worker_spec(node, config)["timing"] == "eager"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--iters", "0"], "'0' is not a positive integer"),
        (["--env", "NOEQUALS"], "'NOEQUALS' is not KEY=VALUE"),
        (["--topology", "sxm"], "invalid choice: 'sxm'"),
        (["--timing", "cuda"], "invalid choice: 'cuda'"),
    ],
)
def test_bad_flags_are_refused_by_name(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_world_size_one_is_a_usage_error(tmp_path, capsys):
    code = cli.main(["--device", "cpu", "--world-size", "1", "--json-out", str(tmp_path / "r")])
    assert code == 2
    assert "at least 2 ranks" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
