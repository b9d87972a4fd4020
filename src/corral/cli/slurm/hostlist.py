"""Slurm's host lists, both ways: `node[1-3,5],gpu0[8-10]` as names (`scontrol show hostnames`) and names as
one list (sinfo's NODELIST, a partition's Nodes=, squeue's %N).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list `node[1-3,5],gpu0[8-10]` as names, in order (`scontrol show hostnames`).

    Zero padding follows the range's first bound, as Slurm's: `gpu0[8-10]` is gpu08 gpu09 gpu010.
    """
    names: list[str] = []
    for item in _split_top(text):
        open_at = item.find("[")
        if open_at < 0:
            if item:
                names.append(item)
            continue
        close_at = item.find("]", open_at)
        if close_at < 0:
            names.append(item)
            continue
        prefix, ranges, rest = item[:open_at], item[open_at + 1:close_at], item[close_at + 1:]
        tails = expand_hostlist(rest) if "[" in rest else [rest]
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not high:
                heads = [prefix + low]
            elif low.isdigit() and high.isdigit():
                width = len(low) if low.startswith("0") else 0
                heads = [f"{prefix}{n:0{width}d}" for n in range(int(low), int(high) + 1)]
            else:
                heads = [prefix + part]
            names.extend(head + tail for head in heads for tail in tails)
    return names


def compress_hostlist(names: Iterable[str]) -> str:
    """Names as Slurm's ranged host list (sinfo's NODELIST, a partition's Nodes=): `node[1-3,5],vm`."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in sorted(set(names), key=_natural_key):
        cut = len(name)
        while cut and name[cut - 1].isdigit():
            cut -= 1
        if cut == len(name):
            plain.append(name)
            order.append(name)
            continue
        digits = name[cut:]
        key = (name[:cut], len(digits) if digits.startswith("0") and len(digits) > 1 else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    # a number without padding joins a padded range of its own width (gpu08, gpu10: gpu[08-10])
    for prefix, width in [key for key in groups if key[1]]:
        plain_numbers = groups.get((prefix, 0), [])
        joining = [n for n in plain_numbers if len(str(n)) == width]
        if joining:
            groups[(prefix, width)].extend(joining)
            groups[(prefix, 0)] = [n for n in plain_numbers if len(str(n)) != width]
    out = []
    for entry in order:
        if not isinstance(entry, str) and not groups[entry]:
            continue
        if isinstance(entry, str):
            out.append(entry)
            continue
        prefix, width = entry
        numbers = sorted(set(groups[entry]))
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        spans, start, last = [], numbers[0], numbers[0]
        for n in numbers[1:] + [None]:
            if n is not None and n == last + 1:
                last = n
                continue
            spans.append(f"{start:0{width}d}" if start == last else f"{start:0{width}d}-{last:0{width}d}")
            if n is not None:
                start = last = n
        out.append(f"{prefix}[{','.join(spans)}]")
    return ",".join(out)


def hostnames(text: str) -> str:
    """`scontrol show hostnames LIST`: each name on its own line."""
    return "".join(name + "\n" for name in expand_hostlist(text))


def _split_top(text: str) -> list[str]:
    """Split on the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def _natural_key(name: str) -> tuple[str, int, str]:
    cut = len(name)
    while cut and name[cut - 1].isdigit():
        cut -= 1
    return (name[:cut], int(name[cut:]) if cut < len(name) else -1, name)
