"""`specserve verify` against real serving paths: the stand-in through specserve-launch, and
specserve-exporter following the log file the launcher tees. Each failure the gate exists for is
produced for real (the stand-in's behaviour file, profiles that disagree with the server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.verify.conftest import API_KEY, STANDIN, Serving, idle_exporter, serving

pytestmark = pytest.mark.slow

ROLE_KNOBS = ["--knob", "floor=verify_accept_length_floor",
              "--knob", "metrics_timeout=verify_metrics_timeout_s",
              "--knob", "require_graph=verify_require_graph",
              "--knob", "api_key=server_api_key"]


def _mean(stdout: str) -> float:
    return float(re.search(r"accept length ([0-9.]+)", stdout)[1])  # type: ignore[index]


def test_passes_with_real_decode_lines_above_the_floor(speculative: Serving) -> None:
    result = speculative.verify()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gate passed: " in result.stdout and "cuda graph on" in result.stdout
    assert _mean(result.stdout) > 1.5
    # What the server runs, from /server_info, which carries the key: printed without it.
    assert "speculative algorithm EAGLE3" in result.stdout
    assert API_KEY not in result.stdout + result.stderr


def test_accept_length_one_fails_naming_the_floor(tmp_path: Path) -> None:
    """Every draft token rejected: the field notes' EAGLE-instead-of-EAGLE3 signature."""
    with serving(tmp_path, acceptance=0.0) as rejecting:
        result = rejecting.verify(*ROLE_KNOBS)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Verification gate FAILED (profile standin-cpu):" in result.stdout
    assert "FAIL mean accept length: 1.0 over " in result.stdout
    assert "(need > 1.5: verify_accept_length_floor;" in result.stdout
    # The other checks held and say so.
    assert "ok   graph state per rank: dp0 pp0 tp0 cuda=1" in result.stdout


def test_wrong_api_key_fails_and_is_never_printed(speculative: Serving, tmp_path: Path) -> None:
    wrong = "sk-wrong-0a1b2c"
    result = speculative.verify(*ROLE_KNOBS, "--api-key-file", "-", key=False, stdin=wrong)
    assert result.returncode == 1
    assert "HTTP 401" in result.stdout and "(the API key: server_api_key)" in result.stdout
    assert wrong not in result.stdout + result.stderr
    # No key at all: refused the same way.
    keyless = speculative.verify(key=False)
    assert keyless.returncode == 1 and "HTTP 401" in keyless.stdout
    # From an environment variable: used, never printed; an unset one is a usage error.
    by_env = speculative.verify("--api-key-env", "VERIFY_TEST_KEY", key=False,
                                env={"VERIFY_TEST_KEY": API_KEY})
    assert by_env.returncode == 0, by_env.stdout
    assert API_KEY not in by_env.stdout + by_env.stderr
    unset = speculative.verify("--api-key-env", "NO_SUCH_VARIABLE_HERE", key=False)
    assert unset.returncode == 2 and "NO_SUCH_VARIABLE_HERE" in unset.stderr


def test_chat_api_over_every_address_of_a_name(speculative: Serving) -> None:
    """The Helm test's shape: OpenAI requests (what a router answers) and every exporter a name
    resolves to (a headless Service)."""
    result = speculative.verify("--api", "chat", "--each-address")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _mean(result.stdout) > 1.5
    nowhere = speculative.verify("--each-address",
                                 exporter="http://no-such-pods.invalid:9433/metrics")
    assert nowhere.returncode == 1
    assert "cannot resolve no-such-pods.invalid (no ready server pod?)" in nowhere.stdout


def test_window_since_a_saved_snapshot(speculative: Serving, tmp_path: Path) -> None:
    """The stability window: counters saved before the load, the gate judged after it, with a
    minimum of decode lines and no warm-up of its own."""
    snap = tmp_path / "before.json"
    saved = speculative.verify("--save-snapshot", str(snap))
    assert saved.returncode == 0, saved.stderr
    window = ["--since", str(snap), "--requests", "0", "--min-decode-lines", "3",
              "--knob", "min_decode_lines=server_stability_min_decode_lines"]
    idle = speculative.verify(*window, "--metrics-timeout", "1")
    assert idle.returncode == 1
    assert ("FAIL decode lines in the window: 0 (need >= 3: server_stability_min_decode_lines"
            in idle.stdout)
    assert speculative.verify().returncode == 0  # load after the snapshot
    after = speculative.verify(*window, "--title", "Stability window")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "Stability window passed: " in after.stdout


