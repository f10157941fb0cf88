"""Pure parsers: real tool output (nvidia-smi, nccl-tests, dcgmi, ...) → typed results with ``to_dict()``.

Nothing here imports Django except ``apps.py`` and the ``parse`` management command. Every parser takes the tool's
text and returns a dataclass, or raises ``ParseError`` naming the line and what it expected. Output that holds less
than it declares (a count, a header's devices, a closing border) raises ``IncompleteOutput``, a ParseError whose
``partial`` keeps what was read. Lines are numbered as `grep -n` numbers them (``common.split_lines``). ``registry``
maps tool names to parsers and detects the tool from the text.
"""

from .errors import IncompleteOutput, ParseError

__all__ = ["IncompleteOutput", "ParseError"]
