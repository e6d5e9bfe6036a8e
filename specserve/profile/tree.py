"""The draft tree the server runs: the profile's, or the one SGLang picks where the profile leaves
it unset, so the draft-token count is a fact of every speculative profile.

The exporter's draft-token gauge and draft-acceptance ratio, the rule
`SpecDecodeAcceptAboveDraftTokens` and the gate's accept-length ceiling all need the count;
before, a profile that left the tree to SGLang gave them nothing to work with. SGLang's
resolution (arg_groups/speculative_hook.py, every verified version) decides it so:

- NGRAM: `_handle_ngram` sets 12 draft tokens unless given;
- DFLASH (`_handle_dflash`): the block size, which is the draft-token count (given both, they
  must match); DSPARK (`_handle_dspark`): the block size gamma + 1, or the count given. Neither
  given, SGLang reads the drafter's config.json: the count is then unknown here, and `check`
  asks for the block size (checks/speculative.py);
- adaptive (kept on: profile/adaptive.py): `_init_adaptive_speculative_params` starts at the
  config's middle candidate step (or the given one) with steps + 1 draft tokens;
- the EAGLE family with no tree: `_auto_choose_speculative_params`, by the algorithm (STANDALONE)
  or the target's architecture (config.json `architectures[0]`: `target.architecture` in the
  profile, since the model's files are often not where the profile is read);
- UNO (`_handle_uno`): the verify width Q (num_draft_tokens) as given; one step at top-k 1;
- a top-k 1 chain: steps + 1 whatever num_draft_tokens says.

tests/contract/test_effective_tree.py resolves each case with SGLang's real code and holds the
count here to the one SGLang resolves.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.adaptive import AdaptiveConfigError, candidate_steps, load_config, start_steps
from specserve.profile.adaptive import adaptive_kept
from specserve.profile.algorithms import BLOCK_ALGORITHMS
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract

# _handle_ngram's default (its log line: "speculative_num_draft_tokens is set to 12 by default").
NGRAM_DEFAULT_DRAFT_TOKENS = 12


def block_draft_tokens(
    algorithm: str, dflash_block: int | None, dspark_block: int | None, draft_tokens: int | None
) -> int | None:
    """The draft tokens a block drafter verifies per pass as SGLang resolves them from the
    profile alone; None where SGLang would read them from the drafter's config.json.
    DFLASH: the block size, else num_draft_tokens (given both, they must match). DSPARK: gamma
    (the block size) + 1, else num_draft_tokens (SGLang refuses any other than the drafter's
    gamma + 1)."""
    if algorithm == "DFLASH":
        return dflash_block if dflash_block is not None else draft_tokens
    if algorithm == "DSPARK":
        return dspark_block + 1 if dspark_block is not None else draft_tokens
    return None


@dataclass(frozen=True)
class EffectiveTree:
    draft_tokens: int
    steps: int | None  # None where the count alone is decided here (NGRAM's steps need its BFS)
    topk: int | None
    source: str  # how it was decided, for messages: "the profile", "SGLang's default for X"


def architecture_dependent(profile: Profile) -> bool:
    """Whether the tree is SGLang's per-architecture choice: the EAGLE family (not STANDALONE,
    not adaptive) with no tree parameter set."""
    d = profile.speculative
    return (
        d is not None
        and d.algorithm not in ("NGRAM", "STANDALONE", "FROZEN_KV_MTP", "UNO", *BLOCK_ALGORITHMS)
        and not adaptive_kept(profile)
        and d.num_steps is None
        and d.eagle_topk is None
        and d.num_draft_tokens is None
    )


def effective_tree(profile: Profile, contract: Contract) -> EffectiveTree | None:
    """The tree SGLang `contract.version` runs for `profile`; None without speculation, for a
    partial tree SGLang refuses (checks/speculative.py says so), or where the choice is by
    architecture and `target.architecture` is unset."""
    d = profile.speculative
    if d is None:
        return None
    steps, topk, draft = d.num_steps, d.eagle_topk, d.num_draft_tokens
    if d.algorithm == "NGRAM":
        if draft is not None:
            return EffectiveTree(draft, steps, topk, "the profile")
        return EffectiveTree(NGRAM_DEFAULT_DRAFT_TOKENS, steps, topk, "SGLang's NGRAM default")
    if d.algorithm == "UNO":
        # _handle_uno: Q verified; linear mode (top-k 1) one step, a tree steps x top-k.
        if draft is None or (topk not in (None, 1) and steps is None):
            return None  # SGLang refuses to start; checks/uno.py says why
        if topk in (None, 1):
            return EffectiveTree(draft, 1, 1, "the profile")
        return EffectiveTree(draft, steps, topk, "the profile")
    if d.algorithm in BLOCK_ALGORITHMS:
        count = block_draft_tokens(d.algorithm, d.dflash_block_size, d.dspark_block_size, draft)
        # One step of top-k 1 whatever the profile says (SGLang overrides both; check refuses).
        return None if count is None else EffectiveTree(count, 1, 1, "the block size")
    if adaptive_kept(profile):
        try:
            start = start_steps(steps, candidate_steps(load_config(d.adaptive_config)))
        except (AdaptiveConfigError, ValueError):
            return None  # SGLang refuses to start; checks/adaptive.py says why
        return EffectiveTree(start + 1, start, 1, "SGLang's adaptive start (steps + 1)")
    source = "the profile"
    if steps is None and topk is None and draft is None:
        architecture = profile.target.architecture
        if d.algorithm == "FROZEN_KV_MTP":
            return None  # SGLang leaves it unset; checks/speculative.py refuses that
        if d.algorithm != "STANDALONE" and architecture is None:
            return None
        steps, topk, draft = contract.default_tree(architecture or "", d.algorithm)
        source = f"SGLang's default for {architecture or d.algorithm}"
    if steps is None or topk is None or draft is None:
        return None
    if topk == 1:
        draft = steps + 1
    return EffectiveTree(draft, steps, topk, source)
