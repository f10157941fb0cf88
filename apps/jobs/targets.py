"""The nodes of a shard as transports see them: plain values read in a fixed number of queries (a fan-out needs a
few fields of each node, not 500 model objects). The executor runs commands on them; the reaper ends what a lost
worker left running on them, with the same logins (jump hosts and sudo included)."""

from apps.inventory.choices import HostKeyState
from apps.inventory.models import SshAccess, SshHostKey
from apps.jobs.models import Job, JobShard, JobStep
from apps.nodeexec.base import NodeTarget
from apps.nodeexec.login import JumpHost, SshLogin


def node_targets(job: Job, shard: JobShard) -> list[NodeTarget]:
    """What the transport needs of each node of the shard: address, port, host keys and, over ssh, its login."""
    # Plain values, not Node instances: a fan-out needs a few fields of each node, not 500 model objects.
    cells = (
        JobStep.objects.filter(shard=shard)
        .order_by("hostname", "position")
        .values_list(
            "hostname", "node_id", "node__management_ip", "node__ssh_port", "node__rack_id", "node__rack__site_id"
        )
    )
    nodes, seen = [], set()
    for hostname, node_id, management_ip, ssh_port, rack_id, site_id in cells:
        if hostname not in seen:
            seen.add(hostname)
            nodes.append((hostname, node_id, management_ip, ssh_port, rack_id, site_id))
    keys: dict[int, dict[str, list[str]]] = {}
    logins: dict[int, tuple[SshLogin, int | None]] = {}
    if job.transport == "ssh":
        node_ids = [node[1] for node in nodes if node[1] is not None]
        for node_id, state, public_key in SshHostKey.objects.filter(
            node_id__in=node_ids, state__in=[HostKeyState.TRUSTED, HostKeyState.REVOKED]
        ).values_list("node_id", "state", "public_key"):
            keys.setdefault(node_id, {}).setdefault(state, []).append(public_key)
        scopes = [(node_id, rack_id, site_id) for _, node_id, _, _, rack_id, site_id in nodes if node_id is not None]
        logins = _logins(SshAccess.objects.for_nodes(scopes))
    targets = []
    for hostname, node_id, management_ip, ssh_port, _, _ in nodes:
        node_keys = keys.get(node_id, {}) if node_id is not None else {}
        login, login_port = logins.get(node_id, (None, None))
        targets.append(
            NodeTarget(
                hostname=hostname,
                address=management_ip or hostname,
                port=login_port or (ssh_port if node_id is not None else 22),
                node_id=node_id,
                trusted_keys=tuple(node_keys.get(HostKeyState.TRUSTED, ())),
                revoked_keys=tuple(node_keys.get(HostKeyState.REVOKED, ())),
                login=login,
            )
        )
    return targets


def _logins(profiles: dict[int, SshAccess]) -> dict[int, tuple[SshLogin, int | None]]:
    """Each node's login from its access profile (node > rack > site); a profile's key is decrypted once."""
    built: dict[int, tuple[SshLogin, int | None]] = {}
    by_node = {}
    for node_id, access in profiles.items():
        if access.pk not in built:
            jump = None
            if access.jump_host:
                jump = JumpHost(
                    host=access.jump_host,
                    port=access.jump_port,
                    username=access.jump_user,
                    trusted_keys=tuple(access.jump_keys()),
                )
            login = SshLogin(username=access.user, private_key=access.private_key(), jump=jump, sudo=access.sudo)
            built[access.pk] = (login, access.port)
        by_node[node_id] = built[access.pk]
    return by_node
