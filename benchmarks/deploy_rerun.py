"""Time a no-change re-run of playbooks/deploy.yml against a healthy node.

    .venv/bin/python -m benchmarks.deploy_rerun [-i INVENTORY] [--runs N] [-- EXTRA ARGS]

The first run brings the node to its desired state (it may change things); the timed runs that
follow must report changed=0. Prints each run's wall time and the PLAY RECAP counts.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)",
                   re.MULTILINE)


def run_playbook(inventory: str, extra: list[str]) -> tuple[float, int, str]:
    start = time.monotonic()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "playbooks/deploy.yml",
         "-i", inventory, *extra],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    return time.monotonic() - start, proc.returncode, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-i", "--inventory", default="playbooks/inventory/standin/hosts.yml")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="passed to ansible-playbook (after --)")
    args = parser.parse_args(argv)
    seconds, rc, output = run_playbook(args.inventory, args.extra)
    print(f"converge run: {seconds:.1f} s, rc {rc}")
    if rc != 0:
        print(output[-3000:])
        return 1
    times: list[float] = []
    for index in range(args.runs):
        seconds, rc, output = run_playbook(args.inventory, args.extra)
        recaps = RECAP.findall(output)
        changed = sum(int(r[2]) for r in recaps)
        failed = sum(int(r[4]) for r in recaps)
        times.append(seconds)
        print(f"no-change re-run {index + 1}: {seconds:.1f} s wall, rc {rc}, "
              f"changed={changed}, failed={failed}, hosts={len(recaps)}")
        if rc != 0 or changed != 0:
            print(output[-3000:])
            return 1
    print(f"median {statistics.median(times):.1f} s over {len(times)} runs, changed=0 every time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
