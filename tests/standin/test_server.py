"""Integration tests: real stand-in processes on 127.0.0.1, driven over HTTP and signals."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest
import requests

from specserve.standin.behaviour import SpecShape, accept_length, model_throughput
from tests.standin.helpers import DECODE_RE, PREFILL_RE, make_drafter

MODELS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "models"

EAGLE3_FLAGS = (
    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "4", "--decode-log-interval", "10",
)  # fmt: skip


def _spec(algorithm: str, drafter: Path) -> tuple[str, ...]:
    return (
        "--speculative-algorithm", algorithm, "--speculative-draft-model-path", str(drafter),
        *EAGLE3_FLAGS,
    )  # fmt: skip


def _decode_for(server, prompt: str = "hello", tokens: int = 120, lines: int = 2) -> list:
    server.chat(prompt, max_tokens=tokens, ignore_eos=True)
    return server.wait_decode_lines(lines)


def test_lifecycle_refused_then_503_then_200(start_standin) -> None:
    server = start_standin(
        env={"SPECSERVE_STANDIN_LOAD_SECONDS": "1.5", "SPECSERVE_STANDIN_WARMUP_SECONDS": "2.0"},
        wait=False,
    )
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/health", timeout=1)
    seen: list[int] = []
    served_while_warming = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (not seen or seen[-1] != 200):
        try:
            code = requests.get(server.url + "/health", timeout=1).status_code
        except requests.ConnectionError:
            time.sleep(0.05)
            continue
        if code == 503 and not served_while_warming:
            assert requests.get(server.url + "/health_generate", timeout=5).status_code == 503
            assert requests.get(server.url + "/ready", timeout=5).status_code == 503
            # Upstream serves /generate before warm-up is done (its warm-up is a /generate).
            gen = requests.post(
                server.url + "/generate",
                json={"text": "early", "sampling_params": {"max_new_tokens": 2}},
                timeout=10,
            )
            assert gen.status_code == 200 and gen.json()["meta_info"]["completion_tokens"] == 2
            served_while_warming = True
        if not seen or seen[-1] != code:
            seen.append(code)
        time.sleep(0.05)
    assert seen == [503, 200] and served_while_warming
    assert requests.get(server.url + "/ready", timeout=5).status_code == 200
    assert requests.get(server.url + "/health_generate", timeout=10).status_code == 200
    text = "\n".join(server.lines())
    # Upstream's own warm-up request, then its line.
    assert '"POST /generate HTTP/1.1" 200' in text
    assert "The server is fired up and ready to roll!" in text


def test_skip_server_warmup_is_up_at_once(start_standin) -> None:
    server = start_standin(
        "--skip-server-warmup", env={"SPECSERVE_STANDIN_WARMUP_SECONDS": "30"}, wait=False
    )
    server.wait_ready(timeout=10)  # long before the 30 s warm-up knob
    assert '"POST /generate' not in "\n".join(server.lines())


def test_health_waits_for_the_scheduler_like_upstream(start_standin) -> None:
    # TIME_SCALE 0.2: upstream's 1 s check interval is 0.2 s here, its 20 s timeout 4 s.
    server = start_standin(env={"SPECSERVE_STANDIN_TIME_SCALE": "0.2"})
    for path in ("/health", "/health_generate"):
        started = time.monotonic()
        assert requests.get(server.url + path, timeout=10).status_code == 200
        assert time.monotonic() - started >= 0.2  # never before the first 1 s check
    started = time.monotonic()
    assert requests.get(server.url + "/ready", timeout=10).status_code == 200
    assert time.monotonic() - started < 0.2  # /ready generates nothing
    # POST is not a route upstream (GET only).
    assert requests.post(server.url + "/health_generate", timeout=5).status_code == 405


def test_health_times_out_marks_unhealthy_and_recovers(start_standin, tmp_path: Path) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text('{"throughput_scale": 1.0}')
    server = start_standin(
        env={
            "SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour),
            "SGLANG_HEALTH_CHECK_TIMEOUT": "2",  # x TIME_SCALE 0.05: 0.1 s
        }
    )
    # A scheduler step now takes (1/90 s) / 0.001 = 11 s of model time, 0.55 s of wall time.
    behaviour.write_text('{"throughput_scale": 0.001}')
    assert requests.get(server.url + "/health", timeout=10).status_code == 503
    assert requests.get(server.url + "/ready", timeout=5).status_code == 503
    failed = [line for line in server.lines() if "Health check failed." in line]
    assert failed and "couldn't get a response from detokenizer for last 2 seconds" in failed[0]
    behaviour.write_text('{"throughput_scale": 1.0}')
    time.sleep(1.0)  # the slow step ends; a health check that sees output marks it up again
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    assert requests.get(server.url + "/ready", timeout=5).status_code == 200


def test_health_without_generation_env_answers_at_once(start_standin) -> None:
    server = start_standin(
        env={"SPECSERVE_STANDIN_TIME_SCALE": "1.0", "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0"}
    )
    started = time.monotonic()
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    assert requests.get(server.url + "/health_generate", timeout=10).status_code == 200
    assert time.monotonic() - started >= 1.0


def test_endpoints_and_openai_shapes(start_standin) -> None:
    server = start_standin("--served-model-name", "demo", "--enable-metrics")
    body = server.chat("hi there", max_tokens=20, ignore_eos=True)
    assert body["object"] == "chat.completion" and body["model"] == "demo"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] == 20
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 20
    # Deterministic text: the same prompt gives the same answer.
    assert server.chat("hi there", max_tokens=20, ignore_eos=True)["choices"][0] == choice

    natural = server.chat("stop on your own", max_tokens=500)["choices"][0]
    assert natural["finish_reason"] == "stop"

    r = requests.post(
        server.url + "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "stream please"}],
            "max_tokens": 12, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True},
        },
        stream=True, timeout=30,
    )  # fmt: skip
    events = [line[len("data: ") :] for line in r.iter_lines(decode_unicode=True) if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(text.split()) == 12
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 12

    gen = requests.post(
        server.url + "/generate",
        json={"text": "abc", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}},
        timeout=30,
    ).json()
    assert gen["meta_info"]["completion_tokens"] == 5 and len(gen["text"].split()) == 5
    assert gen["meta_info"]["finish_reason"] == {"type": "length", "length": 5}

    models = requests.get(server.url + "/v1/models", timeout=5).json()
    assert models["data"][0]["id"] == "demo"
    info = requests.get(server.url + "/server_info", timeout=5).json()
    assert info["standin"] is True and "stand-in" in info["standin_notice"]
    assert info["served_model_name"] == "demo" and info["launch_command"].endswith(
        "--enable-metrics"
    )
    assert requests.get(server.url + "/model_info", timeout=5).json()["is_generation"]
    warning = "Endpoint '/get_server_info' is deprecated and will be removed in a future version."
    assert warning not in "\n".join(server.lines())
    for _ in range(2):  # upstream warns on every call
        assert requests.get(server.url + "/get_server_info", timeout=5).json()["standin"] is True
        assert requests.get(server.url + "/get_model_info", timeout=5).json()["is_generation"]
    lines = server.lines()
    assert sum(warning in line for line in lines) == 2
    assert sum("Please use '/model_info' instead." in line for line in lines) == 2

    bad = requests.post(server.url + "/v1/chat/completions", json={"messages": []}, timeout=5)
    assert bad.status_code == 400 and "'messages'" in bad.json()["message"]

    metrics = requests.get(server.url + "/metrics", timeout=5).text
    for name in (
        "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
        "sglang:gen_throughput", "sglang:is_cuda_graph",
        "sglang:time_to_first_token_seconds_bucket", "sglang:inter_token_latency_seconds_bucket",
        "sglang:e2e_request_latency_seconds_bucket", "sglang:generation_tokens_total",
    ):  # fmt: skip
        assert name in metrics, name


def test_api_key_is_enforced_except_health_ready_and_metrics(start_standin) -> None:
    key = "s3cret-KEY-4f9a"
    server = start_standin("--api-key", key, "--enable-metrics")
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    for path in ("/v1/models", "/server_info", "/get_server_info", "/model_info"):
        assert requests.get(server.url + path, timeout=5).status_code == 401, path
    auth = {"Authorization": f"Bearer {key}"}
    ok = requests.post(server.url + "/v1/chat/completions", json=body, timeout=10, headers=auth)
    assert ok.status_code == 200
    for path in ("/health", "/health_generate", "/ready", "/metrics"):
        assert requests.get(server.url + path, timeout=5).status_code == 200, path
    # As upstream (issue 15): the key is in the start-up line and in /server_info, so the
    # product's redaction is tested against what SGLang really prints.
    info = requests.get(server.url + "/server_info", timeout=5, headers=auth).json()
    assert info["api_key"] == key and f"--api-key {key}" in info["launch_command"]
    assert info["internal_states"][0]["api_key"] == key
    startup = [line for line in server.lines() if "] server_args={" in line]
    assert len(startup) == 1 and f"'api_key': '{key}'" in startup[0]


def test_decode_lines_upstream_format_and_model_values(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    server = start_standin("--tp-size", "8", *_spec("EAGLE3", drafter))
    found = _decode_for(server, lines=3)
    lines = server.lines()
    assert any(PREFILL_RE.match(line) for line in lines)
    expected = accept_length(SpecShape(3, 1, 4), 0.6)
    for i, m in enumerate(found):
        assert m["ranks"] == " TP0" and m["graph"] == "True" and m["running"] == "1"
        rate = float(m["accept_rate"])
        assert rate == pytest.approx((float(m["accept_len"]) - 1) / 3, abs=0.01)
        if i == 0:
            # The first window also holds the warm-up's 8-token request (as upstream's does),
            # whose few passes the running floor grants less than the formula.
            continue
        # Windows of 10 passes, tokens granted by a running floor: within 0.1 of the formula.
        assert abs(float(m["accept_len"]) - expected) <= 0.1
        rate = float(m["accept_rate"])
        assert rate == pytest.approx((float(m["accept_len"]) - 1) / 3, abs=0.01)
    # Full windows of pure decode print the model's throughput (prefill time lowers the first).
    model = model_throughput(SpecShape(3, 1, 4), 1, 0.6)
    assert abs(float(found[-1]["tput"]) - model) / model < 0.06

    try:
        from specserve_exporter.parser import Kind, StatsLine, parse_line
    except ImportError:  # pragma: no cover - the exporter ships in the same distribution
        pytest.fail("specserve_exporter.parser is not importable")
    decode_lines = [line for line in lines if DECODE_RE.match(line)]
    for line in decode_lines:
        parsed = parse_line(line.encode())
        assert isinstance(parsed, StatsLine) and parsed.kind == Kind.DECODE
        assert parsed.unknown_fields == 0 and parsed.ranks.tp == "0"
        assert parsed.graph == "cuda" and parsed.graph_on is True
        assert parsed.values["accept_length"] == float(DECODE_RE.match(line)["accept_len"])


def test_baseline_prints_no_accept_len_and_single_gpu_has_no_rank(start_standin) -> None:
    server = start_standin("--decode-log-interval", "10")
    found = _decode_for(server, lines=2)
    assert all(m["accept_len"] is None and m["ranks"] == "" for m in found)
    assert abs(float(found[-1]["tput"]) - 90.0) / 90.0 < 0.06


def test_eagle_on_an_eagle3_drafter_accepts_nothing(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    good = start_standin(*_spec("EAGLE3", drafter))
    wrong = start_standin(*_spec("EAGLE", drafter))
    good_lines, wrong_lines = _decode_for(good), _decode_for(wrong)
    # It starts fine (healthy) and only the decode lines tell.
    assert all(m["accept_len"] == "1.00" for m in wrong_lines)
    assert all(m["accept_rate"] == "0.00" for m in wrong_lines)
    assert float(wrong_lines[-1]["tput"]) < 0.6 * float(good_lines[-1]["tput"])
    # NEXTN is an alias of EAGLE: same signature.
    nextn = start_standin(*_spec("NEXTN", drafter))
    assert all(m["accept_len"] == "1.00" for m in _decode_for(nextn, lines=1))


def test_eagle_on_the_mla_eagle3_drafter_accepts_nothing(start_standin, tmp_path: Path) -> None:
    # SGLang's registry serves kimi-k2.5-eagle3-mla as an EAGLE-3 drafter; no "Eagle3" suffix.
    drafter = make_drafter(tmp_path, "Eagle3DeepseekV2ForCausalLM")
    wrong = start_standin(*_spec("eagle", drafter))
    assert all(m["accept_len"] == "1.00" for m in _decode_for(wrong, lines=1))


def test_upstream_defaults_and_decode_graph_switches(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    server = start_standin(
        "--model-path", str(MODELS / "Llama-3.1-8B-Instruct"), "--speculative-algorithm",
        "eagle3", "--speculative-draft-model-path", str(drafter), "--decode-log-interval", "10",
        "--cuda-graph-backend-decode", "disabled",
    )  # fmt: skip
    info = requests.get(server.url + "/server_info", timeout=5).json()
    tree = [info[f"speculative_{k}"] for k in ("num_steps", "eagle_topk", "num_draft_tokens")]
    assert tree == [5, 4, 8] and info["speculative_algorithm"] == "EAGLE3"
    assert info["max_running_requests"] == 48
    assert any("Max running requests is reset to 48" in line for line in server.lines())
    assert all(m["graph"] == "False" for m in _decode_for(server, lines=1))


def test_disable_cuda_graph_prints_false_and_runs_slower(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    on = start_standin(*_spec("EAGLE3", drafter))
    off = start_standin(*_spec("EAGLE3", drafter), "--disable-cuda-graph")
    on_lines, off_lines = _decode_for(on), _decode_for(off)
    assert all(m["graph"] == "True" for m in on_lines)
    assert all(m["graph"] == "False" for m in off_lines)
    ratio = float(on_lines[-1]["tput"]) / float(off_lines[-1]["tput"])
    assert ratio == pytest.approx(74.9 / 56.7, rel=0.08)


def test_behaviour_file_change_takes_effect(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text('{"acceptance": 0.3}')
    server = start_standin(
        *_spec("EAGLE3", drafter), env={"SPECSERVE_STANDIN_BEHAVIOUR_FILE": str(behaviour)}
    )
    low = _decode_for(server)
    behaviour.write_text('{"acceptance": 0.9, "throughput_scale": 1.0}')
    before = len(server.decode_matches())
    server.chat("again", max_tokens=120, ignore_eos=True)
    high = server.decode_matches()[before:]
    assert high, "no decode line after the change"
    shape = SpecShape(3, 1, 4)
    assert abs(float(low[-1]["accept_len"]) - accept_length(shape, 0.3)) <= 0.1
    assert abs(float(high[-1]["accept_len"]) - accept_length(shape, 0.9)) <= 0.1


def test_sigterm_drains_in_flight_and_exits_zero(start_standin) -> None:
    server = start_standin(env={"SPECSERVE_STANDIN_TIME_SCALE": "1.0"})
    result: dict[str, object] = {}

    def call() -> None:
        result["body"] = server.chat("long", max_tokens=60, ignore_eos=True)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)  # the request is running (60 tokens take ~0.7 s)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=15) == 0
    worker.join(timeout=15)
    body = result["body"]
    assert isinstance(body, dict) and body["usage"]["completion_tokens"] == 60
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/health", timeout=1)
    assert "specserve-standin: stopped" in server.lines()[-1]


def test_crash_knob_exits_nonzero(start_standin) -> None:
    server = start_standin(
        env={
            "SPECSERVE_STANDIN_CRASH_AFTER_SECONDS": "0.8",
            "SPECSERVE_STANDIN_CRASH_EXIT_CODE": "3",
        },
        wait=False,
    )
    assert server.proc.wait(timeout=10) == 3
    assert "simulated crash" in "\n".join(server.lines())


def _stream_chat(server, body: dict) -> list[dict]:
    r = requests.post(server.url + "/v1/chat/completions", json={**body, "stream": True},
                      stream=True, timeout=30)
    events = [line[len("data: ") :] for line in r.iter_lines(decode_unicode=True) if line]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_per_request_speculative_details_on_both_routes(start_standin, tmp_path: Path) -> None:
    """SGLang's per-request details (tests/contract/test_request_spec_details.py holds the
    formula to SGLang's own): native meta_info always under speculation, the OpenAI route's
    sglext only when asked, its stream chunk before the usage chunk; none without speculation."""
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    server = start_standin(*_spec("EAGLE3", drafter))
    gen = requests.post(server.url + "/generate", timeout=30, json={
        "text": "abc", "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}).json()
    meta = gen["meta_info"]
    assert meta["spec_accept_length"] == pytest.approx(40 / meta["spec_verify_ct"])
    histogram = meta["spec_correct_drafts_histogram"]
    assert sum(histogram) == meta["spec_verify_ct"] and len(histogram) <= 4
    assert sum(k * n for k, n in enumerate(histogram)) == meta["spec_num_correct_drafts"]
    assert meta["spec_num_proposed_drafts"] == 3 * meta["spec_verify_ct"]

    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 30,
            "ignore_eos": True}
    assert "sglext" not in server.chat("hello", max_tokens=30, ignore_eos=True)
    asked = requests.post(server.url + "/v1/chat/completions", timeout=30,
                          json={**body, "return_spec_tokens_details": True}).json()
    details = asked["sglext"]["spec_tokens_details"]
    assert details["spec_accept_length"] == pytest.approx(30 / details["spec_verify_ct"])
    chunks = _stream_chat(server, {**body, "return_spec_tokens_details": True,
                                   "stream_options": {"include_usage": True}})
    assert chunks[-2]["choices"] == [] and "spec_tokens_details" in chunks[-2]["sglext"]
    assert chunks[-1]["usage"]["completion_tokens"] == 30
    assert all("sglext" not in c for c in _stream_chat(server, body))

    plain = start_standin()
    gen = requests.post(plain.url + "/generate", timeout=30, json={
        "text": "abc", "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}}).json()
    assert not any(key.startswith("spec_") for key in gen["meta_info"])


def test_loop_knob_loops_only_the_matching_config(start_standin, tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, "LlamaForCausalLMEagle3")
    env = {"SPECSERVE_STANDIN_LOOP_WHEN": "speculative_num_steps=3,speculative_num_draft_tokens=4"}
    looping = start_standin(*_spec("EAGLE3", drafter), env=env)
    words = looping.chat("hello", max_tokens=30, ignore_eos=True)[
        "choices"][0]["message"]["content"].split()
    assert len(set(words)) <= 3 and words[3:] == words[:-3]  # one period, repeated
    other = start_standin(*_spec("EAGLE3", drafter)[:-6], "--speculative-num-steps", "2",
                          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
                          env=env)
    words = other.chat("hello", max_tokens=30, ignore_eos=True)[
        "choices"][0]["message"]["content"].split()
    assert len(set(words)) > 10
