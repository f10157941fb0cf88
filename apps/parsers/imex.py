"""nvidia-imex-ctl -N: an IMEX domain's status (the nodes with their state, the From/To connection matrix and the
domain's state), in the formatted form driver 570's IMEX package prints."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, shorten, split_lines
from .errors import ParseError

NODE_LINE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+([A-Z_]+)\s*(?:-\s+Version:\s+(\S+))?\s*$")
MATRIX_HEADER = re.compile(r"^\s*Nodes From\\To((?:\s+\d+)+)\s*$")
MATRIX_ROW = re.compile(r"^\s*(\d+)\s+(\S.*?)\s*$")
DOMAIN_STATE = re.compile(r"^Domain State:\s+(\S+)\s*$")


@dataclass
class ImexNode(Result):
    number: int
    address: str
    state: str  # READY when its daemon is up and connected
    version: str | None


@dataclass
class ImexStatus(Result):
    nodes: list[ImexNode]
    domain_state: str  # UP when every node is ready and connected
    # connections[from][to]: C connected, D disconnected, N never connected, I unreachable, R recovering, ...
    connections: dict[int, dict[int, str]] = field(default_factory=dict)

    @property
    def unready(self) -> list[ImexNode]:
        return [node for node in self.nodes if node.state != "READY"]


def parse_imex_status(text: str) -> ImexStatus:
    """The output of `nvidia-imex-ctl -N`; ParseError when it lacks the node list or the domain's state."""
    nodes: list[ImexNode] = []
    connections: dict[int, dict[int, str]] = {}
    columns: list[int] | None = None
    state = None
    for number, line in enumerate(split_lines(text), start=1):
        if match := NODE_LINE.match(line):
            nodes.append(ImexNode(int(match[1]), match[2], match[3], match[4]))
        elif match := MATRIX_HEADER.match(line):
            columns = [int(value) for value in match[1].split()]
        elif match := DOMAIN_STATE.match(line):
            state = match[1]
        elif columns is not None and state is None and (match := MATRIX_ROW.match(line)):
            cells = match[2].split()
            if len(cells) != len(columns):
                raise ParseError(f"expected {len(columns)} connection cells, got {shorten(line)}", number)
            connections[int(match[1])] = dict(zip(columns, cells, strict=True))
        elif line.startswith("Node #"):
            raise ParseError(f"expected 'Node #N - <address> - <state>', got {shorten(line)}", number)
    if not nodes:
        raise ParseError("no 'Node #N' lines: not the output of nvidia-imex-ctl -N")
    if state is None:
        raise ParseError("no 'Domain State:' line: the output is cut short")
    return ImexStatus(nodes=nodes, domain_state=state, connections=connections)
