"""SGLang's start-time refusals that `check` does not make, each with the reason.

The contract sweep (test_startup_refusals.py) resolves every option of every verified version's
table on the shipped profiles; every refusal it meets is either one of `check`'s rules
(specserve/profile/checks/startup.py) or listed here. docs/sglang-contract.md ("Start-time
refusals") shows this list; a test holds the two equal.

Kinds: `gpu` (the accelerator, its platform or the attention backend SGLang picks for it
decides; this CPU host says "no"), `model` (the checkpoint's architecture or config decides:
check would have to know every model family), `value` (a file or a registered name that exists
only where the server runs, or a probe's made-up value), `image` (a package of the SGLang image
decides).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("gpu", "model", "value", "image")
ATTENTION_FLAGS = (
    "--attention-backend",
    "--decode-attention-backend",
    "--prefill-attention-backend",
)


@dataclass(frozen=True)
class NotCovered:
    flags: tuple[str, ...]  # the probes' flags SGLang refuses with these words
    words: str  # a part of SGLang's message
    kind: str
    reason: str


NOT_COVERED: tuple[NotCovered, ...] = (
    # --- gpu -------------------------------------------------------------------------------
    NotCovered(
        ATTENTION_FLAGS[:2],
        "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100)",
        "gpu",
        "SM100 only (get_platform().is_sm100)",
    ),
    NotCovered(
        ATTENTION_FLAGS[:2],
        "tokenspeed_mla backend is only supported on Blackwell GPUs",
        "gpu",
        "Blackwell only (0.5.21)",
    ),
    NotCovered(
        ATTENTION_FLAGS[:2],
        "TRTLLM MLA backend is only supported on Blackwell GPUs",
        "gpu",
        "Blackwell only",
    ),
    NotCovered(
        ("--attention-backend", "--prefill-attention-backend"),
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs",
        "gpu",
        "SM90 / SM100 / SM120 only",
    ),
    NotCovered(
        ("--decode-attention-backend",),
        "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100)",
        "gpu",
        "SM90 / SM100 / SM120 only",
    ),
    NotCovered(
        (*ATTENTION_FLAGS, "--page-size"),
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on",
        "gpu",
        "the resolved backend and its page size decide (the GPU's default backend where none is "
        "written; flashmla forces pages of 64); check refuses it where both are written",
    ),
    NotCovered(
        ("--enable-deterministic-inference", "--rl-on-policy-target"),
        "but you explicitly specified 'intel_amx'",
        "gpu",
        "the CPU platform writes intel_amx; on a GPU SGLang picks a deterministic backend "
        "itself (check refuses a written backend outside the list)",
    ),
    NotCovered(
        ("--enable-unified-memory",),
        "the resolved attention backends ['torch_native'] are not in the allowed set",
        "gpu",
        "the GPU's default attention backend decides",
    ),
    NotCovered(
        ("--enable-kv-cache-sharding",),
        "--enable-kv-cache-sharding currently requires the fa3 prefill attention backend",
        "gpu",
        "the GPU's default attention backend decides (a PD prefill worker only)",
    ),
    NotCovered(
        ("--enable-amd-monokernel", "--monokernel-backend"),
        "--enable-amd-monokernel cannot run this setup",
        "gpu",
        "an AMD GPU's ISA decides",
    ),
    NotCovered(
        ("--enable-deepseek-v4-fp4-indexer",),
        "requires SM100, SM120, or gfx95 GPUs",
        "gpu",
        "SM100 / SM120 / gfx95 only",
    ),
    NotCovered(
        ("--enable-watermark",),
        "--enable-watermark requires --device cuda",
        "gpu",
        "the device: this host resolves with --device cpu",
    ),
    NotCovered(
        ("--load-format",),
        "InstantTensor requires a CUDA-compatible device",
        "gpu",
        "the device: this host resolves with --device cpu",
    ),
    NotCovered(
        ("--mm-feature-transport",),
        "requires NVIDIA CUDA",
        "gpu",
        "CUDA platforms only",
    ),
    NotCovered(
        ("--moe-a2a-backend", "--moe-runner-backend"),
        "--moe-a2a-backend megamoe needs a CUDA SM90 GPU",
        "gpu",
        "SM90 / SM100 (or ROCm) only",
    ),
    NotCovered(
        ("--quantization",),
        "--quantization nvfp4_online is supported only on NVIDIA Blackwell",
        "gpu",
        "SM100 / SM103 only",
    ),
    NotCovered(
        ("--speculative-use-block-verification",),
        "--speculative-use-block-verification only supports CUDA or ROCm.",
        "gpu",
        "the device: this host resolves with --device cpu",
    ),
    # --- model -----------------------------------------------------------------------------
    NotCovered(
        ("--enable-cp-decode-attn-tp",),
        "--enable-cp-decode-attn-tp is only supported for models whose attention linears",
        "model",
        "a list of architectures (DeepSeek-V4 family)",
    ),
    NotCovered(
        ("--enable-dsa-cache-layer-split",),
        "is only supported for DSA (DeepSeek Sparse Attention) models",
        "model",
        "DSA models only",
    ),
    NotCovered(
        ("--enable-hisparse",),
        "--enable-hisparse is only supported for DSA",
        "model",
        "DSA, DeepSeek-V4 and MiniMax-M3 models only",
    ),
    NotCovered(
        ("--enable-encoder-swa-bounded-replay",),
        "requires DeepSeek-V4.1",
        "model",
        "DeepSeek-V4.1 only",
    ),
    NotCovered(
        ("--enable-layernorm-sp",),
        "--enable-layernorm-sp is only supported for",
        "model",
        "a list of architectures (Qwen3, Muse Spark)",
    ),
    NotCovered(
        ("--encoder-only", "--language-only"),
        "is not supported for encoder disaggregation",
        "model",
        "multimodal architectures only (Kimi-K2.5 is one)",
    ),
    NotCovered(
        ("--language-model-only",),
        "--language-model-only does not support",
        "model",
        "a list of architectures",
    ),
    NotCovered(
        ("--load-format",),
        "Invalid expert_pack configuration",
        "model",
        "DeepSeek-V4 / Kimi-K3 checkpoints with an expert pack only",
    ),
    NotCovered(
        ("--mamba-radix-cache-strategy",),
        "needs mamba state",
        "model",
        "hybrid Mamba models only",
    ),
    NotCovered(
        ("--moe-a2a-backend",),
        "DeepEP v2 MoE is not validated for",
        "model",
        "architectures registered with register_deepep_v2_model only",
    ),
    NotCovered(
        ("--moe-a2a-backend",),
        "FlashInfer MegaMOE is not validated for model architectures",
        "model",
        "a list of MoE architectures",
    ),
    NotCovered(
        ("--moe-runner-backend",),
        "FlashInfer CuteDSL MOE currently supports only",
        "model",
        "NVFP4 checkpoints (or --quantization modelopt_fp4 / nvfp4_online) only",
    ),
    NotCovered(
        ("--quantization",),
        "Quantization method specified in the model config",
        "model",
        "the checkpoint's quantization_config (Kimi-K2.5: compressed-tensors) must match",
    ),
    NotCovered(
        ("--shared-experts-tp-size",),
        "--shared-experts-tp-size",
        "model",
        "Kimi-K3 only (its divisor check runs first)",
    ),
    # --- value -----------------------------------------------------------------------------
    NotCovered(
        ("--config",),
        "Config file must be YAML format",
        "value",
        "a YAML file where the server runs",
    ),
    NotCovered(
        ("--decrypted-config-file", "--decrypted-draft-config-file"),
        "does not appear to have a file named",
        "value",
        "a file of the model directory",
    ),
    NotCovered(
        ("--dllm-algorithm",),
        "Unknown diffusion LLM algorithm",
        "value",
        "a registered algorithm name (diffusion LLMs only)",
    ),
    NotCovered(
        ("--model-config-parser",),
        "Unknown model-config parser",
        "value",
        "a registered parser name (plugins may add one)",
    ),
    NotCovered(
        ("--watermark-config",),
        "failed to read watermark config JSON",
        "value",
        "a JSON file where the server runs",
    ),
    # --- image -----------------------------------------------------------------------------
    NotCovered(
        ("--enable-http2",),
        "--enable-http2 requires the 'granian' package",
        "image",
        "whether the image installs granian (sglang[http2])",
    ),
    NotCovered(
        ("--enable-nvidia-megakernel",),
        "--enable-nvidia-megakernel cannot run this setup",
        "image",
        "the sgl-nvidia-mega plugin and the GPU",
    ),
    NotCovered(
        ("--mamba-backend",),
        "FlashInfer mamba module not available",
        "image",
        "FlashInfer's mamba module in the image",
    ),
)


def not_covered(flag: str, error: str) -> NotCovered | None:
    """The entry that explains SGLang's refusal `error` of a probe of `flag`, if any."""
    return next((n for n in NOT_COVERED if flag in n.flags and n.words in error), None)
