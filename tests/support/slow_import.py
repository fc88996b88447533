"""A module whose import announces itself and then blocks: a fork template importing it
(as a module it needs while it starts, or as a job's module before its first fork) is busy
and does not read its requests.

The import creates ``$NEBISECT_TEST_IMPORTING`` (holding the importing process's pid)
and then sleeps far longer than any test waits, so a job naming a function of this
module never gets to run it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SLEEP_SECONDS = 3600

Path(os.environ["NEBISECT_TEST_IMPORTING"]).write_text(str(os.getpid()))
time.sleep(SLEEP_SECONDS)
