"""Schemathesis hooks for tests/test_api_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

`schema_valid_input_is_accepted` is Schemathesis's positive_data_acceptance, less the refusals no OpenAPI schema can
state because they depend on what is stored or on several fields at once: a reference or filter naming nothing
(`No rack matches 'x'.`), a name several objects share, a name already taken, and the cross-field rules listed
below. Every message of the 400 must be one of those; a single other message (a range, a pattern, a length the
schema did not document) fails the run as positive_data_acceptance would.
"""

import re

import schemathesis
from schemathesis.specs.openapi.checks import RejectedPositiveData, positive_data_acceptance

# The inventory import's rows: an object is created or updated by its natural key, so what a row must hold (and
# what it may name) depends on whether its object, or the one it names, exists in the inventory or elsewhere in the
# document. The schema states the document's shape (its version and sections, nothing else), and a problem about
# that shape (section "document") is judged like any other message; a problem about a row is not.
# (The hooks load without Django: tests/test_schemathesis_hooks.py keeps these equal to SECTION_NAMES.)
IMPORT_SECTIONS = frozenset(
    [
        "sites",
        "racks",
        "tags",
        "gpu_skus",
        "nvlink_domains",
        "nodes",
        "switch_trays",
        "power_shelves",
        "coolant_loops",
        "leak_sensors",
        "gpus",
        "nics",
        "switches",
        "pdus",
        "cables",
        "storage_tiers",
        "volumes",
        "firmware",
        "host_keys",
    ]
)

