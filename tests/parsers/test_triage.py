# ruff: noqa: E501  (fixture file names are long)
"""Triage rules on every real failure log: the problem keys found, where, and the lines they cite."""

import pytest

from apps.parsers import triage as rules
from apps.parsers.common import read_input, split_lines
from apps.parsers.xid import CATALOGUE

from .helpers import REAL, real, real_fixture_paths

# Every file of the log folders, with the problem keys its findings carry, in the order of their first line.
EXPECTED = {
    "pytorch-nccl/distbackenderror-ncclinternalerror-net-connection-closed-by-remote-peer-nccl2.14.3-nccl-issue1514.txt": [
        "nccl_internal_error",
        "nccl_remote_error",
    ],
    "pytorch-nccl/distbackenderror-remote-process-exited-net-ofi-undeliverable-nccl2.28.8-rank-prefixed-nccl-issue1928-partial.txt": [
        "nccl_remote_error"
    ],
    "pytorch-nccl/fr-dump-signal-collective-timeout-local-and-remote-rank-vllm-omni-issue2928-partial.txt": [
        "nccl_watchdog_timeout"
    ],
    "pytorch-nccl/fr_trace-cli-not-all-ranks-joining-sequence-number-gloo-torchcomms-pytorch-tutorial-debug-hangs.txt": [
        "collective_not_joined"
    ],
    "pytorch-nccl/heartbeat-monitor-timed-out-watchdog-stuck-pg3-sglang-issue1691-partial.txt": [
        "nccl_watchdog_timeout"
    ]
    * 4,
    "pytorch-nccl/heartbeat-tcpstore-should-dump-flag-recvvalue-connection-reset-multinode-tp16-sglang-issue20859-partial.txt": [
        "nccl_remote_error",
        "nccl_remote_error",
    ],
    "pytorch-nccl/torchfrtrace-not-all-ranks-joining-collective-missing-rank-pytorch-tutorial-flight-recorder.txt": [
        "collective_not_joined"
    ],
    "pytorch-nccl/torchrun-childfailederror-sigkill-exitcode-minus9-no-other-failures-accelerate-cppo-issue6-partial.txt": [
        "worker_failed"
    ],
    "pytorch-nccl/torchrun-elastic-agent-glog-failed-exitcode-minus9-local-rank5-traceback-robomamba-issue10-partial.txt": [
        "worker_failed"
    ],
    "pytorch-nccl/watchdog-allreduce-timeout-600000ms-exception-detected-pg-guid-default-pg-basicsr-issue737-partial.txt": [
        "nccl_watchdog_timeout"
    ]
    * 3,
    "pytorch-nccl/watchdog-alltoall-full-teardown-sequence-one-rank-ray-workerdict-prefix-deepresearcher-issue16-partial.txt": [
        "nccl_watchdog_timeout"
    ],
    "pytorch-nccl/watchdog-reduce-scatter-base-timeout-multirank-pg1-llamafactory-issue6269-partial.txt": [
        "nccl_watchdog_timeout"
    ]
    * 3,
    "nccl-warn/bootstrap-no-socket-interface-found-torch-runtimeerror-ncclinternalerror-nccl2.14.3-mambatree-issue14-partial.txt": [
        "nccl_internal_error",
        "nccl_socket_error",
    ],
    "nccl-warn/ibvwrap-modify-qp-network-unreachable-dgx-h100-proxy-connect-failed-nccl-tests-issue185-partial.txt": [
        "nccl_ib_error",
        "nccl_remote_error",
    ],
    "nccl-warn/legacy-nccl2.2.13-socket-h-warn-call-to-connect-failed-timed-out-nccl-tests-issue15-partial.txt": [
        "nccl_socket_error",
        "nccl_remote_error",
    ],
    "nccl-warn/net-ib-error4-vendor-err-81-old-format-h100-ib0-nccl-issue928-partial.txt": ["nccl_ib_error"] * 2,
    "nccl-warn/net-ib-status12-status5-vendor-err-129-249-roce-ipv4-gid-ib_plugin-nccl-issue1814-partial.txt": [
        "nccl_ib_error"
    ],
    "nccl-warn/socket-start-connect-abort-bootstrap-2x8-h100-k8s-net1-nccl-issue1016-partial.txt": [
        "nccl_socket_error"
    ],
    "nccl-warn/socket-start-connect-software-caused-connection-abort-proxy-connect-failed-nccl-tests-issue166-partial.txt": [
        "nccl_socket_error",
        "nccl_remote_error",
    ],
    "dmesg-xid/aer-multiple-uncorrected-fatal-sdes-cmpltto-nvidia-cant-recover-dmesg-H-relative-returnn-issue1500.txt": [
        "pcie_aer"
    ]
    * 3,
    "dmesg-xid/gpud-dmesg-decode-iso-xid13-sm-warp-exceptions-then-xid43-pt_main_thread-partial.txt": ["xid", "xid"],
    "dmesg-xid/gpud-raw-dev-kmsg-format-hgx-nvswitch-open-calico-noxid.txt": [],
    "dmesg-xid/journal-kernel-prefix-xid45-caused-by-previous-xid149-xid145-nvlink-590.48.01-open-gpu-kernel-modules-issue1150-partial.txt": [
        "xid"
    ]
    * 4,
    "dmesg-xid/nvrm-fallen-off-bus-multiline-without-xid-probe-failed-open-570.158.01-nvsentinel-issue155.txt": [
        "gpu_fell_off_bus"
    ],
    "dmesg/gpud-dmesg-with-xid-119.log": ["xid"],
    "training-logs/deepspeed-chat-step1-sft-opt-1.3b-16rank-zero2-full-run-fp16-overflow-steps-saving-final-model-exit.log": [],
    "training-logs/detectron2-iter-events-then-saving-checkpoint-model_0004999-then-exception-during-training-8gpu-diffusiondet-issue39-partial.txt": [
        "training_crashed"
    ],
    "training-logs/hf-trainer-resume-continuing-from-global-step-200000-will-skip-batches-tqdm-llamafactory-issue1813.txt": [],
    "training-logs/megatron-lm-load-checkpoint-at-iteration-100-checkpoint-version-3.0-dlrover-flash-ckpt-saver-dlrover-issue977-partial.txt": [],
    "training-logs/megatron-lm-resume-warning-could-not-find-latest_checkpointed_iteration-will-start-from-random-llama2-70b-dlrover-issue1065.txt": [
        "checkpoint_missing"
    ],
    "training-logs/mmengine-saving-checkpoint-at-14-epochs-then-checkpoint-hook-traceback-mmdetection-issue12069-partial.txt": [
        "checkpoint_save_failed"
    ],
    "training-logs/torch-load-pytorchstreamreader-failed-finding-central-directory-truncated-ckpt-windows-compvis-sd-issue93.txt": [
        "checkpoint_corrupt"
    ],
    "slurm/scontrol-show-node-idle-drain-gres-gpu-count-reported-lower-than-configured-rtx3090-slurm24.05-awsome-distributed-ai-issue195.txt": [
        "node_drained",
        "gpu_count_mismatch",
    ],
    "slurm/slurmctld-journal-gres-gpu-count-changed-mig-inval-drain-nodes-magic-castle-issue361.txt": [
        "gpu_count_mismatch",
        "node_drained",
    ],
    # A private Debian slurmctld 22.05.8 with drained nodes (tests/schedulers/): triage reads scontrol's, not sinfo's.
    "slurm/sinfo-N-drained-reboot-unknown-debian-slurm22.05.8-private-slurmctld.txt": [],
    "slurm/scontrol-show-node-o-drain-reboot-requested-debian-slurm22.05.8-private-slurmctld.txt": ["node_drained"] * 3,
    "slurm/scontrol-show-node-drain-reason-with-equals-and-bar-debian-slurm22.05.8-private-slurmctld.txt": [
        "node_drained"
    ],
    "k8s/kubectl-describe-node-capacity-80-allocatable-70-nvidia.com-gpu-hami-split-allocated-resources-hami-issue477-partial.txt": [],
    "k8s/kubectl-describe-node-labels-gpu-operator-gfd-8x-h100-80gb-hbm3-poweredge-xe9680-k8s-device-plugin-issue1501-partial.txt": [],
    "k8s/nvidia-device-plugin-log-xidcriticalerror-xid69-device-marked-unhealthy-k8s-device-plugin-issue189.txt": [
        "xid"
    ],
    # Failure outputs of nccl-tests, in the first collection.
    "nccl-tests/alltoall_perf-h800-2node-16gpu-illegal-memory-access-nccl-tests-issue355.txt": ["cuda_error"],
    "nccl-tests/all_reduce_perf-h100-8gpu-cuda-init-failure.txt": ["cuda_error"],
    "nccl-tests/nccl-warn-net-ib-error12-test-failure-v100-partial-nccl-tests-issue24.txt": [
        "nccl_ib_error",
        "nccl_ib_error",
        "cuda_error",
        "cuda_error",
    ],
    "nccl-tests/nccl-warn-net-ib-status12-h100-partial-nccl-issue1698.txt": ["nccl_ib_error"],
    # Tool outputs that state a fault.
    "dcgm/dcgmi-diag-r3-h100-8gpu-dcgm3.3.8-fail-cuinit.txt": ["cuda_error"],
    "nvidia-smi/q-excerpt-a100-80gb-ecc-remapped-rows-partial.txt": ["row_remap"],
    # gpud's capture of an 8-GPU H100 whose PSU asserts the power brake: HW Slowdown on every GPU.
    "nvidia-smi/q-h100-8gpu-driver535.161.08-gpud.txt": ["gpu_clocks_throttled"] * 8,
    # aws-ofi-nccl could not register memory with EFA (RC 12, ENOMEM), behind two pdsh address prefixes.
    "nccl-warn/net-ofi-unable-to-register-memory-rc12-cannot-allocate-memory-pdsh-prefix-efa-nccl-issue563-partial.txt": [
        "nccl_system_error"
    ],
    # GPU firmware that stopped answering, and a GPU the driver will not use until reset: neither prints an Xid.
    "dmesg-xid/journal-k-no-hostname-gsp-heartbeat-timed-out-kgsprpcrecvpoll-no-xid-bazzite-issue4449-partial.txt": [
        "gpu_firmware_failure"
    ],
    "dmesg-xid/dmesg-T-gsprmalloc-failed-nv-err-reset-required-0x62-kernel-channel-no-xid-sichek-issue51-partial.txt": [
        "gpu_reset_required"
    ],
    # Slurm's unkillable step: slurmd's own line, and the drain reason sinfo -R shows for it.
    "slurm/slurmd-log-step-cancelled-stepd-terminated-due-to-job-not-ending-with-signals-trixie-issue45.txt": [
        "slurm_unkillable_step"
    ],
    "slurm/sinfo-R-kill-task-failed-drain-reason-awsome-distributed-ai-issue185.txt": ["slurm_unkillable_step"],
    # InfiniBand/RoCE ports Down, Polling or Disabled in ibstat and ibv_devinfo (one finding per device).
    "infiniband/gpud-ibstat.47.0.h100.some.down.0.txt": ["ib_port_down"] * 3,
    "infiniband/gpud-ibstat.47.0.h100.some.down.with.polling.1.txt": ["ib_port_down"] * 2,
    "infiniband/ibstat-mlx5_7-state-down-physical-linkup-sriov-ib-pod-network-operator-issue249.txt": ["ib_port_down"],
    "infiniband/ibv_devinfo-h100-cx7-mlx5_0-port-down-deepep-issue60-partial.txt": ["ib_port_down"],
}
LOG_FOLDERS = ("pytorch-nccl", "nccl-warn", "dmesg-xid", "dmesg", "training-logs", "slurm", "k8s")


