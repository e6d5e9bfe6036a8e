"""CPU stand-in for an SGLang server (NOT SGLang): for demos and tests where no GPU exists.

The stand-in accepts exactly `sglang.launch_server`'s flags (its parser is generated from SGLang's
real option table, for SPECSERVE_STANDIN_SGLANG_VERSION), resolves them as SGLang does where that
matters (the 48-request cap, tree defaults per target architecture), refuses connections while
it "loads", answers 503 on /health and /ready until its warm-up is done (while /generate already
serves, as upstream), serves SGLang's HTTP endpoints with a fake word generator, prints what
SGLang prints at start (`server_args={...}`, API key included, so redaction is tested for real),
and prints Prefill/Decode stats lines in SGLang's own format at a simulated, deterministic pace.
Its speculative-decoding behaviour model (docs/standin.md) reproduces the real failure
signatures the product guards against: EAGLE on an EAGLE-3 drafter decodes at `accept len: 1.00`;
`--disable-cuda-graph` prints `cuda graph: False` and runs slower.

Nothing here touches a GPU or a real model: every number is computed from a documented formula.
"""

from __future__ import annotations

STANDIN_NAME = "specserve-standin"
STANDIN_NOTICE = "CPU stand-in for SGLang (not SGLang; simulated tokens, no model is run)"
