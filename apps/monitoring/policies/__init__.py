"""Cost and energy policies: one framework, several kinds (docs/monitoring.md, "Cost and energy policies").

A policy (CostPolicy row) watches the telemetry of its scope and proposes an action (PolicyAction row): per node and
GPU the exact commands, the commands that revert them, and the expected saving in kWh and money. Nothing runs until
an operator approves the proposal or the policy has an admin's standing approval; every approve, apply and revert is
audited; every action can be reverted. Applying and reverting are jobs (the jobs engine, over ssh, local or sim).

- `base`: the kind's contract (parameters, propose, when to undo) and the registry.
- `energy`: policy 4, energy at low load: lower the GPU power limit (nvidia-smi -pl) while utilisation is low.
- `jobs`: the `power-limit` job kind that applies, reverts and re-applies power limits (check, set, verify).
- `services`: dry run, approve, apply, revert, and the periodic evaluation (beat, the system queue).
"""
