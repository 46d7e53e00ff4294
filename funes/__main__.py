"""Entry point: python -m funes ..."""
from funes.cli import main

if __name__ == "__main__":
    main()
