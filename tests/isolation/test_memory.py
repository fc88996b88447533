"""The memory limit of every isolated job: ``--memory`` sizes, the machine default, the
limit an isolator gives a job that names none, and ``oom`` verdicts that name it."""

from __future__ import annotations

import os
import resource
import sys

import pytest

from nebisect.bounds import format_size
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Job
from nebisect.isolation import memory
from nebisect.options.parsers import parse_memory

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="RLIMIT_DATA bounds mmap on Linux only")
MIB = 1 << 20
ALLOCATE = "support.fault_jobs:allocate"


@pytest.mark.parametrize(("text", "size"), [
    ("4G", 4 << 30), ("512M", 512 * MIB), ("512m", 512 * MIB), ("1.5G", 3 << 29),
    ("4GiB", 4 << 30), ("4GB", 4 << 30), ("2T", 2 << 40), ("65536K", 64 * MIB),
])
def test_memory_sizes_are_binary_units(text: str, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize(("text", "message"), [
    ("lots", "--memory 'lots': give a size such as 4G or 512M"),
    ("4096", "--memory '4096': give a size such as 4G or 512M"),
    ("-1G", "--memory '-1G': give a size such as 4G or 512M"),
    ("1K", "--memory 1K: give a size from 64M to 1024T"),
    ("63M", "--memory 63M: give a size from 64M to 1024T"),
    ("2000T", "--memory 2000T: give a size from 64M to 1024T"),
])
def test_a_bad_memory_size_is_one_line(text: str, message: str) -> None:
    with pytest.raises(NebisectError) as raised:
        parse_memory(text)
    assert str(raised.value) == message


def test_the_default_is_half_the_machine() -> None:
    machine = memory.machine_memory()
    assert 0 < machine <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory.default_limit() == machine // 2
    assert parse_memory(None) is None
    assert memory.budget() == machine // 2
    assert memory.limit_mb(None) == machine // 2 // MIB
    assert memory.limit_mb(512 * MIB) == 512
    assert format_size(512 * MIB) == "512M"
    assert format_size(int(11.8 * (1 << 30))) == "11.8G"


def test_an_isolator_gives_every_job_its_own_limit() -> None:
    with Isolator(memory=256 * MIB) as isolator:
        seen = isolator.run(Job("support.fault_jobs:memory_budget", {})).verdict
        own = isolator.run(Job("support.fault_jobs:memory_budget", {}, memory_mb=128)).verdict
    assert seen.status == "pass", seen.message
    assert seen.job_result["budget"] == 256 * MIB
    assert own.job_result["budget"] == 128 * MIB
    assert seen.job_result["soft"] != resource.RLIM_INFINITY


@LINUX
def test_a_job_past_its_limit_is_oom_naming_the_limit() -> None:
    """The default limit of this machine lets 300 MiB through; 128M does not."""
    with Isolator() as isolator, Isolator(memory=128 * MIB) as limited:
        fits = isolator.run(Job(ALLOCATE, {"mb": 300})).verdict
        refused = limited.run(Job(ALLOCATE, {"mb": 300})).verdict
    assert fits.status == "pass", fits.message
    assert (refused.status, refused.signature) == ("oom", "oom")
    assert refused.message.startswith("MemoryError: Unable to allocate 300. MiB")
    assert refused.message.endswith("(memory limit 128M, --memory)")
    assert refused.process.memory_limit == "128M"


@LINUX
@pytest.mark.parametrize("mode", ["fork", "spawn", "persistent"])
def test_the_limit_is_on_top_of_what_the_process_holds(mode: str) -> None:
    """A fork child inherits its template's memory, a spawned one imports its own: the
    same 200 MiB fit under 256M in every mode, 300 MiB in none."""
    with Isolator(mode) as isolator:
        verdicts = [isolator.run(Job(ALLOCATE, {"mb": mb}, memory_mb=256)).verdict
                    for mb in (200, 300)]
    assert [v.status for v in verdicts] == ["pass", "oom"], [v.message for v in verdicts]