def test_every_file_of_the_log_folders_has_its_expectation():
    files = {str(path.relative_to(REAL)) for folder in LOG_FOLDERS for path in (REAL / folder).iterdir()}
    assert files - set(EXPECTED) == set()


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_triage_finds_the_expected_problems_on_a_real_log(relative):
    text = real(relative)
    report = rules.triage(text)

    assert [finding.problem for finding in report.findings] == EXPECTED[relative]
    assert report.recognised is bool(EXPECTED[relative])
    lines = split_lines(text)
    for finding in report.findings:  # every finding cites real lines, quoted as they stand in the file
        assert finding.lines and finding.lines == sorted(finding.lines)
        assert finding.excerpt == [lines[number - 1].rstrip() for number in finding.lines]
        assert finding.problem in rules.PROBLEMS
        assert finding.detail
        assert finding.count >= 1


def test_triage_stays_silent_on_every_other_real_fixture():
    """Healthy tool outputs (nvidia-smi -q with 'Double Bit ECC : N/A', --help-query-gpu's prose about ECC errors,
    benchmark tables) are not failure logs: no rule fires on them."""
    noisy = {}
    for path in real_fixture_paths():
        relative = str(path.relative_to(REAL))
        if relative not in EXPECTED and (problems := [f.problem for f in rules.triage(read_input(path)).findings]):
            noisy[relative] = problems
    assert noisy == {}


