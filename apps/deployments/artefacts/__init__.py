"""Configuration files a deployment generates, each validated before anyone can download it.

Pure Python: no ORM. Input is a plain ``options`` dict and a list of node dicts (shapes in the brief of
``render_all``); output is a list of :class:`Artefact`. Every renderer is paired with a validator that parses the
*rendered text* back, so :func:`validate` can re-check an artefact that was stored, edited or corrupted later.

Decisions worth knowing:

* ``nccl-conf``: interface and HCA lists are written with NCCL's ``=`` prefix (exact match). Without it NCCL
  matches prefixes, and ``mlx5_1`` would also select ``mlx5_10`` … ``mlx5_17``. ``NCCL_IB_TC`` is the whole
  IP traffic-class byte on RoCE v2: DSCP in the upper six bits, ECN in the lower two (set by the NIC), hence
  ``dscp * 4``. ``NCCL_IB_SL`` is the service level; on RoCE the NIC maps it to the 802.1p priority of VLAN
  tagged frames, so it is set to the PFC priority (``rdma_priority``) and is harmless where switches trust DSCP.
* ``cgroup-slice``: one file for the *smallest* node shape (fewest CPUs, NUMA nodes and memory). A limit that
  fits the smallest node is safe on larger ones; the file lists the hosts whose shape differs so an operator
  can see what is left unused there.
* ``pod-affinity``: a PodTemplateSpec (``metadata.labels`` + ``spec``), because the anti-affinity selector needs
  labels on the pods it selects. It is checked against the official Kubernetes client's models, and unknown
  keys (which the client silently drops) are rejected by walking the models' ``attribute_map``.
* ``idle-reclaim``: a descheduler ``HighNodeUtilization`` policy rather than ``PodLifeTime``. PodLifeTime
  evicts by age and would kill healthy week-long training runs; HighNodeUtilization evicts pods from nodes
  whose ``nvidia.com/gpu`` requests are below a threshold, so stranded fragments are repacked (the scheduler
  profile scores with ``MostAllocated``, which the descheduler documents as required) and whole 8-GPU nodes
  become free again. The descheduler judges by *requests*, not by SM activity; ``idle_reclaim_minutes`` is the
  descheduling interval (``--descheduling-interval``), written into the header of the file and its
  description, so a fragment survives at most one interval.
"""

from __future__ import annotations

import configparser
from typing import Any

import yaml

from apps.deployments.artefacts import host, k8s
from apps.deployments.artefacts.base import (
    ARTEFACT_NAMES,
    NCCL_DEBUG_LEVELS,
    PLACEMENTS,
    TOKEN_RE,
    Artefact,
    ArtefactError,
    options_errors,
    with_defaults,
)
from apps.deployments.artefacts.host import parse_environment
from apps.deployments.artefacts.k8s import unknown_kubernetes_keys

# name -> (render, validate), from the module that knows that kind of file.
ARTEFACTS = {**host.ARTEFACTS, **k8s.ARTEFACTS}


def render_all(options: dict[str, Any] | None, nodes: list[dict[str, Any]], *, deployment_name: str) -> list[Artefact]:
    """Render and validate every artefact, in :data:`ARTEFACT_NAMES` order."""
    return [render(name, options, nodes, deployment_name=deployment_name) for name in ARTEFACT_NAMES]


def render(name: str, options: dict[str, Any] | None, nodes: list[dict[str, Any]], *, deployment_name: str) -> Artefact:
    """Render one artefact and validate it; raise :class:`ArtefactError` if either fails."""
    if name not in ARTEFACTS:
        raise ArtefactError(name, f"unknown artefact; expected one of {', '.join(ARTEFACT_NAMES)}")
    errors = options_errors(options)
    if errors:
        summary = "; ".join(f"{path}: {message}" for path, message in errors.items())
        raise ArtefactError(name, f"invalid options ({summary})", errors=errors)
    if not TOKEN_RE.match(deployment_name or ""):
        raise ArtefactError(name, "deployment_name must be a short name (letters, digits, . _ -)")
    if not nodes:
        raise ArtefactError(name, "no nodes to render for")
    render_one, _ = ARTEFACTS[name]
    artefact = render_one(with_defaults(options), nodes, deployment_name)
    validate(artefact)
    return artefact


def validate(artefact: Artefact) -> None:
    """Re-validate a rendered artefact from its text; raise :class:`ArtefactError` when it is not acceptable."""
    if artefact.name not in ARTEFACTS:
        raise ArtefactError(artefact.name, "unknown artefact")
    try:
        ARTEFACTS[artefact.name][1](artefact.content)
    except ArtefactError:
        raise
    except (ValueError, TypeError, KeyError, yaml.YAMLError, configparser.Error) as exc:
        raise ArtefactError(artefact.name, str(exc)) from exc


__all__ = [
    "ARTEFACT_NAMES",
    "NCCL_DEBUG_LEVELS",
    "PLACEMENTS",
    "Artefact",
    "ArtefactError",
    "options_errors",
    "parse_environment",
    "render",
    "render_all",
    "unknown_kubernetes_keys",
    "validate",
    "with_defaults",
]
