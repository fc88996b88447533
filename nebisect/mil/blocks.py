"""Elementwise passes over large float32 arrays, block by block, on the threads allowed.

A kernel that makes many numpy passes over one large array (fp16 rounding, gelu's erf
polynomial) is bound by memory traffic and allocation, not arithmetic: each pass
writes a fresh array the size of the tensor. Run block by block into scratch buffers
reused across blocks, the passes stay in cache and allocate nothing. The blocks are
independent, so contiguous runs of them go to worker threads (numpy releases the GIL
inside its loops); every element is computed by the same operations in the same
order whichever thread takes it, so results do not depend on the thread count.

The thread count is ``OMP_NUM_THREADS`` when set, else one. A run evaluates its
targets in parallel children (``--jobs`` defaults to the cores), so a child that took
every core would oversubscribe them (a default ``run`` of ``examples/logsumexp_ne.py``
took 80 s with a thread per core against 56 s with one, at load 5.5); the process that
starts the jobs gives each its share of the cores, which the child sets there.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

#: elements per block: a block and its few scratch buffers stay in the core's cache
BLOCK = 1 << 16
#: elements below which one thread does the whole array (a thread hop costs more)
PARALLEL_FROM = 1 << 15

#: ``fn(source_block, out_block, scratch)``; ``scratch`` is per-thread, ``BLOCK`` long
BlockFn = Callable[[np.ndarray, np.ndarray, list[np.ndarray]], None]

_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def threads() -> int:
    """How many threads blockwise passes use (see the module docstring)."""
    configured = os.environ.get("OMP_NUM_THREADS", "")
    return int(configured) if configured.isdigit() and int(configured) > 0 else 1


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it starts its own pool."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def _workers(count: int) -> ThreadPoolExecutor:
    """The process's worker pool, at least ``count`` threads large."""
    global _pool, _pool_size
    if _pool is None or _pool_size < count:
        _pool, _pool_size = ThreadPoolExecutor(count, thread_name_prefix="nebisect-blocks"), count
    return _pool


def blockwise(fn: BlockFn, source: np.ndarray, scratch: int) -> np.ndarray:
    """``fn`` applied block by block to the float32 ``source``, into a new array of its
    shape; each thread gets ``scratch`` float32 buffers of one block."""
    shape = np.shape(source)  # ascontiguousarray turns a rank-0 value into rank 1
    flat = np.ascontiguousarray(source, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    size = flat.size
    count = min(threads(), size // PARALLEL_FROM) if size >= PARALLEL_FROM else 1
    if count <= 1:
        _run(fn, flat, out, scratch, {})
        return out.reshape(shape)
    bounds = [size * part // count // 16 * 16 for part in range(count)] + [size]
    pool = _workers(count - 1)
    errors = dict(np.geterr())  # numpy's error state is per thread: workers take the caller's
    pending = [pool.submit(_run, fn, flat[lo:hi], out[lo:hi], scratch, errors)
               for lo, hi in itertools.pairwise(bounds[1:])]
    _run(fn, flat[: bounds[1]], out[: bounds[1]], scratch, {})
    for future in pending:
        future.result()
    return out.reshape(shape)


def _run(fn: BlockFn, flat: np.ndarray, out: np.ndarray, scratch: int,
         errors: dict[str, Any]) -> None:
    """``fn`` over ``flat``'s blocks under numpy's error state ``errors`` (none: as is)."""
    buffers = [np.empty(min(BLOCK, flat.size), np.float32) for _ in range(scratch)]
    with np.errstate(**errors):
        for start in range(0, flat.size, BLOCK):
            stop = start + BLOCK
            block = flat[start:stop]
            fn(block, out[start:stop], [b[: block.size] for b in buffers])