def test_nvidia_smi_q_pending_row_remap_cites_the_section_and_value():
    finding = _only("nvidia-smi/q-excerpt-a100-80gb-ecc-remapped-rows-partial.txt")
    assert (finding.gpu, finding.lines) == ("00000000:10:1C.0", [24, 27])
    assert finding.excerpt == ["    Remapped Rows", "        Pending                           : Yes"]


def test_nvidia_smi_q_slowdown_is_a_finding_per_gpu_and_a_power_cap_is_not():
    text = (
        "GPU 00000000:18:00.0\n    Clocks Event Reasons\n        SW Power Cap                      : Active\n"
        "        HW Slowdown                       : Not Active\n"
    )
    assert rules.triage(text).findings == []
    (finding,) = rules.triage(text.replace(": Not Active", ": Active")).findings
    assert (finding.problem, finding.gpu, finding.lines) == ("gpu_clocks_throttled", "00000000:18:00.0", [2, 4])
    assert finding.detail == "HW Slowdown active: the GPU's clocks are held down"


def test_nvidia_smi_q_uncorrectable_ecc_count_is_a_finding_and_zero_is_not():
    text = "GPU 00000000:3B:00.0\n    ECC Errors\n        Volatile\n            DRAM Uncorrectable : 0\n"
    assert rules.triage(text).findings == []
    (finding,) = rules.triage(text.replace(": 0", ": 3")).findings
    assert (finding.problem, finding.gpu, finding.lines) == ("ecc_uncorrectable", "00000000:3B:00.0", [2, 3, 4])
    assert finding.detail == "Volatile DRAM Uncorrectable: 3"


