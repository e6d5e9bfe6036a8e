"""`python -m specserve.nccl`: the benchmark without the `specserve` console script's deps."""

import sys

from specserve.nccl.cli import main

sys.exit(main())
