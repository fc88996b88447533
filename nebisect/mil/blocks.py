"""Elementwise passes over large float32 arrays, block by block, and large matrix
products, by rows or by batch, on the threads allowed.

A kernel that makes many numpy passes over one large array (fp16 rounding, gelu's erf
polynomial) is bound by memory traffic and allocation, not arithmetic: each pass
writes a fresh array the size of the tensor. Run block by block into scratch buffers
reused across blocks, the passes stay in cache and allocate nothing. The blocks are
independent, so contiguous runs of them go to worker threads (numpy releases the GIL
inside its loops); every element is computed by the same operations in the same
order whichever thread takes it, so results do not depend on the thread count.

A matrix product of at least :data:`PARALLEL_PRODUCT_FROM` multiply-adds is split among
the threads the same way: a single product by its rows (:func:`matmul_rows`), a batch of
products by the batch (:func:`matmul_batches`); each thread calls numpy's ``matmul`` on
its slice, its BLAS on one thread. The BLAS computes each product of at least two rows
by one kernel in one order of the sums whichever rows and thread it is handed, so the
values do not depend on the thread count either — whereas the BLAS's own threads change
them for a product with a single row (a vector–matrix product, summed in parts), which
is why every slice keeps :data:`MIN_ROWS` rows and the BLAS itself stays on one thread.

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
#: multiply-adds below which one thread computes a whole matrix product
PARALLEL_PRODUCT_FROM = 1 << 22
#: rows each thread's slice of a product keeps at least
MIN_ROWS = 16

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


def matmul_rows(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w`` of matrices ``x`` (M×K) and ``w`` (K×N), its rows split among the
    threads allowed (see the module docstring), each slice a view of ``x`` as it is."""
    rows, depth = x.shape
    count = _product_threads(x, w, rows * depth * w.shape[-1], rows // MIN_ROWS)
    if count <= 1:
        return np.asarray(np.matmul(x, w))
    out = np.empty((rows, w.shape[-1]), x.dtype)
    bounds = [rows * part // count for part in range(count)] + [rows]
    _in_parallel([(x[lo:hi], w, out[lo:hi]) for lo, hi in itertools.pairwise(bounds)])
    return out


def matmul_batches(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of two batches of matrices with the same batch shape, the first batch
    axis longer than one split among the threads allowed (the axes before it are of
    length one), each thread's products the very calls numpy makes for them."""
    batch = a.shape[:-2]
    axis = next((i for i, size in enumerate(batch) if size > 1), None)
    if a.ndim != b.ndim or b.shape[:-2] != batch or axis is None:
        return np.asarray(np.matmul(a, b))
    work = int(np.prod(batch)) * a.shape[-2] * a.shape[-1] * b.shape[-1]
    count = _product_threads(a, b, work, batch[axis])
    if count <= 1 or a.shape[-2] < 2:
        return np.asarray(np.matmul(a, b))
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), a.dtype)
    head = (0,) * axis
    size = batch[axis]
    bounds = [size * part // count for part in range(count)] + [size]
    _in_parallel([(a[head][lo:hi], b[head][lo:hi], out[head][lo:hi])
                  for lo, hi in itertools.pairwise(bounds)])
    return out


def _product_threads(a: np.ndarray, b: np.ndarray, work: int, parts: int) -> int:
    """The threads a product of ``work`` multiply-adds splittable into ``parts`` gets."""
    if work < PARALLEL_PRODUCT_FROM or a.dtype != b.dtype or a.dtype.kind != "f":
        return 1
    return max(1, min(threads(), parts))


def _in_parallel(products: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """Each ``(a, b, out)``: ``a @ b`` into ``out``, the first in this thread."""
    pool = _workers(len(products) - 1)
    pending = [pool.submit(np.matmul, a, b, out=out) for a, b, out in products[1:]]
    first_a, first_b, first_out = products[0]
    np.matmul(first_a, first_b, out=first_out)
    for future in pending:
        future.result()
