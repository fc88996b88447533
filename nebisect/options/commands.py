"""Every command whose options the table declares, in the CLI's order."""

from __future__ import annotations

from nebisect.options.bisect_table import BISECT
from nebisect.options.corpus_table import ADD
from nebisect.options.fix_table import APPLY, VERIFY
from nebisect.options.fuzz_table import FUZZ
from nebisect.options.lint_table import LINT
from nebisect.options.replay_table import REPLAY
from nebisect.options.run_table import RUN

COMMANDS = (RUN, BISECT, FUZZ, LINT, REPLAY, APPLY, VERIFY, ADD)
