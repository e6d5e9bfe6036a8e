"""Mitogen's linear strategy (the `mitogen` package pinned in versions.yaml), found through the
installed package so that ansible.cfg needs no site-packages path.

Why Mitogen: each task of the stock strategy forks a worker that starts a new Python, unpacks
the module's AnsiballZ zip and compiles ansible.module_utils again (about 0.3 s of CPU a task
on a local connection); Mitogen keeps one interpreter per host and runs modules in it. Its
figures against the stock strategy are in docs/ansible.md ("Deploy time"). To run without it:
ANSIBLE_STRATEGY=linear.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
