"""`parse TOOL FILE`: print a tool output file as typed JSON. The Django command and tests call ``main``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from .common import decode_bytes
from .errors import ParseError
from .registry import PARSERS, detect_tool, parse, tool_names

USAGE = "usage: parse TOOL FILE   (TOOL: a tool name or 'auto'; FILE: a path, or '-' for standard input)"


def main(argv: list[str], stdin: IO, stdout: IO, stderr: IO) -> int:
    """0 on success, 1 when the input is not that tool's output, 2 for usage errors (unknown tool, missing file)."""
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        stderr.write(f"{USAGE}\ntools: {', '.join(tool_names())}\n")
        return 2
    tool, source = argv
    if tool != "auto" and tool not in PARSERS:
        stderr.write(f"error: unknown tool {tool!r}; known tools: auto, {', '.join(tool_names())}\n")
        return 2
    try:
        text = _read(source, stdin)
    except OSError as exc:
        stderr.write(f"error: {source}: {exc.strerror or exc}\n")
        return 2
    if tool == "auto":
        tool = detect_tool(text, None if source == "-" else source)
        if tool is None:
            stderr.write(f"error: {source}: line 1: could not tell which tool produced this output\n")
            return 1
    try:
        result = parse(tool, text)
    except ParseError as exc:
        stderr.write(f"error: {source}: {exc}\n")
        return 1
    stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    return 0


def _read(source: str, stdin: IO) -> str:
    if source != "-":
        return decode_bytes(Path(source).read_bytes())
    binary = getattr(stdin, "buffer", None)
    return decode_bytes(binary.read()) if binary is not None else stdin.read()