def test_an_xid_line_quoting_another_problem_stays_an_xid():
    line = (
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."
    )
    (finding,) = rules.triage(line + "\n").findings
    assert (finding.problem, finding.xid) == ("xid", 63)
    assert finding.detail.startswith("Xid 63 (ECC page retirement or row remapping recording event): Row Remapper")


def _only(relative, problem=None):
    findings = [f for f in rules.triage(real(relative)).findings if problem in (None, f.problem)]
    assert len(findings) == 1, findings
    return findings[0]


def test_watchdog_timeouts_are_one_finding_per_rank_with_the_collective():
    report = rules.triage(
        real(
            "pytorch-nccl/watchdog-allreduce-timeout-600000ms-exception-detected-pg-guid-default-pg-basicsr-issue737-partial.txt"
        )
    )

    assert [(f.rank, f.lines) for f in report.findings] == [(1, [1, 2]), (0, [3, 4]), (2, [5])]
    assert report.findings[0].detail == "ALLREDUCE (SeqNum 808) ran 600020 ms, past its 600000 ms timeout"


def test_ray_prefixed_teardown_sequence_is_cited_whole_at_its_rank():
    finding = _only(
        "pytorch-nccl/watchdog-alltoall-full-teardown-sequence-one-rank-ray-workerdict-prefix-deepresearcher-issue16-partial.txt"
    )
    assert (finding.rank, finding.lines) == (3, [1, 2, 3, 4, 5])
    assert "ALLTOALL" in finding.detail


def test_a_dump_signal_from_another_rank_points_at_the_rank_that_timed_out():
    finding = _only(
        "pytorch-nccl/fr-dump-signal-collective-timeout-local-and-remote-rank-vllm-omni-issue2928-partial.txt"
    )
    assert (finding.rank, finding.lines) == (1, [1, 2])


def test_flight_recorder_names_the_missing_rank():
    finding = _only(
        "pytorch-nccl/torchfrtrace-not-all-ranks-joining-collective-missing-rank-pytorch-tutorial-flight-recorder.txt"
    )
    assert finding.rank == 1
    assert finding.excerpt[-1] == "missing ranks: {1}"
    assert "nccl:all_reduce" in finding.detail


def test_torchrun_summary_gives_the_root_cause_rank_host_and_signal():
    finding = _only(
        "pytorch-nccl/torchrun-childfailederror-sigkill-exitcode-minus9-no-other-failures-accelerate-cppo-issue6-partial.txt"
    )
    assert finding.rank == 0
    assert finding.node == "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert "exit code -9 (signal 9, SIGKILL)" in finding.detail
    assert "  exitcode  : -9 (pid: 14750)" in finding.excerpt


def test_a_summary_cut_before_its_root_cause_joins_the_agents_line_and_names_no_rank():
    finding = _only(
        "pytorch-nccl/torchrun-elastic-agent-glog-failed-exitcode-minus9-local-rank5-traceback-robomamba-issue10-partial.txt"
    )
    assert finding.rank is None  # local_rank 5 is not the global rank: not guessed
    assert finding.lines[0] == 1 and "local_rank 5" in finding.detail
    assert "test.py FAILED" in finding.excerpt


def test_ib_completion_errors_explain_the_status_and_name_the_nic_and_peer():
    first, second = rules.triage(
        real("nccl-warn/net-ib-error4-vendor-err-81-old-format-h100-ib0-nccl-issue928-partial.txt")
    ).findings
    assert (first.node, first.gpu, first.nic, first.peer) == ("H100-1", "1", "ib0", "fe80::966d:ae03:8b:df50")
    assert (second.node, second.gpu) == ("H100-5", "3")
    assert "status 4 (IBV_WC_LOC_PROT_ERR" in first.detail and "vendor err 81" in first.detail

    status12 = _only("nccl-tests/nccl-warn-net-ib-status12-h100-partial-nccl-issue1698.txt")
    assert (status12.node, status12.gpu, status12.nic) == ("mycl-g2", "6", "mlx5_10")
    assert "IBV_WC_RETRY_EXC_ERR" in status12.detail and status12.count == 2


def test_socket_errors_name_the_peer_that_could_not_be_reached():
    finding = _only("nccl-warn/socket-start-connect-abort-bootstrap-2x8-h100-k8s-net1-nccl-issue1016-partial.txt")
    assert finding.peer == "192.168.102.1" and finding.gpu == "3"
    assert finding.detail == "connect to 192.168.102.1 failed: Software caused connection abort"


