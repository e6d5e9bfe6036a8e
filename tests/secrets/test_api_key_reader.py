"""One reader of the client-side API key (specserve.apikey): `specserve verify` and
`specserve bench` take it the same ways and refuse an absent one in the same words."""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from specserve.apikey import API_KEY_ENV, ApiKeyError, read_api_key
from specserve.bench import commands as bench
from specserve.verify import cli as verify


def _verify(file: Path | None) -> str | None:
    return verify._api_key(argparse.Namespace(api_key_file=file, api_key_env=None))


def _bench(file: Path | None) -> str | None:
    return bench.api_key(argparse.Namespace(api_key_file=file))


CLIENTS: dict[str, tuple[Callable[[Path | None], str | None], type[Exception]]] = {
    "verify": (_verify, verify.UsageError),
    "bench": (_bench, bench.UsageError),
}


def test_the_reader_takes_a_file_stdin_a_named_variable_or_the_default_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text("  sk-file-1\n", encoding="utf-8")
    monkeypatch.setenv(API_KEY_ENV, " sk-default-2 ")
    monkeypatch.setenv("MY_KEY", "sk-named-3\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("sk-stdin-4\n"))
    assert read_api_key(key_file) == "sk-file-1"
    assert read_api_key("-") == "sk-stdin-4"
    assert read_api_key(env="MY_KEY") == "sk-named-3"
    assert read_api_key() == "sk-default-2"
    monkeypatch.setenv(API_KEY_ENV, "   ")
    assert read_api_key() is None  # a blank default variable is no key, not an error


def test_a_named_source_that_holds_no_key_is_refused_naming_the_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ApiKeyError, match=f"^{re.escape(f'--api-key-file {empty} is empty')}$"):
        read_api_key(empty)
    with pytest.raises(ApiKeyError, match=r"^--api-key-file .*/absent: No such file"):
        read_api_key(tmp_path / "absent")
    monkeypatch.delenv("UNSET_KEY", raising=False)
    with pytest.raises(ApiKeyError, match=r"^--api-key-env UNSET_KEY: the variable is unset"):
        read_api_key(env="UNSET_KEY")


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_every_client_reads_the_key_as_the_one_reader_does(
        client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read, usage_error = CLIENTS[client]
    padded = tmp_path / "padded"
    padded.write_text("\tsk-padded-5 \n", encoding="utf-8")
    assert read(padded) == read_api_key(padded) == "sk-padded-5"
    monkeypatch.setenv(API_KEY_ENV, " sk-env-6\n")
    assert read(None) == read_api_key() == "sk-env-6"
    monkeypatch.setenv(API_KEY_ENV, "")
    assert read(None) is None
    for bad in (tmp_path / "absent", tmp_path / "blank"):
        (tmp_path / "blank").write_text("  ", encoding="utf-8")
        with pytest.raises(ApiKeyError) as expected:
            read_api_key(bad)
        with pytest.raises(usage_error, match=f"^{re.escape(str(expected.value))}$"):
            read(bad)
