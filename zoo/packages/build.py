"""Build the package zoo: ``python zoo/packages/build.py OUT_DIR [RECIPE ...]``.

Writes each recipe's package (:mod:`recipes`) into OUT_DIR and prints its path; with no
recipe named, every one.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recipes import RECIPES


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    out = Path(argv[0])
    names = argv[1:] or sorted(RECIPES)
    unknown = [name for name in names if name not in RECIPES]
    if unknown:
        print(f"unknown recipe {', '.join(unknown)}: one of {', '.join(sorted(RECIPES))}",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        print(RECIPES[name](out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