DATA_DEPENDENT = [
    re.compile(r"^No .+ matches .+\.$", re.DOTALL),  # a reference (body) or a filter (query) naming nothing
    re.compile(r"^No such (?:node|rack|tag): ", re.DOTALL),  # a job's or deployment's targets naming nothing
    re.compile(r"^Not drained: .+\. Drain them first ", re.DOTALL),  # a reboot of nodes in service, without force
    re.compile(r"^\d+ .+ are named .+; give the public id\.$", re.DOTALL),
    re.compile(r"already exists\.$"),  # a unique name or number taken
    re.compile(r"^conflicts with existing data: "),  # a unique constraint the database enforced
    # One per parent (the models' unique constraints): a node's GPU index or NIC name, a firmware component, a mount
    # point, a switch port's cable, the SSH access profile of a site, rack or node.
    re.compile(r"^This (?:node|site|rack|switch port|port) already (?:has|records) .+\.$"),
    re.compile(r"^.+ has BMC settings already: change those\.$"),  # one BMC per node
    # An update naming another node or switch tray than the stored one.
    re.compile(r"^A BMC stays with its node(?: or switch tray)?: "),
    # A new BMC belongs to a node or an NVLink switch tray, one of them; a switch tray's is read over Redfish only.
    re.compile(r"^Name the node or the NVLink switch tray \(switch_tray\) the BMC belongs to, one of them\.$"),
    re.compile(r"^An NVLink switch tray's BMC is read over Redfish \(its leak detectors are only there\)\.$"),
    re.compile(r"^.+ already has an? \w+ fault(?: on .+)?\.$", re.DOTALL),  # a simulated fault already injected
    # A simulated fault's target is one the node has (a GPU index, a data NIC, a checkpoint), as the kind says.
    re.compile(r"^.+ has no (?:GPU|data NIC|checkpoint) .+\.$", re.DOTALL),
    # A node's place in its rack: the rack's height and the nodes already in it.
    re.compile(r"^U\d+(?:–U\d+)? (?:does not fit in .+ \(\d+U\)|overlaps .+)\.?$", re.DOTALL),
    re.compile(r"^.+ is already (?:used|taken|cabled|in use)", re.DOTALL),
    # A node's status moves by the allowed transitions from the stored one (a racked node cannot become ready).
    re.compile(r"^A \w+ node cannot become \w+; from \w+ it may become: .+\.$"),
    # Cross-field rules (JSON Schema has no "at least one of these lists is not empty", nor comparisons).
    re.compile(r"^Name nodes, racks(?:, tags)? or (?:tags|a role)\.$"),
    re.compile(r"^End [AB] is either a NIC or a switch port(?:, not both or neither)?\.$"),
    re.compile(r"^The smallest size is above the largest\.$"),
    re.compile(r"^The achievable bandwidth cannot exceed the datasheet bandwidth\.$"),
    re.compile(r"^Tiers must satisfy 0 ≤ fail ≤ warn ≤ expected\.$"),
    re.compile(r"^Name the switch port\.$"),  # an end on a switch names its port
    re.compile(r"^Give exactly one of site, rack or node\.$"),
    # core.validators.NameValidator judges Unicode categories (no control, format or unassigned character), which
    # no portable pattern can list: ECMA 262's \p{} needs a flag OpenAPI cannot give, Python's re has none.
    re.compile(r"^Enter a name without control characters, line breaks or spaces at either end\.$"),
    # A decimal is a JSON number with a fixed number of places: JSON Schema's multipleOf is judged in binary floating
    # point (0.3 / 0.1 is not whole), so no schema states "at most one decimal place"; the field refuses more.
    re.compile(r"^Ensure that there are no more than \d+ (?:decimal places?|digits? in total)\.$"),
    # A cursor is opaque: only one the list made itself (its `next` link) pages it.
    re.compile(r"^Invalid cursor"),
    re.compile(r"^This cursor does not fit this list\.$"),
    # Cross-field rules of SLOs, incidents and services.
    re.compile(r" is measured for: .+\.$"),
    re.compile(r"^.+: a target between .+ and .+\.$"),
    re.compile(r"^(?:Name the .+ this SLO is about|Only an SLO on an? .+ names one)\.$"),
    re.compile(r"^Name the training job, node or failed check the incident is about\.$"),
    re.compile(r"^The [a-z-]+ runbook needs the training job\.$"),
    re.compile(r"^A service runs on at least one node\.$"),
    re.compile(r"^Name the fault, or the node and the fault's kind\.$"),  # a rehearsal: a fault id, or node and kind
    # A rehearsal's fault: injected (and not cleared), on that node, on a node that runs no inference service.
    re.compile(r"^No injected fault .+: it may have been cleared\.$", re.DOTALL),
    re.compile(r"^No .+ fault is injected on .+\.$", re.DOTALL),
    re.compile(r"^.+ serves the inference service .+ and runs no training job: ", re.DOTALL),
    # A schedule's crontab fields are cron's grammar (celery judges them), which a pattern in the schema could only
    # approximate; they are judged beside the template's reference now that every bad field is named at once.
    re.compile(r"^Not a crontab [a-z ]+ field: ", re.DOTALL),
    re.compile(r"^Give the interval in minutes \(1 or more\)\.$"),  # what an interval schedule needs
    re.compile(r"^Only runbook 2 \(gpu-utilisation\) samples the GPUs over a window\.$"),  # sample_seconds, runbook
    # A PDU's mounting and rating: a position or a side, the maximum power or amps and volts.
    re.compile(r"^A PDU is either vertical \(0U\) on a side or in U slots, not both\.$"),
    re.compile(r"^A vertical \(0U\) PDU hangs on the left or right of the rear\.$"),
    re.compile(r"^A PDU in U slots has no side; leave it empty or clear the position\.$"),
    re.compile(r"^Give the maximum power, or the rated amps and volts\.$"),
    # What a private key holds is read by parsing it (OpenSSH or PEM, a key type asyncssh takes), not by a pattern.
    re.compile(r"^Enter an OpenSSH or PEM private key "),
    # A BMC password's length in bytes depends on the protocol (given, or stored for a PATCH).
    re.compile(r"^IPMI 2\.0 passwords are at most \d+ bytes; this one is longer\.$"),
    re.compile(r"^Give a new password or clear it, not both\.$"),
    # A cost policy's power limit is judged against the GPU SKUs of the nodes in its scope.
    re.compile(r" is outside the .+'s power limit range, \d+–\d+ W\.$"),
    re.compile(r"^Elastic scaling acts on one inference service\.$"),  # a kind's scope
    re.compile(r"^.+ policies act on: [a-z, ]+\.$"),  # the scopes a kind declares
    # Cross-field rules of notification subscriptions: what a channel needs.
    re.compile(r"^Give one or more e-mail addresses\.$"),
    re.compile(r"^A webhook needs a shared secret"),
    re.compile(r"^A webhook URL starts with http:// or https:// and names a host\.$"),  # a blank URL, for a webhook
    # Where a webhook's host resolves to (a private address, no such name) is the network's, not the request's.
    re.compile(r" is a (?:loopback, private or reserved|link-local or metadata) address \(.+\): Rackpilot does not "),
    re.compile(r" is a cloud metadata service: Rackpilot does not connect to it$"),
    re.compile(r"^\[Errno -?\d+\] "),
    re.compile(r"^\S+ does not resolve$"),  # apps/core/outbound.py: no address for the name
    re.compile(r"^encoding with 'idna' codec failed"),  # a host name DNS cannot carry (a label over 63 bytes)
    # What an uploaded trace holds (not JSON, cut off, not gzip): the file's content, named by the file.
    re.compile(r"^[^\s:]+\.\w+: ", re.DOTALL),
    # What a file holds, not how the request is shaped: an upload's format is told by its name or content.
    re.compile(r"^The file is not UTF-8 text \(byte \d+\)\.$"),
    re.compile(r"^Cannot tell the format of .+; give json, yaml or csv\.$", re.DOTALL),
    # A repair's part: a GPU names its index, another part its slot; the new serial differs from the old.
    re.compile(r"^Name the GPU \(its index on the node\) that was replaced\.$"),
    re.compile(r"^Name the part's slot \(e\.g\. NIC ib0, PSU 2\)\.$"),
    re.compile(r"^The new serial is the old one: nothing was replaced\.$"),
    # A maintenance window: on a rack or a node, ending after it starts, at most 7 days; only an open one ends now.
    re.compile(r"^A maintenance window is on a rack or a node(?:, not both|: name one)\.$"),
    re.compile(r"^A window ends after it starts\.$"),
    re.compile(r"^A window lasts at most \d+ days \(this one .+\): book the rest as another\.$"),
    re.compile(r"^The window (?:has not opened yet: delete it instead|ended already)\.$"),
    # The transports a job may run over are its kind's (and this install's).
    re.compile(r"^[\w-]+ runs over [\w, ]+, not '\w+'\.$"),
    re.compile(r"^This install does not allow the \w+ transport "),
]


