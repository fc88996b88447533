"""``python -m nebisect`` — same as the ``nebisect`` console script."""

from nebisect.cli import main

main()
