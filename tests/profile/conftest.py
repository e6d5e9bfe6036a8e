import sys
from pathlib import Path

# helpers.py sits next to the tests; tests/ has no __init__.py, so make it importable.
sys.path.insert(0, str(Path(__file__).parent))
