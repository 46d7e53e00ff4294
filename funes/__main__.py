"""Entry point: python -m funes ..."""
import os
import sys

from funes.cli import main

if __name__ == "__main__":
    if sys.flags.safe_path:  # run with -P (the scripts): the caller's modules (TOOL_MODULES names) come after ours
        sys.path.append(os.getcwd())
    main()
