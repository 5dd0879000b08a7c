"""``python -m scorer``: the ``scorer`` command."""

from scorer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