def test_xids_are_grouped_per_gpu_and_number_with_the_catalogue_meaning():
    xid13, xid43 = rules.triage(
        real("dmesg-xid/gpud-dmesg-decode-iso-xid13-sm-warp-exceptions-then-xid43-pt_main_thread-partial.txt")
    ).findings
    assert (xid13.xid, xid13.gpu, xid13.count, xid13.lines) == (13, "0000:38:00", 16, list(range(1, 17)))
    assert xid13.detail.startswith("Xid 13 (Graphics Engine Exception): ")
    assert (xid43.xid, xid43.lines) == (43, [17])

    xid119 = _only("dmesg/gpud-dmesg-with-xid-119.log")
    assert (xid119.xid, xid119.gpu, xid119.count) == (119, "0000:9b:00", 5)
    assert xid119.detail.startswith("Xid 119 (GSP RPC Timeout)")

    plugin = _only(
        "k8s/nvidia-device-plugin-log-xidcriticalerror-xid69-device-marked-unhealthy-k8s-device-plugin-issue189.txt"
    )
    assert (plugin.xid, plugin.gpu, plugin.lines) == (69, "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8", [1, 2])


def test_xid_79_is_gpu_fell_off_bus_and_the_banner_without_xid_is_too():
    text = "[ 9.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
    (finding,) = rules.triage(text).findings
    assert (finding.problem, finding.xid, finding.gpu) == ("gpu_fell_off_bus", 79, "0000:3b:00")

    banner = _only(
        "dmesg-xid/nvrm-fallen-off-bus-multiline-without-xid-probe-failed-open-570.158.01-nvsentinel-issue155.txt"
    )
    assert (banner.problem, banner.gpu, banner.xid, banner.lines) == (
        "gpu_fell_off_bus",
        "0000:b3:00.0",
        None,
        [1, 2, 3],
    )


def test_an_unknown_xid_is_reported_with_its_number_and_no_invented_meaning():
    (finding,) = rules.triage("NVRM: Xid (PCI:0000:3b:00): 999, pid=1, name=x, something new\n").findings
    assert finding.xid == 999
    assert finding.detail == "Xid 999 (not in Rackpilot's Xid catalogue): something new"


def test_pcie_aer_tells_the_gpu_from_the_root_port_and_keeps_the_fatal_error():
    gpu, audio, port = rules.triage(
        real(
            "dmesg-xid/aer-multiple-uncorrected-fatal-sdes-cmpltto-nvidia-cant-recover-dmesg-H-relative-returnn-issue1500.txt"
        )
    ).findings
    assert (gpu.gpu, gpu.device) == ("0000:03:00.0", None)
    assert (audio.gpu, audio.device) == (None, "0000:03:00.1")
    assert port.device == "0000:00:03.0" and "Uncorrected (Fatal)" in port.detail
    assert 8 in port.lines  # the '[14] CmpltTO (First)' line of that error is cited with it


def test_slurm_findings_name_the_node_the_block_or_message_is_about():
    drained, mismatch = rules.triage(
        real(
            "slurm/scontrol-show-node-idle-drain-gres-gpu-count-reported-lower-than-configured-rtx3090-slurm24.05-awsome-distributed-ai-issue195.txt"
        )
    ).findings
    assert drained.node == mismatch.node == "yigou-dev-102-68"
    assert mismatch.detail == "the node reports a GPU count of 0, 1 configured"

    mismatch, drained = rules.triage(
        real("slurm/slurmctld-journal-gres-gpu-count-changed-mig-inval-drain-nodes-magic-castle-issue361.txt")
    ).findings
    assert (mismatch.node, mismatch.lines, drained.node) == ("nodegpu1", [1, 2], "nodegpu1")  # not the controller


def test_nccl_tests_cuda_failure_names_the_host():
    finding = _only("nccl-tests/alltoall_perf-h800-2node-16gpu-illegal-memory-access-nccl-tests-issue355.txt")
    assert finding.node == "node0"
    assert finding.detail == "CUDA error: an illegal memory access was encountered"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        ("[12.5] Out of memory: Killed process 4242 (python) total-vm:1kB", "oom"),
        ("OSError: [Errno 28] No space left on device: '/ckpt/step_1000.pt'", "disk_full"),
        ("OSError: [Errno 122] Disk quota exceeded", "disk_full"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error"),
        ("RuntimeError: CUDA error: unspecified launch failure", "cuda_error"),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc_uncorrectable"),
        ("NVRM: GPU 0000:3b:00.0: Row Remapper: New row marked for remapping, reset gpu to activate.", "row_remap"),
        ("host:1:2 [0] NCCL INFO transport/net_ib.cc:100 NET/IB : IBV_WC_RETRY_EXC_ERR on mlx5_0", "nccl_ib_error"),
        ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed", "nccl_system_error"),
        ("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", "nccl_invalid_usage"),
        (
            "[rank1]:[W1201 10:00:00.000000000 socket.cpp:752] [c10d] The client socket has timed out after 600s "
            "while trying to connect to (gpu001, 29500).",
            "nccl_socket_error",
        ),
    ],
)
def test_one_line_rules(line, problem):
    (finding,) = rules.triage(line + "\n").findings
    assert (finding.problem, finding.lines, finding.excerpt) == (problem, [1], [line])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n   \n",
        "epoch 1 step 10 loss 2.31\nepoch 1 step 20 loss 2.20\n",
        "ssh: connect to host gpu001 port 22: Connection refused\n",  # not NCCL: the socket rule does not fire
        "Exception (either an error or timeout) detected by watchdog at work: 8\n",  # supporting line alone
    ],
)
def test_nothing_recognised_gives_no_findings(text):
    report = rules.triage(text)
    assert report.findings == [] and report.recognised is False


