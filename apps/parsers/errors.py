"""The one exception every parser raises when its input is not the output it reads."""


class ParseError(ValueError):
    """Input is not the expected tool output; ``line`` is the 1-based line where that became clear."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return f"line {self.line}: {self.message}"
