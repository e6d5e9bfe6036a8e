"""Measure NCCL presets on the user's own node: all-reduce latency and bus bandwidth.

Stdlib-only at import time: the benchmark runs inside the SGLang image, which has PyTorch and
NCCL but none of specserve's other dependencies. Only `worker` and `machine` import torch, and
only when a benchmark actually runs.
"""
