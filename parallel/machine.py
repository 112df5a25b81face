"""Machine descriptions: what the planner needs to know of the hardware, in a TOML file.

A description gives the ranks per node and the nodes, the memory of one rank, the rates of the step-time model
(:class:`~elecsolver.parallel.planner.TimeCoefficients`), the activation coefficients of the memory model
(:class:`~elecsolver.parallel.planner.MemoryCoefficients`) and two links, each ``alpha_s + beta_s_per_byte x bytes``
a message (Hockney, Parallel Computing 20, 1994): one inside a node and one between nodes. A link may add
``wait_s`` to each collective a rank blocks on right after computing (dp's and tp's all-reduces): the time to
wake a rank that went to sleep in the wait, which a barrier-synchronised latency measurement does not see (on the
reference CPU host it is a few milliseconds, about one scheduler tick; a GPU's NCCL spins, so the shipped GPU
descriptions leave it 0). A collective whose group
spans more than one node is priced at the link between nodes (its slowest hop; a ring all-reduce moves every byte
over it).

Ranks are placed on nodes in order, ``ranks_per_node`` to a node, and laid out as the device mesh lays them out
(:mod:`elecsolver.parallel.mesh`: tensor parallel innermost, then data parallel, then pipeline stages), so a
tensor-parallel group of at most ``ranks_per_node`` ranks stays inside a node.

``elecsolver plan --calibrate`` measures this machine and writes its description. The package ships three, in
``elecsolver/parallel/machines`` (:func:`shipped` lists them): ``cpu-2core``, measured on the package's 2-core
reference host, and two that are not measured (``measured = false``), built from published figures:
``h100-8x-nvlink`` and ``h100-64x-infiniband``.

File format::

    name = "8x H100 SXM 80GB, NVLink 4 through NVSwitch, one node"
    measured = false                       # true: written by elecsolver plan --calibrate
    source = "where each number comes from"
    ranks_per_node = 8
    nodes = 1
    cores_per_node = 8                     # optional: fewer than ranks_per_node is an oversubscribed host
    memory_per_rank = "80GB"               # a size: B, KiB, MiB, GiB, KB, MB, GB ...

    [compute]                              # planner.TimeCoefficients
    s_per_mac = 3.0e-13
    s_per_point = 0.0                      # optional (default 0)
    global_s = 5.0e-3
    microbatch_s = 1.0e-3
    recompute_factor = 1.33

    [activations]                          # planner.MemoryCoefficients: float32 bytes per point-channel
    plain = 4.5                            # held by a work item's forward, per width unit
    backward_peak = 6.97                   # a work item's backward, per unit of the widest layer
    recompute_peak = 11.0                  # the same under recompute

    [intra_node]
    alpha_s = 1.0e-5
    beta_s_per_byte = 2.2e-12
    wait_s = 0.0                           # optional (default 0)

    [inter_node]                           # may be left out when nodes = 1
    alpha_s = 2.0e-5
    beta_s_per_byte = 2.0e-11
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from elecsolver.config import ConfigError, did_you_mean

from .planner import MemoryCoefficients, TimeCoefficients

__all__ = ["Link", "Machine", "MachineError", "load_machine", "parse_size_mib", "shipped"]

MACHINES_DIR = Path(__file__).parent / "machines"

_SIZE_UNITS = {"": 2**-20, "b": 2**-20, "k": 2**-10, "kib": 2**-10, "m": 1, "mib": 1, "g": 2**10, "gib": 2**10,
               "t": 2**20, "tib": 2**20, "kb": 1e3 / 2**20, "mb": 1e6 / 2**20, "gb": 1e9 / 2**20, "tb": 1e12 / 2**20}


class MachineError(ConfigError):
    """A machine description that cannot be read, or lacks an entry or has one of the wrong kind (the message
    names the file and the key)."""


def parse_size_mib(text: str, what: str = "a size") -> float:
    """A size such as ``4GiB``, ``512MiB`` or ``80GB`` in MiB (binary units KiB/MiB/GiB/TiB, decimal KB/MB/GB/TB,
    a bare number in bytes).

    Raises
    ------
    ValueError
        For anything else, naming ``what``.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text if isinstance(text, str) else "")
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"{what} must be a positive size such as 4GiB, 512MiB or 80GB, got {text!r}")
    return float(m.group(1)) * _SIZE_UNITS[unit]


@dataclass(frozen=True)
class Link:
    """One message of b bytes costs ``alpha_s + beta_s_per_byte b`` seconds (Hockney's model); a collective a rank
    blocks on after computing costs ``wait_s`` more (the module's docstring)."""

    alpha_s: float
    beta_s_per_byte: float
    wait_s: float = 0.0

    def seconds(self, nbytes: float, messages: int = 1, waits: int = 0) -> float:
        """Seconds for ``messages`` messages carrying ``nbytes`` bytes in all (alpha each, beta a byte), ``waits`` of
        which a rank blocks on after computing (``wait_s`` each)."""
        return messages * self.alpha_s + waits * self.wait_s + self.beta_s_per_byte * nbytes


