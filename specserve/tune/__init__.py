"""Tuning runs (`specserve tune`, driven by playbooks/tune.yml): the candidates, the run's state,
the ranking and its report. The Ansible role keeps the orchestration (which node, the verified
restarts, the benchmarks, the loop); the decisions are made here, so they are plain Python the
tests call directly.

- edit.py: a profile with its speculation retuned or switched off, or a new baseline block
- plan.py: the candidates (no speculation, the grid, adaptive, other methods), judged by `check`
- settings.py: the ranking settings (concurrency, traffic mix), refused before any restart
- state.py: state.json, so an interrupted run resumes with what it had not finished
- measure.py: one candidate's numbers from its `specserve bench` results.json
- rank.py: the ranking, the per-concurrency winners, the crossover and the verdict
- markdown.py, plot.py: report.md and plot.png
- report.py: rank a run directory and write report.json, report.md and plot.png
"""