def test_cited_lines_are_capped_but_counted():
    text = "".join(f"NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception {i}\n" for i in range(80))
    (finding,) = rules.triage(text).findings
    assert (len(finding.lines), finding.count) == (rules.MAX_CITED_LINES, 80)


def test_line_numbers_count_blank_lines_and_crlf():
    (finding,) = rules.triage("\r\nstarting\r\n\r\nOSError: [Errno 28] No space left on device\r\n").findings
    assert finding.lines == [4]


def test_the_catalogue_covers_the_xids_operators_meet_with_an_action_for_each():
    required = {13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 121, 140}
    assert required <= set(CATALOGUE)
    for number, info in CATALOGUE.items():
        assert info.number == number and info.name and info.meaning and info.action
        assert info.category in {"application", "driver", "memory", "hardware", "nvlink", "bus"}
    assert CATALOGUE[79].name == "GPU has fallen off the bus"
    assert CATALOGUE[48].name == "Double Bit ECC Error"


def test_read_input_and_triage_agree_on_a_gzip_free_fixture():
    path = REAL / "dmesg" / "gpud-dmesg-with-xid-119.log"
    assert rules.triage(read_input(path)).lines == sum(1 for line in path.read_text().splitlines() if line.strip())


# --- rules for what real failures print without an Xid, an NCCL error or a drain line (issue 27) ---------------


def test_ofi_memory_registration_failure_is_a_system_error_that_explains_rc_12():
    finding = _only(
        "nccl-warn/net-ofi-unable-to-register-memory-rc12-cannot-allocate-memory-pdsh-prefix-efa-nccl-issue563-partial.txt"
    )
    assert (finding.problem, finding.node, finding.gpu, finding.lines) == (
        "nccl_system_error",
        "ip-10-0-87-143",  # NCCL's own prefix, behind the two pdsh addresses
        "5",
        [1],
    )
    assert "RC 12 (ENOMEM" in finding.detail and "ulimit -l" in finding.detail


def test_gsp_heartbeat_timeout_without_an_xid_is_a_firmware_failure():
    finding = _only(
        "dmesg-xid/journal-k-no-hostname-gsp-heartbeat-timed-out-kgsprpcrecvpoll-no-xid-bazzite-issue4449-partial.txt"
    )
    assert (finding.problem, finding.lines, finding.count, finding.xid) == ("gpu_firmware_failure", [3, 4], 2, None)
    assert finding.detail.startswith("the GPU's firmware (GSP) stopped answering the driver (driver's GPU0)")


@pytest.mark.parametrize(
    ("line", "gpu", "said"),
    [
        # open-gpu-kernel-modules#446 (talos kernel log, prefix as published)
        (
            "192.168.11.119: kern: warning: [2026-04-22T21:30:51.803749334Z]: NVRM: _issueRpcAndWait: rpcRecvPoll "
            "timedout for fn 76 sequence 4129!",
            None,
            "rpcRecvPoll timedout for fn 76",
        ),
        (
            "[  118.125454] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:667)",
            "0000:01:00.0",
            "RmInitAdapter failed (0x22:0x56:667)",
        ),
    ],
)
def test_gsp_rpc_timeouts_and_adapter_init_failures(line, gpu, said):
    (finding,) = rules.triage(line + "\n").findings
    assert (finding.problem, finding.gpu) == ("gpu_firmware_failure", gpu)
    assert said in finding.detail


def test_an_xid_119_stays_an_xid_and_nvidia_smi_s_gsp_firmware_version_is_no_failure():
    xid = "[ 2.0] NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response from GPU0 GSP!"
    assert [f.problem for f in rules.triage(xid + "\n").findings] == ["xid"]
    assert rules.triage("    GSP Firmware Version                  : 535.161.08\n").findings == []


def test_nv_err_reset_required_is_a_gpu_that_needs_a_reset():
    finding = _only(
        "dmesg-xid/dmesg-T-gsprmalloc-failed-nv-err-reset-required-0x62-kernel-channel-no-xid-sichek-issue51-partial.txt"
    )
    assert (finding.problem, finding.lines) == ("gpu_reset_required", [2])
    assert "NV_ERR_RESET_REQUIRED" in finding.detail