def _messages(body) -> list[str | None]:
    """Every message of a 400; None for a problem of an import's row (see IMPORT_SECTIONS)."""
    if isinstance(body, dict) and "message" in body:  # the import's problems: {section, line, field, message}
        return [None if body.get("section") in IMPORT_SECTIONS else str(body["message"])]
    if isinstance(body, dict):
        return [message for value in body.values() for message in _messages(value)]
    if isinstance(body, list):
        return [message for value in body for message in _messages(value)]
    return [str(body)]


def _body(response):
    try:
        return response.json()
    except ValueError:
        return None


def is_data_dependent(body) -> bool:
    messages = _messages(body) if body is not None else []
    return bool(messages) and all(
        message is None or any(rule.search(message) for rule in DATA_DEPENDENT) for message in messages
    )


# Where `parameters` is checked by the job kind the request names: which names and values it takes depends on `kind`
# (the kinds' own schemas are in the job kinds' documentation), so a refusal of only the parameters is cross-field.
# A cost policy's parameters are its kind's too (one of the kinds' schemas, and a node or volume that must exist).
KIND_PARAMETERS = {
    "/api/jobs/",
    "/api/job-templates/",
    "/api/job-templates/{id}/",
    "/api/cost-policies/",
    "/api/cost-policies/{id}/",
    "/api/cost-policies/{public_id}/",
}


def without_kind_parameters(path: str, body):
    """The 400's body less `parameters` where the kind the request names judges them; None when nothing is left. A
    request's every bad field is named at once, so the kind's refusal can stand beside one a schema can state."""
    if path in KIND_PARAMETERS and isinstance(body, dict) and "parameters" in body:
        return {field: messages for field, messages in body.items() if field != "parameters"} or None
    return body


BLANK = "This field may not be blank."


def without_python_blanks(body, sent) -> dict | None:
    r"""The 400's body less each field refused as blank whose value was sent as characters Python strips and ECMA
    262's \s does not (U+0085, U+001C–U+001F): DRF trims a field with str.strip, which no portable pattern can
    state. None when nothing is left, that is when the blanks were all of that kind."""
    if not isinstance(body, dict) or not isinstance(sent, dict):
        return body
    left = {field: messages for field, messages in body.items() if not _stripped_blank(messages, sent.get(field))}
    return left or None


def _stripped_blank(messages, sent) -> bool:
    """A field's refusal is only "blank" for what it was sent as only whitespace: a string, or a list's items (DRF
    names them by index: {"3": ["This field may not be blank."]})."""
    if messages == [BLANK]:
        return isinstance(sent, str) and bool(sent) and not sent.strip()
    if isinstance(messages, dict) and isinstance(sent, list) and messages:
        return all(
            key.isdigit() and int(key) < len(sent) and _stripped_blank(inner, sent[int(key)])
            for key, inner in messages.items()
        )
    return False


@schemathesis.check
def schema_valid_input_is_accepted(ctx, response, case):
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        body = _body(response)
        if response.status_code == 400:
            body = without_python_blanks(body, case.body)
            body = without_kind_parameters(case.path, body) if body is not None else None
            if body is None or is_data_dependent(body):
                return None
        raise