@dataclass(frozen=True)
class Machine:
    """A machine the planner plans for.

    Attributes
    ----------
    name : str
    measured : bool
        True for a description written by ``elecsolver plan --calibrate`` on the machine itself; False for one built
        from published figures (its ``source`` says which).
    source : str
    ranks_per_node, nodes : int
    memory_per_rank_mib : float
        Memory of one rank (MiB): GPU memory, or the host's memory shared by the ranks of a node.
    compute : TimeCoefficients
        The time model's rates; its ``alpha_s`` and ``beta_s_per_byte`` are the link inside a node.
    activations : MemoryCoefficients
    intra_node, inter_node : Link
    cores_per_node : int or None
        The cores (devices) a node's ranks share; None: one each. Fewer than ``ranks_per_node`` is an
        oversubscribed host, whose rates were measured with every rank busy (:attr:`oversubscription`).
    """

    name: str
    measured: bool
    source: str
    ranks_per_node: int
    nodes: int
    memory_per_rank_mib: float
    compute: TimeCoefficients
    activations: MemoryCoefficients
    intra_node: Link
    inter_node: Link
    cores_per_node: int | None = None

    @property
    def oversubscription(self) -> float:
        """Ranks per core of a node, at least 1: how much slower each measured time is than a rank's with a core to
        itself (:func:`~elecsolver.parallel.planner.predict_step_s`)."""
        return max(1.0, self.ranks_per_node / self.cores_per_node) if self.cores_per_node else 1.0

    @property
    def world(self) -> int:
        """Ranks of the whole machine."""
        return self.ranks_per_node * self.nodes

    def node_of(self, rank: int) -> int:
        """The node (0-based) that global ``rank`` sits on: ranks fill nodes in order, ``ranks_per_node`` each."""
        return rank // self.ranks_per_node

    def link(self, ranks) -> Link:
        """The link a collective over ``ranks`` is priced at: inside a node when they all share one."""
        return self.intra_node if len({self.node_of(r) for r in ranks}) <= 1 else self.inter_node

    def groups(self, dp: int, tp: int, pp: int) -> dict[str, list[list[int]]]:
        """Every group of each mesh axis, as the device mesh numbers ranks: rank = (pp_i dp + dp_i) tp + tp_i."""
        def rank(k, d, t):
            return (k * dp + d) * tp + t

        return {"tp": [[rank(k, d, t) for t in range(tp)] for k in range(pp) for d in range(dp)],
                "dp": [[rank(k, d, t) for d in range(dp)] for k in range(pp) for t in range(tp)],
                "pp": [[rank(k, d, t) for k in range(pp)] for d in range(dp) for t in range(tp)]}

    def axis_links(self, dp: int, tp: int, pp: int) -> dict[str, Link]:
        """The link of each mesh axis: between nodes if any of its groups spans two nodes, else inside a node."""
        return {axis: self.inter_node if any(len({self.node_of(r) for r in g}) > 1 for g in groups)
                else self.intra_node for axis, groups in self.groups(dp, tp, pp).items()}

    def to_toml(self) -> str:
        """The description as the TOML this module reads."""
        import tomli_w

        c = self.compute
        data = {"name": self.name, "measured": self.measured, "source": self.source,
                "ranks_per_node": self.ranks_per_node, "nodes": self.nodes,
                **({"cores_per_node": self.cores_per_node} if self.cores_per_node else {}),
                "memory_per_rank": f"{self.memory_per_rank_mib:.6g}MiB",
                "compute": {"s_per_mac": c.s_per_mac, "s_per_point": c.s_per_point, "global_s": c.global_s,
                            "microbatch_s": c.microbatch_s, "recompute_factor": c.recompute_factor},
                "activations": {"plain": self.activations.plain, "backward_peak": self.activations.backward_peak,
                                "recompute_peak": self.activations.recompute_peak},
                "intra_node": {"alpha_s": self.intra_node.alpha_s,
                               "beta_s_per_byte": self.intra_node.beta_s_per_byte, "wait_s": self.intra_node.wait_s}}
        if self.nodes > 1 or self.inter_node != self.intra_node:
            data["inter_node"] = {"alpha_s": self.inter_node.alpha_s,
                                  "beta_s_per_byte": self.inter_node.beta_s_per_byte,
                                  "wait_s": self.inter_node.wait_s}
        return "# elecsolver machine description (docs/parallel.md, \"Machine descriptions\")\n\n" + tomli_w.dumps(data)


_KEYS = {"": {"name", "measured", "source", "ranks_per_node", "nodes", "cores_per_node", "memory_per_rank", "compute",
               "activations", "intra_node", "inter_node"},
         "compute": {"s_per_mac", "s_per_point", "global_s", "microbatch_s", "recompute_factor"},
         "activations": {"plain", "backward_peak", "recompute_peak"},
         "intra_node": {"alpha_s", "beta_s_per_byte", "wait_s"},
         "inter_node": {"alpha_s", "beta_s_per_byte", "wait_s"}}


