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


class IncompleteOutput(ParseError):
    """The output stops before what it declares (a count, a header, a closing border): it was cut between records and
    only looks complete. ``line`` is where the missing part should have been (or the line that declares it) and
    ``partial`` holds what was read, for a caller that can use part of a report."""

    def __init__(self, message: str, line: int | None, partial: object = None):
        super().__init__(f"incomplete: {message}", line)
        self.partial = partial
