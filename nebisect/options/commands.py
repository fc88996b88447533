"""Every command whose options the table declares, in the CLI's order."""

from __future__ import annotations

from nebisect.options.bisect_table import BISECT
from nebisect.options.lint_table import LINT
from nebisect.options.run_table import RUN

COMMANDS = (RUN, BISECT, LINT)
