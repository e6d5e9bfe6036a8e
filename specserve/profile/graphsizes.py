"""The decode batch sizes SGLang captures as CUDA graphs, resolved as its own code resolves them.

A decode batch larger than the largest captured one runs eagerly, with no error and no log line
beyond `cuda graph: False` on the decode lines (sglang#33900), so `check` compares this list with
the running-request cap (checks/graphcover.py). SGLang decides the list at argument resolution,
the same way in 0.5.21 and 0.5.23 but for one step (marked below):
- `arg_groups/cuda_graph_hook.py::parse_cuda_graph_config`: the decode `max_bs` and `bs` come from
  `--cuda-graph-config`'s `decode` object, else `--cuda-graph-max-bs-decode` /
  `--cuda-graph-bs-decode`, else unset;
- `arg_groups/memory_hook.py::handle_gpu_memory_settings`: an unset `max_bs` gets the default of
  the GPU's memory band and the TP size (`default_decode_max_bs`); 0.5.23 then lowers that default
  (never an explicit value) to an explicit `--max-running-requests` below it. The speculative
  hooks' own cap (48 when `--max-running-requests` is unset) is applied after this step, so it
  lowers nothing. Then an unset `bs` is generated from `max_bs`
  (`cuda_graph_hook.py::generate_decode_cuda_graph_batch_sizes`: one list without speculation, a
  denser one with it, every size with `--disable-cuda-graph-padding`); a given `bs` replaces
  `max_bs` by its largest entry.
At capture (`model_executor/runner/base_cuda_graph_runner.py::get_batch_sizes_to_capture`) the
list is clamped to the request pool (sized from the running-request cap), adding the pool size
itself when the list goes past it: a cap at or below the largest size is always captured, so
coverage is `largest >= cap`.

tests/contract/test_graph_sizes.py runs SGLang's own resolution of both verified versions over a
grid of GPU memory, TP, speculation, caps and graph flags, and compares with this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MIB_PER_GIB = 1024

# memory_hook.py::handle_gpu_memory_settings: (upper bound of the band in MiB, exclusive; decode
# max_bs below TP 4, at TP 4 or more). The last band has no upper bound.
_BANDS: tuple[tuple[float, int, int], ...] = (
    (20 * 1024, 8, 8),  # T4, 4080
    (35 * 1024, 48, 160),  # A10, 4090, 5090
    (60 * 1024, 32, 160),  # A100 40GB, L40
    (90 * 1024, 256, 512),  # H100, A100 80GB
    (160 * 1024, 256, 512),  # H20, H200
    (float("inf"), 512, 512),  # B200, MI300
)
NO_MEMORY_MAX_BS = 160  # SGLang's fallback when it reads no GPU memory
TP_LARGE = 4
# 0.5.23 added the step that lowers a default max_bs to an explicit --max-running-requests.
_CAPS_DEFAULT_SINCE = (0, 5, 23)


@dataclass(frozen=True)
class GraphInputs:
    """What SGLang's resolution reads to size the decode graphs (one argv on one GPU)."""

    version: str
    gpu_memory_mib: float | None  # get_device_memory_capacity(); None: SGLang read none
    tp_size: int = 1
    speculative: bool = False
    max_running_requests: int | None = None  # as given on the command line
    max_bs: int | None = None  # the decode max_bs given (flag or --cuda-graph-config)
    bs: tuple[int, ...] | None = None  # the decode batch sizes given
    disable_padding: bool = False


def band_floors_mib() -> tuple[float, ...]:
    """The lowest memory (MiB) of each band SGLang distinguishes, smallest first."""
    return (0.0, *(upper for upper, _, _ in _BANDS[:-1]))


def default_decode_max_bs(gpu_memory_mib: float | None, tp_size: int) -> int:
    """The decode max_bs SGLang picks when none is given (before any running-request cap)."""
    if gpu_memory_mib is None:
        return NO_MEMORY_MAX_BS
    for upper, small_tp, large_tp in _BANDS:
        if gpu_memory_mib < upper:
            return small_tp if tp_size < TP_LARGE else large_tp
    raise AssertionError("the last band has no upper bound")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


def generated_batch_sizes(max_bs: int, speculative: bool, disable_padding: bool) -> list[int]:
    """cuda_graph_hook.py::generate_decode_cuda_graph_batch_sizes for `max_bs`."""
    if disable_padding:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16),
                 *range(512, max_bs + 1, 32)]  # fmt: skip
    else:  # less padding for small batches under speculation
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
                 *range(272, max_bs + 1, 16)]  # fmt: skip
    sizes = [bs for bs in sizes if bs <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def decode_graph_batch_sizes(inputs: GraphInputs) -> tuple[int, ...]:
    """The decode batch sizes SGLang resolves (`cuda_graph_config.decode.bs`), in its order."""
    if inputs.bs is not None:
        return tuple(inputs.bs)
    max_bs = inputs.max_bs
    if max_bs is None:
        max_bs = default_decode_max_bs(inputs.gpu_memory_mib, inputs.tp_size)
        cap = inputs.max_running_requests
        if _version_tuple(inputs.version) >= _CAPS_DEFAULT_SINCE and cap is not None:
            max_bs = min(max_bs, cap)
    return tuple(generated_batch_sizes(max_bs, inputs.speculative, inputs.disable_padding))


def config_decode(raw: object) -> tuple[int | None, tuple[int, ...] | None]:
    """(max_bs, bs) the `decode` object of a --cuda-graph-config JSON sets; (None, None) where it
    sets neither or does not parse (checks/graphs.py reports a malformed one)."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None, None
    decode = parsed.get("decode") if isinstance(parsed, dict) else None
    if not isinstance(decode, dict):
        return None, None
    max_bs = decode.get("max_bs")
    bs = decode.get("bs")
    return (
        max_bs if isinstance(max_bs, int) and not isinstance(max_bs, bool) else None,
        tuple(int(b) for b in bs) if isinstance(bs, list) and bs else None,
    )
