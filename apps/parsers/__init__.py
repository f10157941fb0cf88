"""Pure parsers: real tool output (nvidia-smi, nccl-tests, dcgmi, ...) → typed results with ``to_dict()``.

Nothing here imports Django except ``apps.py`` and the ``parse`` management command. Every parser takes the tool's
text and returns a dataclass, or raises ``ParseError`` naming the line and what it expected. ``registry`` maps tool
names to parsers and detects the tool from the text.
"""

from .errors import ParseError

__all__ = ["ParseError"]
