"""Which all-reduce message sizes to measure.

Tensor-parallel decode all-reduces one hidden-state row per token in flight, so the sizes that
matter are tokens x hidden x element size for the batch sizes a decode step sees; a few large
sizes show where bandwidth saturates (prefill, and comparison with nccl-tests).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

# Kimi-K2.5's hidden size (its config.json: hidden_size 7168).
DEFAULT_HIDDEN_SIZE = 7168
DEFAULT_TOKEN_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MIB = 1 << 20
DEFAULT_LARGE_BYTES: tuple[int, ...] = (16 * MIB, 64 * MIB, 256 * MIB)

DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}

_UNITS: dict[str, int] = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_BYTES_ITEM = re.compile(r"^(\d+)(B|KiB|MiB|GiB)$")


class SizeSpecError(ValueError):
    """A --sizes item that is neither a token count nor a byte size."""


@dataclass(frozen=True)
class MessageSize:
    label: str
    nbytes: int
    numel: int
    tokens: int | None  # None for the large sizes given in bytes

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def format_bytes(nbytes: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]}{unit}"
    return f"{nbytes}B"


def token_size(tokens: int, hidden_size: int, dtype: str) -> MessageSize:
    if tokens <= 0:
        raise SizeSpecError(f"token count {tokens} must be positive")
    numel = tokens * hidden_size
    return MessageSize(f"{tokens}tok", numel * DTYPE_BYTES[dtype], numel, tokens)


def byte_size(nbytes: int, dtype: str) -> MessageSize:
    elem = DTYPE_BYTES[dtype]
    if nbytes <= 0 or nbytes % elem:
        raise SizeSpecError(
            f"byte size {nbytes} must be a positive multiple of the {dtype} element size ({elem})"
        )
    return MessageSize(format_bytes(nbytes), nbytes, nbytes // elem, None)


def default_sizes(hidden_size: int, dtype: str) -> list[MessageSize]:
    sizes = [token_size(t, hidden_size, dtype) for t in DEFAULT_TOKEN_COUNTS]
    sizes += [byte_size(b, dtype) for b in DEFAULT_LARGE_BYTES]
    return sizes


def parse_sizes(spec: str, hidden_size: int, dtype: str) -> list[MessageSize]:
    """Parse a --sizes value: comma list of token counts ("8") and byte sizes ("16MiB", "4096B").

    Duplicates are dropped and the result is sorted by bytes, so tables read top to bottom.
    """
    if dtype not in DTYPE_BYTES:
        raise SizeSpecError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
    if hidden_size <= 0:
        raise SizeSpecError(f"hidden size {hidden_size} must be positive")
    sizes: dict[int, MessageSize] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.isdigit():
            size = token_size(int(item), hidden_size, dtype)
        else:
            match = _BYTES_ITEM.match(item)
            if match is None:
                raise SizeSpecError(
                    f"--sizes item {item!r} is neither a token count (e.g. 8) nor a byte size "
                    "(e.g. 4096B, 64KiB, 16MiB, 1GiB)"
                )
            size = byte_size(int(match.group(1)) * _UNITS[match.group(2)], dtype)
        sizes.setdefault(size.nbytes, size)
    if not sizes:
        raise SizeSpecError(f"--sizes {spec!r} names no size")
    return sorted(sizes.values(), key=lambda s: s.nbytes)
