"""Unit tests: statistics, prompts, exporter deltas, results schema, table, plot, baseline."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import jsonschema
import numpy
import pytest
from matplotlib import image as mpimg

from specserve.bench.baseline import BaselineError, baseline_block, baseline_mapping
from specserve.bench.client import RequestRecord
from specserve.bench.commands import UsageError, parse_concurrency
from specserve.bench.exporter import Snapshot, parse_snapshot, window_means
from specserve.bench.plot import plot
from specserve.bench.promptset import PromptError, load_prompts, parse_prompts, select_kinds
from specserve.bench.report import markdown
from specserve.bench.results import (
    ResultError,
    attach_baseline,
    build_result,
    load_result,
    validate_result,
)
from specserve.bench.server import REDACTED, ServerFacts, redact, speculative_params
from specserve.bench.stats import percentile, summarize_level
from specserve.buckets import concurrency_bucket
from specserve.cli import main
from specserve.profile.schema import profile_schema
from specserve.standin.behaviour import DEFAULT_CONTENT_FACTORS, Behaviour

# -- statistics ------------------------------------------------------------------------------


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(7)
    for n in (1, 2, 5, 50, 101):
        values = [rng.uniform(0, 10) for _ in range(n)]
        for q in (0, 10, 50, 90, 99, 100):
            assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)


def _record(kind: str, times: list[float], tokens: int, ok: bool = True) -> RequestRecord:
    return RequestRecord(
        prompt_id=f"{kind}-1",
        kind=kind,
        ok=ok,
        status=200,
        ttft=times[0] if times else None,
        chunk_times=times,
        latency=times[-1] + 0.01 if times else None,
        output_tokens=tokens,
        finish_reason="length" if ok else None,
        error=None if ok else "boom",
    )


def test_record_itl_and_decode_speed() -> None:
    record = _record("chat", [0.1, 0.2, 0.4, 0.5], tokens=9)
    assert record.itls == pytest.approx([0.1, 0.2, 0.1])
    # 8 tokens after the first one, over 0.4 s after the first chunk.
    assert record.decode_tok_s == pytest.approx(20.0)
    assert _record("chat", [0.1], tokens=1).decode_tok_s is None


def test_summarize_level_counts_only_successes() -> None:
    records = [
        _record("chat", [0.1, 0.2, 0.3], tokens=10),
        _record("code", [0.2, 0.3, 0.4], tokens=10),
        _record("code", [], tokens=0, ok=False),
        _record("code", [], tokens=0, ok=False),
    ]
    level = summarize_level(2, records, wall_s=0.5, max_tokens=10)
    assert (level["requests"], level["ok"], level["failed"]) == (4, 2, 2)
    assert level["output_tokens"] == 20 and level["agg_tok_s"] == pytest.approx(40.0)
    assert level["errors"] == [{"message": "boom", "count": 2}]
    assert level["ttft_s"]["p50"] == pytest.approx(0.15)
    assert level["itl_s"]["p99"] == pytest.approx(0.1)
    assert level["by_kind"]["code"]["ok"] == 1 and level["by_kind"]["chat"]["ok"] == 1
    assert level["short_outputs"] == 0 and level["tokens_from"] == "usage"
    short = summarize_level(1, records[:1], wall_s=1.0, max_tokens=64)
    assert short["short_outputs"] == 1
    failed = summarize_level(1, records[2:], wall_s=1.0, max_tokens=10)
    assert failed["agg_tok_s"] is None and failed["ok"] == 0


# -- prompts ---------------------------------------------------------------------------------


def test_builtin_prompts_have_the_classes_that_the_standin_tells_apart() -> None:
    prompts, desc = load_prompts("builtin")
    assert desc == "builtin"
    kinds = {p.kind for p in prompts}
    # The classes issue 31 names: chat, code, long context, another language (and math).
    assert kinds == {"chat", "code", "math", "long-context", "multilingual"}
    assert all(sum(p.kind == k for p in prompts) >= 6 for k in kinds)
    longest_chat = max(len(p.messages[-1]["content"]) for p in prompts if p.kind == "chat")
    assert all(len(p.messages[-1]["content"]) > 10 * longest_chat
               for p in prompts if p.kind == "long-context")
    # The stand-in's content factors make accept length depend on kind: code prompts hit the
    # "code" keyword, chat and math prompts hit none.
    behaviour = Behaviour()
    for prompt in prompts:
        text = prompt.messages[-1]["content"]
        expected = DEFAULT_CONTENT_FACTORS["code"] if prompt.kind == "code" else 1.0
        assert behaviour.content_factor(text) == expected, prompt.id


def test_user_jsonl_and_kind_selection(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"prompt": "hello"}\n\n'
        '{"id": "x", "kind": "sql", "messages": [{"role": "system", "content": "be brief"},'
        ' {"role": "user", "content": "select"}]}\n'
        '{"kind": "sql", "prompt": "join"}\n'
    )
    prompts, desc = load_prompts(str(path))
    assert desc == str(path.resolve())
    assert [p.id for p in prompts] == [f"{path}:1", "x", f"{path}:4"]
    assert [p.kind for p in prompts] == ["custom", "sql", "sql"]
    assert prompts[1].messages[0] == {"role": "system", "content": "be brief"}
    # Interleaved: custom, sql, sql.
    assert [p.kind for p in select_kinds(prompts, None)] == ["custom", "sql", "sql"]
    assert [p.id for p in select_kinds(prompts, ["sql"])] == ["x", f"{path}:4"]
    with pytest.raises(PromptError, match="no prompts of kind math; this prompt set has: custom"):
        select_kinds(prompts, ["math"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "f.jsonl:1: not valid JSON"),
        ('{"prompt": "a"}\n[1]', "f.jsonl:2: each line must be a JSON object"),
        ('{"kind": "chat"}', "f.jsonl:1: needs \"prompt\""),
        ('{"prompt": "a", "messages": []}', "either 'prompt' or 'messages'"),
        ('{"id": 1, "prompt": "a"}\n{"id": "1", "prompt": "b"}', "f.jsonl:2: duplicate id '1'"),
        ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}',
         "last message must have role 'user'"),
        ('{"messages": [{"role": "robot", "content": "q"}]}', "messages[0].role must be one of"),
        ('{"kind": "a,b", "prompt": "x"}', "without commas"),
        ("\n\n", "f.jsonl: no prompts found"),
    ],
)  # fmt: skip
def test_bad_prompt_files_name_line_and_fix(text: str, message: str) -> None:
    with pytest.raises(PromptError) as info:
        parse_prompts(text, "f.jsonl")
    assert message in str(info.value)


def test_missing_prompt_file(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match=r"cannot read .*'builtin'"):
        load_prompts(str(tmp_path / "nope.jsonl"))


# -- exporter deltas -------------------------------------------------------------------------

METRICS_TEXT = """\
# HELP specserve_log_lines_parsed_total Stats lines parsed.
# TYPE specserve_log_lines_parsed_total counter
specserve_log_lines_parsed_total{{kind="decode"}} {decode}
specserve_log_lines_parsed_total{{kind="prefill"}} 3
# HELP specserve_decode_accept_length Accept length per window.
# TYPE specserve_decode_accept_length histogram
specserve_decode_accept_length_bucket{{dp="0",pp="0",tp="0",le="+Inf"}} {c0}
specserve_decode_accept_length_sum{{dp="0",pp="0",tp="0"}} {s0}
specserve_decode_accept_length_count{{dp="0",pp="0",tp="0"}} {c0}
specserve_decode_accept_length_bucket{{dp="1",pp="0",tp="0",le="+Inf"}} {c1}
specserve_decode_accept_length_sum{{dp="1",pp="0",tp="0"}} {s1}
specserve_decode_accept_length_count{{dp="1",pp="0",tp="0"}} {c1}
# HELP {tput} Throughput per window.
# TYPE {tput} histogram
{tput}_bucket{{concurrency="4",dp="0",pp="0",tp="0",le="+Inf"}} {t4c}
{tput}_sum{{concurrency="4",dp="0",pp="0",tp="0"}} {t4s}
{tput}_count{{concurrency="4",dp="0",pp="0",tp="0"}} {t4c}
"""


def _snapshot(**values: float) -> Snapshot:
    text = METRICS_TEXT.format(tput="specserve_decode_gen_throughput_tokens_per_second", **values)
    return parse_snapshot(text)


def test_window_means_are_deltas_over_all_ranks() -> None:
    before = _snapshot(decode=10, c0=4, s0=8.0, c1=2, s1=3.0, t4c=1, t4s=300.0)
    after = _snapshot(decode=16, c0=7, s0=17.0, c1=5, s1=12.0, t4c=4, t4s=1500.0)
    assert before.accept_count == 6 and before.accept_sum == 11.0
    seen = window_means(before, after)
    # (17 + 12 - 8 - 3) / (7 + 5 - 4 - 2) = 18 / 6
    assert seen["accept_length"] == pytest.approx(3.0)
    assert seen["accept_windows"] == 6 and seen["decode_lines"] == 6
    assert seen["gen_throughput_tok_s"] == {"4": pytest.approx(400.0)}
    assert seen["gen_throughput_windows"] == {"4": 3}
    idle = window_means(after, after)
    assert idle["accept_length"] is None and idle["gen_throughput_tok_s"] == {}


def test_snapshot_refuses_a_page_that_is_not_the_exporter() -> None:
    with pytest.raises(ValueError, match="not a specserve-exporter"):
        parse_snapshot("# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput 10\n")


# -- server facts ----------------------------------------------------------------------------


def test_redaction_and_speculative_params() -> None:
    info = {
        "api_key": "k", "admin_api_key": "k2", "hf_token": "t", "speculative_num_draft_tokens": 4,
        "tokenizer_path": "/m", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_draft_model_path": "/d", "ssl_keyfile": None,
    }  # fmt: skip
    clean = redact(info)
    assert clean["api_key"] == clean["admin_api_key"] == clean["hf_token"] == REDACTED
    assert clean["speculative_num_draft_tokens"] == 4 and clean["tokenizer_path"] == "/m"
    assert clean["ssl_keyfile"] is None
    assert speculative_params(info) == {
        "algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4,
        "draft_model_path": "/d",
    }  # fmt: skip
    assert speculative_params({"speculative_algorithm": None}) is None


# -- results, table, plot, baseline ----------------------------------------------------------


def _level(c: int, agg: float | None, accept: float | None = 2.2, gen: float = 100.0) -> dict:
    records = [_record("chat", [0.01, 0.02, 0.03], tokens=3)] * (1 if agg is not None else 0)
    level = summarize_level(c, records, wall_s=1.0, max_tokens=3)
    level["agg_tok_s"] = agg
    if agg is None:
        level.update(ok=0, requests=2, failed=2, errors=[{"message": "refused", "count": 2}])
    level["exporter"] = {
        "accept_length": accept,
        "accept_windows": 4 if accept else 0,
        "decode_lines": 4,
        "gen_throughput_tok_s": {concurrency_bucket(c): gen * c},
        "gen_throughput_windows": {concurrency_bucket(c): 4},
    }
    return level


def _result(label: str, speculative: bool, aggs: dict[int, float | None]) -> dict:
    info = {"version": "0.5.21", "standin": False}
    spec = speculative_params(
        {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
         "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    ) if speculative else None  # fmt: skip
    settings = {
        "concurrency": sorted(aggs), "requests_per_level": None, "duration_s": None,
        "max_tokens": 256, "temperature": 0.0, "prompts": "builtin", "kinds": ["chat"],
        "prompt_count": 12, "exporter_url": None, "warmup_requests": 1, "request_timeout_s": 600,
    }  # fmt: skip
    levels = [_level(c, a, 2.2 if speculative else None) for c, a in aggs.items()]
    return build_result(
        label, "http://127.0.0.1:8000", settings, ServerFacts("kimi", info, spec), levels,
        "2026-01-01T00:00:00+00:00",
    )  # fmt: skip


def test_result_validates_and_breakage_is_named(tmp_path: Path) -> None:
    result = _result("speculative", True, {1: 140.0, 2: 240.0})
    validate_result(result)
    broken = copy.deepcopy(result)
    del broken["levels"][1]["ttft_s"]
    with pytest.raises(ResultError, match="levels/1: 'ttft_s' is a required property"):
        validate_result(broken)
    path = tmp_path / "r.json"
    path.write_text("{")
    with pytest.raises(ResultError, match="not JSON"):
        load_result(path)


def test_speedup_and_table() -> None:
    result = _result("speculative", True, {1: 150.0, 2: 250.0, 4: None, 8: 500.0})
    baseline = _result("baseline", False, {1: 100.0, 2: 200.0, 4: 300.0})
    plain = markdown(result)
    header = next(line for line in plain.splitlines() if line.startswith("| concurrency"))
    assert header.endswith("| server gen tok/s |") and "| 8 |" in plain
    attach_baseline(result, baseline, "base.json")
    validate_result(result)
    speedups = [level["speedup"] for level in result["levels"]]
    assert speedups == [pytest.approx(1.5), pytest.approx(1.25), None, None]
    table = markdown(result)
    rows = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    assert rows["| 1"].endswith("| 1.50x |") and "| 2.20 |" in rows["| 1"]
    assert rows["| 2"].endswith("| 1.25x |")
    assert "all failed: refused" in rows["| 4"] and rows["| 4"].endswith("| - |")
    assert rows["| 8"].endswith("| - |")  # the baseline has no level 8
    assert "concurrency 4: 2 x refused" in table
    assert "EAGLE3, steps 3, top-k 1, draft tokens 4" in table


def _colour_pixels(path: Path, rgb: tuple[int, int, int], tolerance: int = 8) -> int:
    pixels = (mpimg.imread(path)[..., :3] * 255).round().astype(int)
    mask = numpy.ones(pixels.shape[:2], dtype=bool)
    for channel, value in enumerate(rgb):
        mask &= abs(pixels[..., channel] - value) < tolerance
    return int(mask.sum())


def test_plot_draws_both_lines(tmp_path: Path) -> None:
    result = _result("speculative", True, {1: 150.0, 2: 250.0, 4: 380.0})
    baseline = _result("baseline", False, {1: 100.0, 2: 200.0, 4: 300.0})
    alone, both = tmp_path / "alone.png", tmp_path / "both.png"
    plot(result, None, alone)
    plot(result, baseline, both)
    for path in (alone, both):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    blue, grey = (0x1F, 0x77, 0xB4), (0x7F, 0x7F, 0x7F)
    assert _colour_pixels(alone, blue) > 2000 and _colour_pixels(both, blue) > 2000
    # Anti-aliased text has a few grey pixels; the baseline's dashed line adds many.
    grey_alone, grey_both = _colour_pixels(alone, grey, 3), _colour_pixels(both, grey, 3)
    assert grey_both > 1000 and grey_both > 4 * grey_alone, (grey_alone, grey_both)


def test_baseline_block_prefers_the_exporter_and_fits_the_profile() -> None:
    result = _result("baseline", False, {1: 80.0, 3: 200.0, 4: 250.0, 8: None})
    # Level 8 failed entirely: its exporter number alone still makes a bucket; drop it.
    result["levels"][3]["exporter"] = None
    values, sources = baseline_mapping(result)
    # Exporter gen throughput (100 x c) per bucket; 3 and 4 share bucket "4": level 4 wins.
    assert values == {"1": 100.0, "4": 400.0}
    assert set(sources.values()) == {"exporter"}
    client, _ = baseline_mapping(result, metric="client")
    assert client == {"1": 80.0, "4": 250.0}
    block = baseline_block(result)
    jsonschema.validate(block, profile_schema()["properties"]["baseline"])
    assert "exporter saw" in block["source"] and "http://127.0.0.1:8000" in block["source"]
    with pytest.raises(BaselineError, match="without --speculative-algorithm"):
        baseline_mapping(_result("speculative", True, {1: 140.0}))
    assert baseline_mapping(_result("s", True, {1: 140.0}), allow_speculative=True)[0]
    dead = _result("baseline", False, {1: None})
    dead["levels"][0]["exporter"] = None
    with pytest.raises(BaselineError, match="no level"):
        baseline_mapping(dead)


# -- command line ----------------------------------------------------------------------------


def test_concurrency_parsing() -> None:
    assert parse_concurrency("8, 1,2,2,4") == (1, 2, 4, 8)
    for bad in ("0", "a", "1,,2", "-1", "5000"):
        with pytest.raises(UsageError, match="--concurrency"):
            parse_concurrency(bad)


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--url", "http://127.0.0.1:9"]) == 2
    assert "--out-dir is required" in capsys.readouterr().err
    out = ["--out-dir", str(tmp_path / "o")]
    assert main(["bench", *out]) == 2
    assert "--url is required" in capsys.readouterr().err
    args = ["bench", "--url", "http://127.0.0.1:9", *out]
    assert main([*args, "--concurrency", "1,8", "--requests-per-level", "4"]) == 2
    assert "below the highest concurrency 8" in capsys.readouterr().err
    empty = tmp_path / "key"
    empty.write_text("\n")
    assert main([*args, "--api-key-file", str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["bench", "--url", "http://127.0.0.1:9", "--out-dir", str(blocker / "d")]) == 2
    assert "is not a writable directory" in capsys.readouterr().err
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "results.json").write_text("{}")
    assert main(args) == 2
    assert "already holds results.json" in capsys.readouterr().err
    assert json.loads((tmp_path / "o" / "results.json").read_text()) == {}


def test_cli_baseline_from_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _result("baseline", False, {1: 100.0, 2: 200.0})
    spec = _result("speculative", True, {1: 150.0, 2: 220.0})
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert main(["bench", "baseline-from", str(tmp_path / "base.json"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["gen_throughput_tok_s"] == {"1": 100.0, "2": 200.0}
    assert main(["bench", "baseline-from", str(tmp_path / "spec.json")]) == 2
    assert "speculative decoding (EAGLE3)" in capsys.readouterr().err
    out = tmp_path / "report"
    argv = ["bench", "report", str(tmp_path / "spec.json"), "--out-dir", str(out)]
    assert main([*argv, "--baseline-json", str(tmp_path / "base.json")]) == 0
    written = load_result(out / "results.json")
    assert [lv["speedup"] for lv in written["levels"]] == [1.5, 1.1]
    assert "| 1.10x |" in (out / "results.md").read_text() and (out / "plot.png").exists()
    assert main(["bench", "baseline-from", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
