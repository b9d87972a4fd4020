"""Which way a metric improves: from a declared goal, else from its name; None where neither says.

A direction belongs to measures of quality. A loss, an error or a perplexity improves downwards, an
accuracy, an F1 or a reward upwards; a learning rate, an epoch counter or GPU memory has no better
side, and nothing about them is "best". The name is read word by word (`val/acc`, `train_loss`,
`eval-f1`), so `heatmap` is no mAP and `lr` no loss.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from corral.errors import InvalidRequest

GOALS = ("min", "max")
_LOWER_PREFIXES = ("loss", "err", "perplexity", "ppl", "mse", "mae", "rmse", "nll", "wer", "cer", "regret")
_HIGHER_PREFIXES = ("acc", "precision", "recall", "reward", "rouge", "bleu", "score")
_HIGHER_WORDS = frozenset({"f1", "auc", "auroc", "auprc", "iou", "miou", "map", "dice", "r2", "mrr", "ndcg", "return",
                           "top1", "top5", "psnr", "ssim", "sharpe", "success", "win"})
_WORD = re.compile(r"[a-z0-9]+")


def metric_goal(key: str, declared: Mapping[str, str] | None = None) -> str | None:
    """"min" (lower is better), "max", or None (no direction): the goal declared for `key`, else its name's."""
    if declared and key in declared:
        return declared[key]
    words = _WORD.findall(key.lower())
    if any(w.startswith(_LOWER_PREFIXES) for w in words):
        return "min"
    if any((w.startswith(_HIGHER_PREFIXES) and not w.startswith("accum")) or w in _HIGHER_WORDS for w in words):
        return "max"
    return None


def parse_goals(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`KEY=min|max` declarations (`corral compare --goal val/score=max`).

    Raises:
        InvalidRequest: one is not of that form.
    """
    goals = {}
    for item in items:
        key, sep, goal = item.rpartition("=")
        if not sep or not key or goal not in GOALS:
            raise InvalidRequest("goal", f"{item!r} is not KEY=min or KEY=max", "e.g. --goal val/score=max")
        goals[key] = goal
    return goals
