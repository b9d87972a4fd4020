"""How a node's GPUs are linked, and which of them a job gets: close ones for a multi-GPU job, packed ones
for a single-GPU job, and only linked ones for `--constraint=nvlink`.

Two GPUs are as close as the first level at which they share a group, in `nvidia-smi topo -m`'s words
(`LEVELS`): NV (linked by NVLink), PIX (at most one PCIe switch between them), PXB (several switches),
PHB (the same host bridge), NODE (the same NUMA node); SYS beyond. The groups come from NVML
(`corral.executor.gpu_topology`) or, for declared GPUs, from the admin (`[node] nvlink = ["0-3", "4-7"]`).
They nest: a group at one level lies within one group at each level above, so "the smallest level at
which `need` free GPUs share a group" is the best worst-pair distance a set of `need` GPUs can have.

A node may also give some of its GPUs features (`[node] gpu_features = {fast = "0-3"}`): a `--constraint`
naming one then restricts the job's GPUs to those having it, as `nvlink` restricts them to one NVLink
group where the node knows its NVLink links (elsewhere `nvlink` stays a node feature, as in Slurm).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from corral.core.jobspec.arrays import format_ranges
from corral.core.jobspec.features import FEATURE_PATTERN
from corral.errors import InvalidRequest

LEVELS = ("NV", "PIX", "PXB", "PHB", "NODE")
"""The levels at which GPUs share a group, closest first; two GPUs sharing none are SYS apart."""
SYS = "SYS"
NVLINK = "nvlink"
"""The constraint that asks for GPUs all linked to each other by NVLink."""

Option = tuple["frozenset[int] | None", bool]
"""One way a constraint can be met by GPUs: the GPUs allowed (None: any), and whether they must share an
NVLink group."""
ANY_GPUS: tuple[Option, ...] = ((None, False),)


@dataclass(frozen=True, slots=True)
class Topology:
    """A node's GPU links and GPU features (pure data, hashable)."""

    levels: tuple[tuple[int, ...], ...] = ()
    """For each of `LEVELS`, each GPU's group there (by GPU index; -1: no such GPU); a group is named by
    its lowest GPU index. Empty: the links are unknown."""
    gpu_features: tuple[tuple[str, frozenset[int]], ...] = ()
    """Features some GPUs have (`[node] gpu_features`), and which."""
    nvlinked: frozenset[int] = frozenset()
    """The GPUs linked by NVLink to at least one other."""

    @property
    def names(self) -> frozenset[str]:
        """The constraint names its GPUs answer: its GPU features, and `nvlink` where some GPUs are linked."""
        names = {name for name, _ in self.gpu_features}
        if self.nvlinked:
            names.add(NVLINK)
        return frozenset(names)

    def level(self, a: int, b: int) -> str:
        """How close two GPUs are: one of `LEVELS`, or SYS."""
        for name, groups in zip(LEVELS, self.levels):
            if a < len(groups) and b < len(groups) and groups[a] == groups[b] != -1:
                return name
        return SYS

    def nvlink_group(self, gpu: int) -> tuple[int, ...]:
        """The GPUs sharing its NVLink group, itself among them; () where it has no NVLink."""
        if gpu not in self.nvlinked:
            return ()
        groups = self.levels[0]
        return tuple(i for i, g in enumerate(groups) if g == groups[gpu])

    def matrix(self, gpus: Sequence[int]) -> list[list[str]]:
        """`nvidia-smi topo -m`'s matrix over these GPUs: X on the diagonal, else how close each pair is;
        [] where the links are unknown."""
        if not self.levels:
            return []
        return [["X" if a == b else self.level(a, b) for b in gpus] for a in gpus]

    def features_of(self, gpu: int) -> list[str]:
        """The GPU features it has, `nvlink` first where it is linked."""
        return ([NVLINK] if gpu in self.nvlinked else []) + [name for name, gpus in self.gpu_features if gpu in gpus]

    def plan(self, constraint: str | None, node_features: Collection[str]) -> tuple[Option, ...]:
        """The ways GPUs of this node can meet a --constraint (`corral.core.jobspec.features`): `ANY_GPUS` where a
        term holds by node features alone; () where no term can hold here. Names compare without case."""
        if constraint is None:
            return ANY_GPUS
        features = {name.lower(): gpus for name, gpus in self.gpu_features}
        node_features = {name.lower() for name in node_features}
        options: list[Option] = []
        for term in constraint.lower().split("|"):
            allowed: frozenset[int] | None = None
            linked = False
            for name in term.split("&"):
                if name == NVLINK and self.nvlinked:
                    linked = True
                    gpus = self.nvlinked
                elif name in features:
                    gpus = features[name]
                elif name in node_features:
                    continue
                else:
                    break
                allowed = gpus if allowed is None else allowed & gpus
            else:
                if allowed is None:
                    return ANY_GPUS
                options.append((allowed, linked))
        return tuple(options)


