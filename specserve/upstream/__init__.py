"""SGLang's own facts, per verified version, as data (docs/sglang-contract.md).

    from specserve.upstream import sglang_contract, PINNED_VERSION, VERIFIED_VERSIONS
    c = sglang_contract("0.5.21")
    c.option("--speculative-algorithm"), c.eagle3_drafter_architectures, c.metric_names, ...

The data is extracted from SGLang's real code (scripts/sglang/extract_contract.py); the contract
suite (tests/contract/) proves it still matches for every verified version.
"""

from specserve.upstream.contract import (
    PINNED_VERSION,
    VERIFIED_VERSIONS,
    Drafter,
    Metric,
    Option,
    SGLangContract,
    UnknownSGLangVersion,
    sglang_contract,
)

__all__ = [
    "PINNED_VERSION",
    "VERIFIED_VERSIONS",
    "Drafter",
    "Metric",
    "Option",
    "SGLangContract",
    "UnknownSGLangVersion",
    "sglang_contract",
]
