"""The diagnosis app's job kinds, the runbooks: `nccl-timeout` (runbook 1, nccl_timeout.py), `gpu-utilisation`
(runbook 2, gpu_utilisation.py) and `training-interrupted` (runbook 3 and the automatic recovery,
training_interrupted.py); each is one job per phase. Importing this package registers them (DiagnosisConfig.ready)."""

from apps.diagnosis.kinds import gpu_utilisation, nccl_timeout, training_interrupted  # noqa: F401
