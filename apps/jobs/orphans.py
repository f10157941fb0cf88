"""Commands a lost worker left running. Every command of a shard carries RACKPILOT_JOB=<job public id>:<shard>
(apps.nodeexec transports); when the reaper fails a shard as "worker lost" it ends them by that marker: on this
host for the local transport, on each of the shard's nodes over ssh.

The local sweep sees the host the reaper runs on: a lost worker's local commands are ended when the reaper runs on
the same host (a node running its own worker, the embedded wiring, a one-host install).
"""

import asyncio
import socket

from django.conf import settings

from apps.core.text import counted
from apps.jobs.models import Job, JobShard
from apps.jobs.targets import node_targets
from apps.nodeexec.base import NodeTarget, OutputCollector, TransportError
from apps.nodeexec.catalogue import END_MARKED
from apps.nodeexec.local import end_marked
from apps.nodeexec.transports import get_transport


def command_marker(job: Job, shard: JobShard) -> str:
    return f"{job.public_id}:{shard.index}"


def end_orphaned_commands(*, job: Job, shard: JobShard) -> str:
    """End what still runs for the shard; returns a line for the job's events ("" when nothing could run)."""
    marker = command_marker(job, shard)
    grace = settings.RACKPILOT_JOB_KILL_GRACE_SECONDS
    if job.transport == "local":
        groups = end_marked(marker, grace=grace)
        return (
            f"ended {counted(len(groups), 'process group')} of shard {shard.index} left running on "
            f"{socket.gethostname()}"
        )
    if job.transport == "ssh":
        outcomes = asyncio.run(_end_over_ssh(node_targets(job, shard), END_MARKED.build(marker=marker, seconds=grace)))
        ended = sum(1 for outcome in outcomes.values() if outcome == "done")
        failed = sorted(host for host, outcome in outcomes.items() if outcome != "done")
        line = f"ended what shard {shard.index} left running on {ended} of {counted(len(outcomes), 'node')}"
        return line + (f"; could not on {', '.join(failed[:20])}" if failed else "")
    return ""  # sim: nothing runs on a node


async def _end_over_ssh(targets: list[NodeTarget], argv: list[str]) -> dict[str, str]:
    transport = get_transport("ssh")  # no marker: the sweep must not find itself
    window = asyncio.Semaphore(max(1, settings.RACKPILOT_JOB_WINDOW))

    async def one(target: NodeTarget) -> tuple[str, str]:
        async with window:
            try:
                session = await transport.open(target)
            except TransportError:
                return target.hostname, "unreachable"
            try:
                result = await session.run(
                    argv,
                    timeout=END_MARKED.timeout,
                    collector=OutputCollector(cap=4096),
                    cancel=asyncio.Event(),
                    grace=1,
                )
            finally:
                await session.close()
            return target.hostname, "done" if result.ok else (result.error or f"exit {result.exit_code}")

    return dict(await asyncio.gather(*(one(target) for target in targets)))