def test_slurm_unkillable_step_names_the_node_slurm_drains():
    stepd = _only(
        "slurm/slurmd-log-step-cancelled-stepd-terminated-due-to-job-not-ending-with-signals-trixie-issue45.txt"
    )
    assert (stepd.problem, stepd.node, stepd.lines) == ("slurm_unkillable_step", "cn106", [4])
    assert "step 63532.0 on cn106 did not end after SIGKILL" in stepd.detail

    sinfo = _only("slurm/sinfo-R-kill-task-failed-drain-reason-awsome-distributed-ai-issue185.txt")
    assert (sinfo.problem, sinfo.node) == ("slurm_unkillable_step", "ip-10-0-1-23")

    drained, unkillable = rules.triage(
        "NodeName=gpu007 Arch=x86_64 CoresPerSocket=32\n   State=IDLE+DRAIN ThreadsPerCore=1\n"
        "   Reason=Kill task failed [root@2024-01-25T15:12:23]\n"
    ).findings
    assert (drained.problem, unkillable.problem, unkillable.node) == ("node_drained", "slurm_unkillable_step", "gpu007")


def test_ib_ports_down_polling_or_disabled_are_findings_per_device():
    down = rules.triage(real("infiniband/gpud-ibstat.47.0.h100.some.down.with.polling.1.txt")).findings
    assert [(f.nic, f.lines) for f in down] == [("mlx5_11", [52, 59, 60, 61]), ("mlx5_5", [120, 127, 128, 129])]
    assert down[0].detail.startswith("mlx5_11 port 1: state DOWN, physical state Polling: no link")
    assert "physical state Disabled" in down[1].detail

    linkup = _only("infiniband/ibstat-mlx5_7-state-down-physical-linkup-sriov-ib-pod-network-operator-issue249.txt")
    assert "no subnet manager" in linkup.detail

    devinfo = _only("infiniband/ibv_devinfo-h100-cx7-mlx5_0-port-down-deepep-issue60-partial.txt")
    assert (devinfo.nic, devinfo.lines) == ("mlx5_0", [1, 11, 12])

    status = "Infiniband device 'mlx5_3' port 1 status:\n\tstate:\t\t 1: DOWN\n\tphys state:\t 2: Polling\n"
    (ibstatus,) = rules.triage(status).findings
    assert (ibstatus.nic, ibstatus.lines) == ("mlx5_3", [1, 2, 3])


def test_active_ports_and_a_state_line_outside_a_device_block_give_nothing():
    assert rules.triage(real("infiniband/gpud-ibstat.47.0.h100.all.active.0.txt")).findings == []
    assert rules.triage("State: Down\nPhysical state: Polling\n").findings == []


# --- smaller: where a finding happened -------------------------------------------------------------------------

# nccl#1405 (kp-ddp-worker-0), as a terminal or a tracker wraps it: the vendor error goes to the next line.
IB_WRAPPED = (
    "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "10.216.210.236<54862> with status=12 opcode=0 len=0\n"
    "vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f\n"
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6\n"
)


def test_a_net_ib_warning_wrapped_onto_two_lines_keeps_its_vendor_error():
    (finding,) = rules.triage(IB_WRAPPED).findings
    assert (finding.lines, finding.count, finding.peer) == ([1, 2], 1, "10.216.210.236")
    assert finding.detail.endswith(
        "IBV_WC_RETRY_EXC_ERR, transport retry counter exceeded: the peer did not acknowledge), vendor err 129"
    )


def test_a_wrapped_watchdog_timeout_is_read_with_its_continuation():
    # milabench#269: '[rank14]:[E909 …] [Rank 14] Watchdog caught collective operation timeout: ' + 'WorkNCCL(…)'
    text = (
        "[rank14]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank 14] Watchdog caught collective operation "
        "timeout: \nWorkNCCL(SeqNum=2070, OpType=REDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 "
        "milliseconds before timing out.\n"
    )
    (finding,) = rules.triage(text).findings
    assert (finding.rank, finding.lines) == (14, [1, 2])
    assert finding.detail == "REDUCE (SeqNum 2070) ran 600034 ms, past its 600000 ms timeout"


def test_an_unprefixed_line_after_a_finding_is_not_swallowed_into_it():
    text = (
        "node1:1:2 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : "
        "Software caused connection abort\nTraceback (most recent call last):\n"
    )
    (finding,) = rules.triage(text).findings
    assert finding.lines == [1] and finding.detail.endswith("Software caused connection abort")


