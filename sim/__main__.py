"""``python -m sim ...`` is ``simrun ...`` (handy in a checkout that is not installed)."""

from sim.cli import main

if __name__ == "__main__":
    main()
