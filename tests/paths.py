"""Where the tests find the repository and MNIST (no heavy imports: the pytest-xdist controller reads it too)."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# where the explorer and the CLI look, run from the repository: $PONDER_DATA, else ./data (ponder.data.default_data_dir)
DATA_DIR = os.environ.get("PONDER_DATA") or str(ROOT / "data")
