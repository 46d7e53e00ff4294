"""bench/rows.py with e5's weight beside the encoder's order for non-English messages set to W
(funes.selection.multilingual.FOREIGN_WEIGHT, 6 as shipped).

    .venv/bin/python bench/foreign_weight.py W --eval ../shared/eval --rows "multilingual bare,multilingual2 bare"
"""
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.selection import multilingual  # noqa: E402

if __name__ == "__main__":
    multilingual.FOREIGN_WEIGHT = float(sys.argv.pop(1))
    sys.argv[0] = str(Path(__file__).with_name("rows.py"))
    runpy.run_path(sys.argv[0], run_name="__main__")
