import pytest

from specserve.nccl.sizes import (
    DEFAULT_TOKEN_COUNTS,
    SizeSpecError,
    byte_size,
    default_sizes,
    format_bytes,
    parse_sizes,
    token_size,
)


def test_token_sizes_are_tokens_times_hidden_times_dtype_bytes():
    one = token_size(1, 7168, "bfloat16")
    assert (one.label, one.nbytes, one.numel, one.tokens) == ("1tok", 14336, 7168, 1)
    big = token_size(256, 7168, "bfloat16")
    assert big.nbytes == 256 * 7168 * 2 == 3670016
    assert token_size(8, 7168, "float32").nbytes == 8 * 7168 * 4


def test_default_sizes_cover_decode_token_counts_then_large_sizes():
    sizes = default_sizes(7168, "bfloat16")
    assert [s.tokens for s in sizes[: len(DEFAULT_TOKEN_COUNTS)]] == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
    ]
    large = sizes[len(DEFAULT_TOKEN_COUNTS) :]
    assert [(s.label, s.nbytes, s.numel) for s in large] == [
        ("16MiB", 16 << 20, 8 << 20),
        ("64MiB", 64 << 20, 32 << 20),
        ("256MiB", 256 << 20, 128 << 20),
    ]
    assert all(s.tokens is None for s in large)


def test_parse_mixes_tokens_and_bytes_sorted_and_deduplicated():
    sizes = parse_sizes("16MiB, 8,1,4096B,8", 7168, "bfloat16")
    assert [s.label for s in sizes] == ["4KiB", "1tok", "8tok", "16MiB"]
    assert [s.nbytes for s in sizes] == [4096, 14336, 114688, 16 << 20]


def test_hidden_size_changes_token_sizes():
    assert parse_sizes("4", 4096, "float16")[0].nbytes == 4 * 4096 * 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("8,lots", "'lots' is neither a token count"),
        ("16MB", "'16MB' is neither a token count"),
        ("0", "must be positive"),
        (" , ", "names no size"),
        ("3B", "multiple of the bfloat16 element size"),
    ],
)
def test_bad_sizes_name_the_item(spec, message):
    with pytest.raises(SizeSpecError, match=message):
        parse_sizes(spec, 7168, "bfloat16")


def test_unknown_dtype_is_refused():
    with pytest.raises(SizeSpecError, match="unknown dtype 'int8'"):
        parse_sizes("1", 7168, "int8")


def test_format_bytes_picks_the_largest_exact_unit():
    assert format_bytes(1 << 30) == "1GiB"
    assert format_bytes(3 << 10) == "3KiB"
    assert format_bytes(1000) == "1000B"
    assert byte_size(6 << 20, "float32").numel == (6 << 20) // 4
