"""Form and error helpers shared by every app: the messages of a service's error detail, for a page or a command."""


def flat_messages(value):
    """Every message in a DRF error detail (nested dicts and lists), prefixed by the names it sits under."""
    if isinstance(value, dict):
        for name, inner in value.items():
            for item in flat_messages(inner):
                yield f"{name}: {item}"
    elif isinstance(value, list | tuple):
        for item in value:
            yield from flat_messages(item)
    else:
        yield value
