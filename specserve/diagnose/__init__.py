"""`specserve diagnose`: the measured causes of a slowdown, ranked (cli.py says how)."""
