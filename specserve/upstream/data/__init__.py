"""Committed SGLang contract data (written by scripts/sglang/regenerate; do not edit by hand)."""
