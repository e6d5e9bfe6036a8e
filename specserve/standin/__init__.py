"""CPU stand-in for an SGLang server (NOT SGLang): for demos and tests where no GPU exists.

The stand-in accepts `sglang.launch_server`'s flags, refuses connections while it "loads",
answers 503 while it "warms up", serves SGLang's HTTP endpoints with a fake word generator, and
prints Prefill/Decode stats lines in the current upstream format at a simulated, deterministic
pace. Its speculative-decoding behaviour model (docs/standin.md) reproduces the real failure
signatures the product guards against: EAGLE on an EAGLE-3 drafter decodes at `accept len: 1.00`;
`--disable-cuda-graph` prints `cuda graph: False` and runs slower.

Nothing here touches a GPU or a real model: every number is computed from a documented formula.
"""

from __future__ import annotations

STANDIN_NAME = "specserve-standin"
STANDIN_NOTICE = "CPU stand-in for SGLang (not SGLang; simulated tokens, no model is run)"