def _check_keys(data: dict, where: str) -> None:
    """Refuse a key the format does not have (a typo would otherwise be read as a missing entry)."""
    act = data.get("activations")
    if isinstance(act, dict) and {"recompute", "backward"} & set(act):
        old = sorted({"recompute", "backward"} & set(act))
        raise MachineError(f"{where}: [activations] {', '.join(old)} belong to an earlier memory model (per width "
                           "unit); this one needs backward_peak and recompute_peak (per unit of the widest layer): "
                           "measure them again with elecsolver plan --calibrate (docs/parallel.md, \"Machine "
                           "descriptions\")")
    for section, known in _KEYS.items():
        node = data if not section else data.get(section)
        if not isinstance(node, dict):
            continue
        unknown = sorted(set(node) - known)
        if unknown:
            place = f"[{section}]" if section else "the top level"
            hint = did_you_mean(unknown[0], known)
            raise MachineError(f"{where}: unknown key(s) {unknown} in {place}{hint}; it has {sorted(known)}")


def _number(data: dict, key: str, where: str, positive: bool = True) -> float:
    name = key.rsplit(".", 1)[-1]
    if name not in data:
        raise MachineError(f"{where}: needs {key} (a {'positive' if positive else 'non-negative'} number)")
    v = data[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or \
            (positive and v == 0):
        raise MachineError(f"{where}: {key} must be a {'positive' if positive else 'non-negative'} number, "
                           f"got {v!r}")
    return float(v)


def _section(data: dict, name: str, where: str, required: bool = True) -> dict | None:
    v = data.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, dict):
        raise MachineError(f"{where}: needs a [{name}] section")
    return v


def load_machine(path) -> Machine:
    """Read a machine description: a path, or the stem of a shipped one (:func:`shipped`, e.g.
    ``"h100-8x-nvlink"``).

    Raises
    ------
    MachineError
        If the file is missing or unreadable, or an entry is missing or of the wrong kind; the message names the file
        and the key.
    """
    from elecsolver.config import read_toml

    p = Path(path)
    if not p.exists() and (MACHINES_DIR / f"{path}.toml").exists():
        p = MACHINES_DIR / f"{path}.toml"
    if not p.exists():
        names = ", ".join(shipped())
        raise MachineError(f"--machine {path}: no such file; give a machine description (TOML, docs/parallel.md) "
                           f"or a shipped one: {names}")
    try:
        data, _ = read_toml(p)
    except ConfigError as exc:
        raise MachineError(str(exc).replace("--config", "--machine", 1)) from None
    where = str(p)
    _check_keys(data, where)
    for key in ("ranks_per_node", "nodes", "cores_per_node"):
        if key not in data:
            if key == "cores_per_node":
                continue
            raise MachineError(f"{where}: needs {key} (a positive integer)")
        v = data.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise MachineError(f"{where}: {key} must be a positive integer, got {v!r}")
    if "memory_per_rank" not in data:
        raise MachineError(f"{where}: needs memory_per_rank (a size such as \"80GB\" or \"12GiB\")")
    try:
        memory = parse_size_mib(data.get("memory_per_rank"), "memory_per_rank")
    except ValueError as exc:
        raise MachineError(f"{where}: {exc}") from None
    if not isinstance(data.get("measured"), bool):
        raise MachineError(f"{where}: measured must be true (written by elecsolver plan --calibrate) or false "
                           f"(from published figures), got {data.get('measured')!r}")
    comp = _section(data, "compute", where)
    act = _section(data, "activations", where)
    intra = _section(data, "intra_node", where)
    inter = _section(data, "inter_node", where, required=data["nodes"] > 1) or intra
    links = [Link(_number(s, f"{n}.alpha_s", where, positive=False), _number(s, f"{n}.beta_s_per_byte", where),
                  _number(s, f"{n}.wait_s", where, positive=False) if "wait_s" in s else 0.0)
             for n, s in (("intra_node", intra), ("inter_node", inter))]
    compute = TimeCoefficients(
        s_per_mac=_number(comp, "compute.s_per_mac", where), global_s=_number(comp, "compute.global_s", where, False),
        microbatch_s=_number(comp, "compute.microbatch_s", where, False),
        recompute_factor=_number(comp, "compute.recompute_factor", where), alpha_s=links[0].alpha_s,
        beta_s_per_byte=links[0].beta_s_per_byte, wait_s=links[0].wait_s, measured_on=str(data.get("name", p.stem)),
        s_per_point=_number(comp, "compute.s_per_point", where, False) if "s_per_point" in comp else 0.0)
    activations = MemoryCoefficients(
        _number(act, "activations.plain", where), _number(act, "activations.backward_peak", where, False),
        _number(act, "activations.recompute_peak", where, False), str(data.get("name", p.stem)))
    return Machine(name=str(data.get("name", p.stem)), measured=data["measured"], source=str(data.get("source", "")),
                   ranks_per_node=data["ranks_per_node"], nodes=data["nodes"], memory_per_rank_mib=memory,
                   compute=compute, activations=activations, intra_node=links[0], inter_node=links[1],
                   cores_per_node=data.get("cores_per_node"))


def shipped() -> list[str]:
    """The stems of the shipped descriptions (``load_machine`` takes them as names)."""
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))
