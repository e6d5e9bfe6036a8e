"""Concurrency buckets: the bounded label that lets throughput be compared with a baseline.

SGLang's `gen throughput` is the whole server's decode rate for all running requests together,
so it only means something next to a baseline measured at the same load. `#running-req` is bucketed
to powers of two so the label set stays small: 3 and 4 running requests share bucket "4".
The benchmark measures at 1, 2, 4, 8, ... so every measured level names its own bucket.
"""

from __future__ import annotations

BUCKET_BOUNDS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
OVERFLOW_LABEL = "inf"
IDLE_LABEL = "0"
BUCKET_LABELS: tuple[str, ...] = (IDLE_LABEL, *(str(b) for b in BUCKET_BOUNDS), OVERFLOW_LABEL)

# Precomputed for the exporter's hot path: running-req count -> label.
_SMALL: tuple[str, ...] = tuple(
    IDLE_LABEL if n == 0 else next(str(b) for b in BUCKET_BOUNDS if n <= b)
    for n in range(BUCKET_BOUNDS[-1] + 1)
)


def concurrency_bucket(running_requests: int) -> str:
    """Label of the bucket holding `running_requests` (0 is its own bucket: idle)."""
    if running_requests < 0:
        raise ValueError(f"running requests cannot be negative: {running_requests}")
    if running_requests < len(_SMALL):
        return _SMALL[running_requests]
    return OVERFLOW_LABEL


def validate_bucket_label(label: str) -> str:
    """Return `label` if it names a bucket, else raise ValueError saying which labels exist."""
    if label not in BUCKET_LABELS or label == IDLE_LABEL:
        valid = ", ".join(BUCKET_LABELS[1:])
        raise ValueError(f"unknown concurrency bucket {label!r}: use one of {valid}")
    return label
