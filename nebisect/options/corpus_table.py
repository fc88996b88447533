"""``nebisect corpus add``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.arrays import INPUTS_LIMIT_HELP
from nebisect.options.table import CORPUS_ROOT, FUNCTION, MEMORY, TIMEOUT, Command, Option

ADD_ROOT = CORPUS_ROOT.but(help="Corpus directory (created if missing).")
ADD_SOURCE = Option(
    "source", (), str, Any, ...,
    "An .mlpackage, a saved torch program (.pt2, TorchScript .pt) or a torch "
    "source file.py:factory.", api=False)
ADD_TARGET = Option("target", ("--target", "-t"), str, Any, ..., "Target spec the case runs on.")
ADD_INPUTS = Option(
    "inputs", ("--inputs",), list[Path], Any, ...,
    f"An .npz of named inputs; repeat to add one case per file. {INPUTS_LIMIT_HELP}")
ADD_STAGE = Option("stage", ("--stage",), str, Any, "predict", "convert | load | predict.")
EXPECT = Option(
    "expect", ("--expect",), str, Any, "",
    "failing | fixed | pass. Omitted: run the case in isolation and record its verdict.")
SIGNATURE = Option("signature", ("--signature",), str, Any, "",
                   "Signature of a failing case.")
EXPECT_CHIP = Option(
    "expect_chip", ("--expect-chip",), list[str], Any, None,
    "With --expect: another expected status on one chip family, e.g. m4=fixed "
    "(repeat; judged by `replay --devices`).", metavar="FAMILY=STATUS")
NAME = Option("name", ("--name",), str, Any, "", "A human name (unique names help `show`).")
DESCRIPTION = Option("description", ("--description",), str, Any, "",
                     "What the case guards.")
ADD_FIXES = Option("fixes", ("--fix",), list[str], Any, None,
                   "Fix that claims to cure it (repeat).")
OP_OF_INTEREST = Option("op_of_interest", ("--op-of-interest",), str, Any, "",
                        "Op type that must run on the target's accelerator.")

ADD = Command("corpus add", (
    ADD_ROOT, ADD_SOURCE, ADD_TARGET, ADD_INPUTS, ADD_STAGE, EXPECT, SIGNATURE, EXPECT_CHIP, NAME,
    DESCRIPTION, ADD_FIXES, OP_OF_INTEREST, TIMEOUT, MEMORY, FUNCTION))