def test_no_decode_lines_fails_naming_the_budget(speculative: Serving, tmp_path: Path) -> None:
    with idle_exporter(tmp_path) as exporter:
        result = speculative.verify(*ROLE_KNOBS, "--metrics-timeout", "2", exporter=exporter)
    assert result.returncode == 1, result.stdout
    assert ("FAIL decode lines from the warm-up: 0 (need > 0; the exporter had 2 s to count "
            "them: verify_metrics_timeout_s; warm-up: --requests = 2" in result.stdout)


def test_graphs_off_fail_unless_the_profile_turns_them_off(tmp_path: Path) -> None:
    with serving(tmp_path, **{"server.disable_cuda_graph": True,
                              "server.allow_disable_cuda_graph": True}) as s:
        # Judged against a profile that leaves graphs on: every rank must say cuda=1.
        graphs_on = s.profile_like("graphs-on.yaml", **{"server.disable_cuda_graph": None,
                                                        "server.allow_disable_cuda_graph": None})
        result = s.verify(*ROLE_KNOBS, profile=graphs_on)
        assert result.returncode == 1, result.stdout
        assert "FAIL graph state per rank: dp0 pp0 tp0 cuda=0 (need cuda graph = 1 on every " \
            "rank: verify_require_graph)" in result.stdout
        assert "ok   mean accept length" in result.stdout
        # Its own profile asks for no graphs: the gate does not require them.
        own = s.verify()
        assert own.returncode == 0, own.stdout
        assert "graph state not required" in own.stdout


def test_speculation_as_the_profile_says(tmp_path: Path) -> None:
    with serving(tmp_path, drafter=None) as s:
        # A server without a drafter, judged against a profile with one.
        with_drafter = s.profile_like("with-drafter.yaml", drafter=yaml.safe_load(
            STANDIN.read_text())["drafter"])
        with_drafter.write_text(with_drafter.read_text().replace(
            "../tests/fixtures", str(STANDIN.parent.parent / "tests" / "fixtures")))
        result = s.verify(*ROLE_KNOBS, profile=with_drafter)
        assert result.returncode == 1, result.stdout
        assert ("FAIL mean accept length: none over 0 decode windows (need > 1.5: "
                "verify_accept_length_floor" in result.stdout)
        assert "the profile turns speculation on, is the server speculating?" in result.stdout
        # Its own profile does not speculate: no accept length asked for.
        own = s.verify()
        assert own.returncode == 0, own.stdout
        assert "accept length n/a (no speculation)" in own.stdout


def test_a_server_that_speculates_against_a_profile_that_does_not(speculative: Serving) -> None:
    without = speculative.profile_like("no-drafter.yaml", drafter=None)
    result = speculative.verify(profile=without)
    assert result.returncode == 1, result.stdout
    assert re.search(r"FAIL speculation: [1-9]\d* decode windows with an accept length \(need 0: "
                     r"the profile turns speculation off\)", result.stdout), result.stdout


def test_a_server_on_another_tree_than_the_profile_fails_on_its_draft_tokens(
    speculative: Serving,
) -> None:
    """The server runs the stand-in profile's 3 / 1 / 4; judged against a profile whose tree is
    5 / 1 / 6, the gate reads the server's own count from /server_info."""
    other = speculative.profile_like("other-tree.yaml", **{"drafter.num_steps": 5,
                                                           "drafter.num_draft_tokens": 6})
    result = speculative.verify(profile=other)
    assert result.returncode == 1, result.stdout
    assert ("FAIL draft tokens: the server runs 4 (server_info), the profile 6 (its tree, or "
            "SGLang's choice for it)") in result.stdout
    assert re.search(r"ok   mean accept length: [0-9.]+ within the 6 draft tokens", result.stdout)


def test_no_decode_lines_names_the_server_setting_that_silenced_them(tmp_path: Path) -> None:
    with serving(tmp_path, **{"logging.decode_log_interval": 1000}) as s:
        result = s.verify(*ROLE_KNOBS, "--max-tokens", "64", "--metrics-timeout", "2")
    assert result.returncode == 1, result.stdout
    assert ("FAIL decode lines from the warm-up: 0 (need > 0; the exporter had 2 s to count them: "
            "verify_metrics_timeout_s; warm-up: --requests = 2 of --max-tokens = 64); the "
            "server's decode_log_interval is 1000 (server_info): one Decode batch line per 1000 "
            "decode steps, and a warm-up request decodes 64 tokens") in result.stdout