def choose_gpus(topology: Topology | None, options: Sequence[Option], candidates: Sequence[int],
                need: int) -> tuple[int, ...] | None:
    """The `need` GPUs a job gets among the free `candidates` (in the node's order); None: no set qualifies.

    A multi-GPU job gets the set whose farthest pair is closest (one NVLink group, else one PCIe switch, ...),
    from the group with the fewest free GPUs that holds it (best fit: bigger blocks stay whole), ties to the
    lowest indexes. A single-GPU job gets the GPU in the fullest group, level by level (packing), ties to
    the lowest index. Without links known: the lowest indexes, as ever.
    """
    for allowed, linked in options:
        pool = candidates if allowed is None else [i for i in candidates if i in allowed]
        if len(pool) < need:
            continue
        chosen = _closest(topology.levels if topology is not None else (), pool, need, linked)
        if chosen is not None:
            return chosen
    return None


def _closest(levels: Sequence[Sequence[int]], pool: Sequence[int], need: int, linked: bool) -> tuple[int, ...] | None:
    if not levels or need == 0:
        return None if linked and need > 1 else tuple(pool[:need])
    size = len(levels[0])
    if any(i >= size or levels[0][i] < 0 for i in pool):  # a GPU the links do not know: a group of its own
        top = max(max(pool) + 1, size)
        levels = [[groups[i] if i < size and groups[i] >= 0 else -1 - i for i in range(top)] for groups in levels]
    if need == 1:
        counts = []
        for groups in levels:
            count: dict[int, int] = {}
            for i in pool:
                count[groups[i]] = count.get(groups[i], 0) + 1
            counts.append(count)
        return (min(pool, key=lambda i: [count[groups[i]] for count, groups in zip(counts, levels)]),)
    for groups in levels[:1] if linked else levels:
        members: dict[int, list[int]] = {}
        for i in pool:
            members.setdefault(groups[i], []).append(i)
        best: list[int] | None = None
        for group in members.values():
            if len(group) >= need and (best is None or len(group) < len(best)):
                best = group
        if best is not None:
            return tuple(best[:need])
    return None if linked else tuple(pool[:need])


def most_together(topology: Topology | None, options: Sequence[Option], candidates: Sequence[int]) -> int:
    """The most of `candidates` one job could get under `options` (for an error saying why it never runs)."""
    most = 0
    for allowed, linked in options:
        pool = [i for i in candidates if allowed is None or i in allowed]
        if linked and topology is not None and topology.levels:
            groups = topology.levels[0]
            sizes: dict[int, int] = {}
            for i in pool:
                sizes[groups[i]] = sizes.get(groups[i], 0) + 1
            most = max(most, max(sizes.values(), default=0))
        else:
            most = max(most, len(pool))
    return most


