"""`specserve bench`: measure the deployed server's throughput with and without speculation.

Streams OpenAI-compatible chat completions at several concurrency levels with fixed output
lengths, reads accept length and server throughput from the specserve exporter during each
level, and writes results.json, results.md and plot.png (docs/bench.md).
"""
