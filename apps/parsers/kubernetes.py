"""kubectl get pods [-A] -o wide: the pods and the node each one runs on.

kubectl pads every column to its widest cell plus three spaces, and two headers hold a space ("NOMINATED NODE",
"READINESS GATES"), as can a cell ("2 (5m ago)" under RESTARTS): cells are cut at the header's column starts, not
at spaces. Without -A there is no NAMESPACE column; without -o wide no IP or NODE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import Result, require_content, shorten
from .errors import ParseError

HEADERS = ("NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
HEADER_RE = re.compile("|".join(re.escape(name) for name in sorted(HEADERS, key=len, reverse=True)))
NO_RESOURCES = re.compile(r"^No resources found")


@dataclass
class Pod(Result):
    name: str
    namespace: str | None
    ready: str
    status: str
    restarts: str
    age: str
    ip: str | None
    node: str | None
    line: int


@dataclass
class PodList(Result):
    pods: list[Pod]

    def on_node(self, node: str) -> list[Pod]:
        return [pod for pod in self.pods if pod.node == node]


def parse_get_pods(text: str) -> PodList:
    lines = require_content(text, "kubectl get pods output")
    number, header = next((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    if NO_RESOURCES.match(header.strip()):
        return PodList(pods=[])
    starts = [(match.start(), match.group()) for match in HEADER_RE.finditer(header)]
    names = [name for _, name in starts]
    if "NAME" not in names or "STATUS" not in names:
        raise ParseError(f"expected the NAME ... STATUS header of kubectl get pods, got {shorten(header)}", number)
    pods = []
    for line_number, line in enumerate(lines[number:], start=number + 1):
        if not line.strip():
            continue
        cells = {}
        for index, (start, name) in enumerate(starts):
            end = starts[index + 1][0] if index + 1 < len(starts) else len(line)
            cells[name] = line[start:end].strip()
        if not cells["NAME"] or not cells["STATUS"]:
            raise ParseError(f"expected a pod row under the header, got {shorten(line)}", line_number)
        pods.append(
            Pod(
                name=cells["NAME"],
                namespace=cells.get("NAMESPACE"),
                ready=cells.get("READY", ""),
                status=cells["STATUS"],
                restarts=cells.get("RESTARTS", ""),
                age=cells.get("AGE", ""),
                ip=cells.get("IP"),
                node=cells.get("NODE") if cells.get("NODE") not in (None, "<none>") else None,
                line=line_number,
            )
        )
    return PodList(pods=pods)
