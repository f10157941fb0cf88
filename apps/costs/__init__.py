"""Cost and energy policies (docs/costs.md): one framework, several kinds.

A policy (CostPolicy row) watches the telemetry of its scope and proposes an action (PolicyAction row): per node and
GPU the exact commands, the commands that revert them, and the expected saving in kWh and money. Nothing runs until
an operator approves the proposal or the policy has an admin's standing approval; every approve, apply and revert is
audited; every action can be reverted. Applying and reverting are jobs (the jobs engine, over ssh, local or sim).

- `policies/`: the policy kinds: `base` (the kind's contract and registry), `energy` (power limits at low load),
  `scaling` (an inference service's replicas), `spot` (preemptible capacity), `tiering` (idle files to a colder tier).
- `kinds/`: the job kinds that apply and revert actions on nodes (power limits, file moves).
- `commands.py`, `tiering_commands.py`: the node commands those job kinds run (the nodeexec catalogue).
- `artefacts.py`: the Kubernetes and Slurm files an operator applies (scaling, spot).
- `services.py`: dry run, approve, apply, revert, and the periodic evaluation (beat, the system queue).
"""