@pytest.mark.parametrize(
    ("line", "gpu"),
    [
        (  # vLLM worker, torch >= 2.1 wording
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total "
            "capacity of 23.56 GiB of which 15.88 MiB is free.",
            "3",
        ),
        (  # torch 2.0's misspelling
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 1 has a total capacty "
            "of 6.00 GiB of which 0 bytes is free.",
            "1",
        ),
        (  # torch < 2.0
            "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 2; 15.90 GiB total capacity; 13.13 "
            "GiB already allocated; 415.88 MiB free; 14.80 GiB reserved in total by PyTorch)",
            "2",
        ),
        (
            "[W1009 21:05:01.314535354 CUDACachingAllocator.cpp:3934] memory allocation failed with OOM on device 3 "
            "while trying to allocate 67108864 bytes (free: 20316160, total: 23745396736).",
            "3",
        ),
    ],
)
def test_an_oom_finding_names_the_gpu_the_message_names(line, gpu):
    (finding,) = rules.triage(line + "\n").findings
    assert (finding.problem, finding.gpu) == ("oom", gpu)


def test_a_socket_finding_takes_the_interface_of_a_link_local_peer_or_the_one_nccl_uses():
    scoped = (
        "n122:12246:12397 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "fe80::966d:ae03:b2:62c4%ib1<43575> failed : Connection refused\n"
    )
    (finding,) = rules.triage(scoped).findings
    assert (finding.peer, finding.nic) == ("fe80::966d:ae03:b2:62c4", "ib1")

    # nccl#975: the node's bootstrap uses ib1 only; the failure names the peer's address alone.
    using = (
        "n122-246-085:12246:12246 [0] NCCL INFO Bootstrap : Using ib1:fe80::966d:ae03:b2:62c4%ib1<0>\n"
        "n122-246-085:12246:12397 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.2<45763> failed : Connection refused\n"
    )
    (finding,) = rules.triage(using).findings
    assert (finding.nic, finding.lines, finding.count) == ("ib1", [1, 2], 1)


# The desync report as ProcessGroupNCCL logs it (retrieveDesyncReport in c10d's TraceUtils.h: tab-indented lines
# after the glog line that announces it).
DESYNC_LAGGING = (
    "[rank3]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:1582] [PG 0 Rank 3] Timeout at NCCL work: 124, last "
    "enqueued NCCL work: 124, last completed NCCL work: 123.\n"
    "\t - [3] Timeout at collective: ALLREDUCE, #124\n"
    "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
    "\t   - [5] joined but didn't finish collective #123 (count from 1)\n"
    "\t     [0, 1, 2, 3, 4, 6, 7] finished collective #123, but didn't join collective #124 (count from 1)\n"
    "\t - Snapshot of ranks' latest states:\n"
)


def test_a_desync_report_surfaces_the_lagging_rank():
    timeout, lagging = rules.triage(DESYNC_LAGGING).findings
    assert (timeout.problem, timeout.rank) == ("nccl_watchdog_timeout", 3)
    assert (lagging.problem, lagging.rank, lagging.lines) == ("collective_not_joined", 5, [2, 4, 5])
    assert lagging.detail.startswith("rank 5 joined collective #123 and did not finish it")

    never = (
        "\t - [0] Timeout at collective: BROADCAST, #1\n\t - To our best knowledge, ranks [6, 7] are the lagging "
        "ranks that caused this timeout. They never joined any collectives\n"
    )
    (finding,) = rules.triage(never).findings
    assert (finding.rank, finding.lines) == (None, [1, 2])
    assert finding.detail == "ranks 6, 7 never joined any collective (desync report of rank 0)"


def test_a_desync_report_where_every_rank_joined_names_no_lagging_rank():
    text = (
        "\t - [0] Timeout at collective: _ALLGATHER_BASE, #39\n\t   - [0, 1, 2, 3] joined but didn't finish "
        "collective #39 (count from 1)\n"
    )
    assert rules.triage(text).findings == []


def test_a_progress_bar_s_carriage_returns_do_not_shift_the_cited_line():
    # tqdm redraws its bar with bare carriage returns; grep -n and an editor's line numbers count only newlines.
    text = (
        "starting\n"
        "  0%|          | 0/20 [00:00<?, ?it/s]\r  5%|▌         | 1/20 [00:01<00:19,  1.00it/s]\r"
        " 10%|█         | 2/20 [00:02<00:18,  1.00it/s]\n"
        "OSError: [Errno 28] No space left on device: '/ckpt/step_2.pt'\n"
    )
    report = rules.triage(text)
    (finding,) = report.findings
    assert (finding.lines, report.lines) == ([3], 3)
    assert finding.excerpt == ["OSError: [Errno 28] No space left on device: '/ckpt/step_2.pt'"]

    (bar,) = rules.triage(
        "step 1\r\x1b[2KRuntimeError: CUDA error: an illegal memory access was encountered\n"
    ).findings
    assert (bar.lines, bar.excerpt) == (
        [1],
        ["step 1\rRuntimeError: CUDA error: an illegal memory access was encountered"],
    )