def build_topology(gpus: Iterable[int], *, nvlink: Iterable[tuple[int, int]] = (),
                   pcie: Mapping[tuple[int, int], str] | None = None,
                   gpu_features: Mapping[str, Iterable[int]] | None = None) -> Topology | None:
    """A node's topology from its links.

    Args:
        gpus: its GPU indexes.
        nvlink: pairs linked by NVLink. NVLink groups are cliques (every two of a group linked), taken
            greedily in index order where the links form no clean groups.
        pcie: how close pairs are over PCIe (one of `LEVELS[1:]` or SYS; a pair left out: SYS).
        gpu_features: feature name -> the GPUs having it.

    Returns:
        None where nothing is known (no links, no features): the node chooses GPUs as ever.
    """
    order = sorted(set(gpus))
    linked = {(a, b) for a, b in nvlink if a != b} | {(b, a) for a, b in nvlink if a != b}
    pcie = pcie or {}
    features = tuple(sorted((name, frozenset(ids)) for name, ids in (gpu_features or {}).items()))
    if not order or (not linked and not pcie):
        return Topology(gpu_features=features) if features else None
    size = order[-1] + 1
    parent = {i: i for i in order}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cliques: list[list[int]] = []
    placed: set[int] = set()
    for i in order:  # NVLink groups: cliques, greedily in index order
        if i in placed:
            continue
        clique = [i]
        for j in order:
            if j > i and j not in placed and all((j, k) in linked for k in clique):
                clique.append(j)
        placed.update(clique)
        cliques.append(clique)
    for clique in cliques:
        for j in clique[1:]:
            parent[root(j)] = root(clique[0])
    levels = []
    for depth, name in enumerate(LEVELS):
        if depth:
            for (a, b), level in pcie.items():
                if level in LEVELS[1:depth + 1] and a in parent and b in parent:
                    ra, rb = root(a), root(b)
                    if ra != rb:
                        parent[max(ra, rb)] = min(ra, rb)
        groups = [-1] * size
        lowest: dict[int, int] = {}
        for i in order:
            lowest.setdefault(root(i), i)
        for i in order:
            groups[i] = lowest[root(i)]
        levels.append(tuple(groups))
    nvlinked = frozenset(i for clique in cliques if len(clique) > 1 for i in clique)
    return Topology(levels=tuple(levels), gpu_features=features, nvlinked=nvlinked)


def parse_gpu_list(text: object, field: str, gpus: Collection[int]) -> tuple[int, ...]:
    """`0-3,6` -> (0, 1, 2, 3, 6): GPU indexes of this node.

    Raises:
        InvalidRequest: naming `field`, for text that is no such list or names a GPU the node lacks.
    """
    hint = 'GPU indexes and ranges, e.g. "0-3" or "0,2,4-5"'
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest(field, f"must be a list of GPU indexes, got {text!r}", hint)
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            raise InvalidRequest(field, f"cannot read {part!r} in {text!r}", hint)
        out += range(int(low), int(high if dash else low) + 1)
    unknown = sorted(set(out) - set(gpus))
    if unknown:
        raise InvalidRequest(field, f"names GPU {unknown[0]}, which this node does not have",
                             f"its GPUs: {format_ranges(sorted(gpus)) or 'none'}")
    return tuple(sorted(set(out)))


def topology_settings(node: Mapping[str, object], path: str) -> dict[str, object]:
    """`[node] nvlink` and `[node] gpu_features` of config.toml, checked as written and made tuples (the GPUs
    they name are checked against the node's when it is built).

    Raises:
        InvalidRequest: naming the setting, with an example.
    """

    out: dict[str, object] = {}
    if "nvlink" in node:
        groups = node["nvlink"]
        if not isinstance(groups, list) or not all(isinstance(g, str) and g.strip() for g in groups):
            raise InvalidRequest("node.nvlink", f"must be a list of GPU groups in {path}",
                                 'e.g. nvlink = ["0-3", "4-7"]: each group\'s GPUs all linked to each other')
        out["nvlink"] = tuple(groups)
    if "gpu_features" in node:
        features = node["gpu_features"]
        if not isinstance(features, Mapping) or not all(
                isinstance(name, str) and FEATURE_PATTERN.match(name) and isinstance(gpus, str)
                for name, gpus in features.items()):
            raise InvalidRequest("node.gpu_features", f"must map feature names to GPU lists in {path}",
                                 'e.g. gpu_features = {fast = "0-3", bigmem = "4-7"}')
        out["gpu_features"] = tuple(sorted(features.items()))
    return out
