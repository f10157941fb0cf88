"""Generated deployment artefacts: every file is validated, and broken ones are refused with a useful message."""

import configparser
import copy
import dataclasses
import json
import shlex

import pytest
import yaml

from apps.deployments import artefacts
from apps.deployments.artefacts import ARTEFACT_NAMES, ArtefactError, options_errors, render, render_all, validate
from apps.inventory.choices import MTU_MAX, MTU_MIN

OPTIONS = {
    "versions": {
        "driver": "580.159.04",
        "cuda": "13.0",
        "nccl": "2.28.3",
        "openmpi": "4.1.6",
        "pytorch": "2.9.0",
        "tensorflow": "2.19.0",
    },
    "network": {"mtu": 9000, "rss_queues": 32, "rdma_priority": 3, "dscp": 26, "ecn": True},
    "nccl": {"socket_ifname": "ens1np0,ens2np0", "ib_hca": "mlx5_0,mlx5_1", "debug": "INFO"},
    "cgroup": {"slice": "training.slice", "system_cpus_per_socket": 2, "system_memory_gib": 32},
    "scheduler": {"scheduler_name": "rackpilot-gpu", "placement": "leaf", "idle_reclaim_minutes": 30},
    "checkpoints": {"every_steps": 1000, "mount": "/checkpoints", "tier": "hot", "keep_last": 3},
    "environment": {"WANDB_PROJECT": "llama-pretrain"},
}


def node(hostname, *, leaf="leaf-r04-a", cpu_count=224, memory_gib=2048):
    return {
        "hostname": hostname,
        "rack": "r04",
        "leaf": leaf,
        "numa_nodes": 2,
        "cpu_count": cpu_count,
        "memory_gib": memory_gib,
        "gpus": 8,
        "data_nics": ["ens1np0", "ens2np0"],
        "rdma_devices": [f"mlx5_{index}" for index in range(8)],
    }


NODES = [node("gpu025"), node("gpu026"), node("gpu027", leaf="leaf-r04-b")]


def by_name(options=OPTIONS, nodes=NODES):
    return {artefact.name: artefact for artefact in render_all(options, nodes, deployment_name="h200-r04")}


def with_options(**sections):
    options = copy.deepcopy(OPTIONS)
    for section, values in sections.items():
        options[section] = {**options.get(section, {}), **values}
    return options


def test_render_all_returns_every_artefact_in_order_and_each_revalidates():
    rendered = render_all(OPTIONS, NODES, deployment_name="h200-r04")

    assert [artefact.name for artefact in rendered] == list(ARTEFACT_NAMES)
    for artefact in rendered:
        assert artefact.content.endswith("\n")
        assert artefact.description
        validate(artefact)
        if artefact.media_type == "application/yaml":
            assert yaml.safe_load(artefact.content)
            assert "&id" not in artefact.content, "no YAML anchors in files people read"


def test_missing_optional_keys_get_defaults():
    rendered = render_all({"nccl": {"socket_ifname": "ens1np0"}}, NODES, deployment_name="h200-r04")

    assert len(rendered) == len(ARTEFACT_NAMES)
    checkpoint = yaml.safe_load(next(a for a in rendered if a.name == "checkpoints").content)
    assert checkpoint["directory"] == "/checkpoints/h200-r04"


def test_nccl_conf_uses_exact_names_and_roce_traffic_class():
    lines = dict(line.split("=", 1) for line in by_name()["nccl-conf"].content.splitlines())

    # "=" makes NCCL match exactly, so mlx5_1 does not also pick mlx5_10.
    assert lines["NCCL_SOCKET_IFNAME"] == "=ens1np0,ens2np0"
    assert lines["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    assert lines["NCCL_IB_GID_INDEX"] == "3"
    assert lines["NCCL_IB_TC"] == "104"  # DSCP 26 in the upper six bits of the traffic class
    assert lines["NCCL_IB_SL"] == "3"
    assert lines["NCCL_DEBUG"] == "INFO"
    assert lines["NCCL_DEBUG_SUBSYS"] == "INIT,NET"


@pytest.mark.parametrize(
    "content",
    ["NCCL_IB_TC=104\nNCCL_IB_TCC=1\n", "NCCL_IB_TC\n", "NCCL_IB_TC=104\nNCCL_IB_TC=8\n", "NCCL_IB_TC=\n"],
)
def test_nccl_conf_validation_refuses_unknown_or_malformed_lines(content):
    artefact = dataclasses.replace(by_name()["nccl-conf"], content=content)

    with pytest.raises(ArtefactError) as error:
        validate(artefact)
    assert error.value.name == "nccl-conf"


def test_nccl_hca_missing_on_a_node_is_refused():
    options = with_options(nccl={"ib_hca": "mlx5_0,mlx5_9"})

    with pytest.raises(ArtefactError, match="mlx5_9"):
        render("nccl-conf", options, NODES, deployment_name="h200-r04")


def test_environment_exports_cuda_paths_and_xla():
    parsed = artefacts.parse_environment(by_name()["environment"].content)

    assert parsed["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert parsed["PATH"] == "/usr/local/cuda-13.0/bin:${PATH}"
    assert parsed["LD_LIBRARY_PATH"] == "/usr/local/cuda-13.0/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
    assert parsed["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2"
    assert parsed["WANDB_PROJECT"] == "llama-pretrain"


@pytest.mark.parametrize(
    "value",
    ["it's", 'say "hi"', "$(rm -rf /)", "`id`", "${HOME}", "a;b && c | d", "back\\slash", "", "  spaced  "],
)
def test_environment_values_are_quoted_and_parse_back_unchanged(value):
    options = with_options(environment={"WANDB_NOTES": value})

    content = render("environment", options, NODES, deployment_name="h200-r04").content

    line = next(line for line in content.splitlines() if line.startswith("export WANDB_NOTES="))
    assert shlex.split(line) == ["export", f"WANDB_NOTES={value}"]
    assert artefacts.parse_environment(content)["WANDB_NOTES"] == value


@pytest.mark.parametrize(
    "line", ["export LD_PRELOAD=/tmp/x.so", "export PROMPT_COMMAND=id", "export WANDB_NOTES='a\x1bb'"]
)
def test_environment_validation_refuses_a_stored_file_the_plan_could_not_have_made(line):
    artefact = by_name()["environment"]
    corrupted = dataclasses.replace(artefact, content=artefact.content + line + "\n")

    with pytest.raises(ArtefactError) as error:
        validate(corrupted)
    assert error.value.name == "environment"


def test_environment_validation_refuses_command_substitution():
    artefact = by_name()["environment"]
    corrupted = dataclasses.replace(artefact, content=artefact.content + "export EVIL=$(curl example.com)\n")

    with pytest.raises(ArtefactError, match="unsafe shell text"):
        validate(corrupted)


def test_cgroup_slice_parses_and_reserves_system_cpus_and_memory():
    artefact = by_name()["cgroup-slice"]
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(artefact.content)

    assert artefact.filename == "/etc/systemd/system/training.slice"
    assert parser["Slice"]["AllowedCPUs"] == "2-111,114-223"
    assert parser["Slice"]["MemoryMax"] == "2016G"
    assert parser["Slice"]["AllowedMemoryNodes"] == "0-1"
    assert "DeviceAllow=char-nvidia* rw" in artefact.content
    assert "DeviceAllow=/dev/infiniband/rdma_cm rw" in artefact.content
    assert "--system-reserved=memory=32Gi" in artefact.content


def test_cgroup_slice_is_rendered_for_the_smallest_node():
    nodes = [*NODES, node("gpu030", cpu_count=192, memory_gib=1024)]

    artefact = render("cgroup-slice", OPTIONS, nodes, deployment_name="h200-r04")

    assert "AllowedCPUs=2-95,98-191" in artefact.content
    assert "MemoryMax=992G" in artefact.content
    assert "gpu025" in artefact.content  # the larger nodes are named in the header


@pytest.mark.parametrize(
    ("replace", "by"),
    [
        ("MemoryMax=2016G", "MemoryMaximum=2016G"),
        ("MemoryMax=2016G", "MemoryMax=2016G\nMemoryMax=1G"),
        ("[Slice]", "[Service]"),
    ],
)
def test_cgroup_slice_validation_refuses_undocumented_or_repeated_keys(replace, by):
    artefact = by_name()["cgroup-slice"]
    corrupted = dataclasses.replace(artefact, content=artefact.content.replace(replace, by))

    with pytest.raises(ArtefactError) as error:
        validate(corrupted)
    assert error.value.name == "cgroup-slice"


def test_kube_scheduler_config_packs_gpus_and_prefers_the_placement_label():
    config = yaml.safe_load(by_name()["kube-scheduler"].content)
    profile = config["profiles"][0]
    args = {entry["name"]: entry["args"] for entry in profile["pluginConfig"]}

    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert profile["schedulerName"] == "rackpilot-gpu"
    assert args["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"
    assert args["InterPodAffinity"]["hardPodAffinityWeight"] == 10
    preference = args["NodeAffinity"]["addedAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert preference["preference"]["matchExpressions"][0]["key"] == "rackpilot.io/leaf"


def test_kube_scheduler_numa_placement_prefers_numa_aligned_nodes():
    options = with_options(scheduler={"placement": "numa"})

    content = render("kube-scheduler", options, NODES, deployment_name="h200-r04").content

    assert "rackpilot.io/numa-aligned" in content


def _corrupt_yaml(artefact, change):
    document = yaml.safe_load(artefact.content)
    change(document)
    return dataclasses.replace(artefact, content=yaml.safe_dump(document))


def test_kube_scheduler_misspelled_profiles_key_fails():
    artefact = by_name()["kube-scheduler"]
    corrupted = dataclasses.replace(artefact, content=artefact.content.replace("\nprofiles:", "\nprofile:"))

    with pytest.raises(ArtefactError, match="profile"):
        validate(corrupted)


def test_kube_scheduler_unknown_plugin_args_field_fails():
    def add_field(document):
        document["profiles"][0]["pluginConfig"][1]["args"]["hardPodAffinityWieght"] = 5

    with pytest.raises(ArtefactError, match="hardPodAffinityWieght"):
        validate(_corrupt_yaml(by_name()["kube-scheduler"], add_field))


def test_kube_scheduler_unknown_scoring_strategy_fails():
    def change(document):
        document["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = "MostAllocatedPlease"

    with pytest.raises(ArtefactError, match="scoringStrategy"):
        validate(_corrupt_yaml(by_name()["kube-scheduler"], change))


def test_pod_affinity_is_accepted_by_the_kubernetes_client_models():
    from kubernetes.client import ApiClient

    document = yaml.safe_load(by_name()["pod-affinity"].content)
    template = ApiClient().deserialize(json.dumps(document), "V1PodTemplateSpec", "application/json")

    spec = template.spec
    assert spec.scheduler_name == "rackpilot-gpu"
    anti = spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert anti.topology_key == "kubernetes.io/hostname"
    leaf = spec.affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution[0]
    assert leaf.pod_affinity_term.topology_key == "rackpilot.io/leaf"
    assert spec.tolerations[0].key == "nvidia.com/gpu"
    assert spec.containers[0].name == "trainer"
    assert spec.containers[0].resources.limits == {"nvidia.com/gpu": "8"}


def test_pod_affinity_image_comes_from_options():
    options = {**OPTIONS, "image": "nvcr.io/nvidia/pytorch:25.09-py3"}

    content = render("pod-affinity", options, NODES, deployment_name="h200-r04").content

    assert "image: nvcr.io/nvidia/pytorch:25.09-py3" in content


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["spec"].update(schedulerNam="x"), "spec.schedulerNam"),
        (lambda d: d["spec"]["affinity"]["podAntiAffinity"].update(requiredDuringScheduling=[]), "requiredDuring"),
        (lambda d: d["spec"]["containers"][0]["resources"].update(limit={}), "resources.limit"),
        (lambda d: d["spec"]["tolerations"][0].update(efect="NoSchedule"), "tolerations[0].efect"),
    ],
)
def test_pod_affinity_with_unknown_key_fails(change, field):
    with pytest.raises(ArtefactError, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate(_corrupt_yaml(by_name()["pod-affinity"], change))


def test_pod_affinity_with_wrong_types_fails():
    def change(document):
        document["spec"]["containers"][0]["ports"] = "8080"

    with pytest.raises(ArtefactError, match="V1PodTemplateSpec"):
        validate(_corrupt_yaml(by_name()["pod-affinity"], change))


def test_node_labels_map_hostnames_to_valid_labels():
    labels = yaml.safe_load(by_name()["node-labels"].content)

    assert set(labels) == {"gpu025", "gpu026", "gpu027"}
    assert labels["gpu027"] == {
        "rackpilot.io/rack": "r04",
        "rackpilot.io/leaf": "leaf-r04-b",
        "rackpilot.io/numa-aligned": "true",
        "nvidia.com/gpu.count": "8",
    }


@pytest.mark.parametrize("bad_leaf", ["leaf r04", "x" * 64, "-leaf"])
def test_node_labels_refuse_invalid_label_values(bad_leaf):
    with pytest.raises(ArtefactError, match="label value"):
        render("node-labels", OPTIONS, [node("gpu025", leaf=bad_leaf)], deployment_name="h200-r04")


def test_idle_reclaim_is_a_high_node_utilization_policy_on_gpus():
    artefact = by_name()["idle-reclaim"]
    policy = yaml.safe_load(artefact.content)
    plugin_args = {entry["name"]: entry["args"] for entry in policy["profiles"][0]["pluginConfig"]}

    assert policy["apiVersion"] == "descheduler/v1alpha2"
    assert plugin_args["HighNodeUtilization"]["thresholds"] == {"nvidia.com/gpu": 50}
    assert "--descheduling-interval=30m" in artefact.content


def test_idle_reclaim_unknown_plugin_fails():
    def change(document):
        document["profiles"][0]["plugins"]["balance"]["enabled"] = ["HighNodeUtilisation"]

    with pytest.raises(ArtefactError, match="HighNodeUtilisation"):
        validate(_corrupt_yaml(by_name()["idle-reclaim"], change))


def test_checkpoints_point_at_the_deployment_directory():
    checkpoint = yaml.safe_load(by_name()["checkpoints"].content)

    assert checkpoint == {
        "every_steps": 1000,
        "directory": "/checkpoints/h200-r04",
        "tier": "hot",
        "keep_last": 3,
        "format": "torch.distributed.checkpoint",
    }


@pytest.mark.parametrize(
    ("key", "value"), [("every_steps", 0), ("keep_last", 0), ("directory", "checkpoints/run"), ("keep_last", "3")]
)
def test_checkpoints_validation_refuses_bad_values(key, value):
    with pytest.raises(ArtefactError, match=key):
        validate(_corrupt_yaml(by_name()["checkpoints"], lambda document: document.update({key: value})))


def test_options_errors_is_empty_for_good_options():
    assert options_errors(OPTIONS) == {}


@pytest.mark.parametrize("ifname", ["ens1np0,ens 2", "ens1np0;reboot", "averyveryverylongname0"])
def test_interface_name_with_space_or_semicolon_names_the_key(ifname):
    options = with_options(nccl={"socket_ifname": ifname})

    errors = options_errors(options)

    assert set(errors) == {"nccl.socket_ifname"}
    with pytest.raises(ArtefactError) as error:
        render_all(options, NODES, deployment_name="h200-r04")
    assert "nccl.socket_ifname" in error.value.errors


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("network", "mtu", MTU_MIN - 1),
        ("network", "mtu", MTU_MAX + 1),
        ("network", "rss_queues", 64),
        ("network", "rdma_priority", 8),
        ("network", "dscp", 64),
        ("network", "dscp", True),
        ("checkpoints", "every_steps", 0),
        ("scheduler", "idle_reclaim_minutes", 10081),
        ("scheduler", "placement", "rack"),
        ("nccl", "ib_hca", "mlx5_0 mlx5_1"),
        ("checkpoints", "mount", "relative/path"),
        ("cgroup", "slice", "training"),
    ],
)
def test_out_of_range_options_name_their_key_path(section, key, value):
    errors = options_errors(with_options(**{section: {key: value}}))

    assert f"{section}.{key}" in errors


@pytest.mark.parametrize("mtu", [MTU_MIN, 1500, MTU_MAX])
def test_the_plan_takes_every_mtu_a_nic_may_have(mtu):
    # One range for the inventory's NICs, the plan and the simulator; an MTU under IPv6's 1280 is Linux's to allow.
    assert "network.mtu" not in options_errors(with_options(network={"mtu": mtu}))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("lower_case", "name must match"),
        ("PATH", "set by Rackpilot"),
        ("LD_PRELOAD", "LD_PRELOAD is not allowed"),
        ("EXTRA_VAR", "EXTRA_VAR is not allowed"),
        ("NCCL_TUNER_PLUGIN", "NCCL_TUNER_PLUGIN is not allowed"),
    ],
)
def test_environment_names_are_checked(name, message):
    errors = options_errors(with_options(environment={name: "x"}))

    assert message in errors[f"environment.{name}"]


def test_environment_value_with_newline_is_refused():
    errors = options_errors(with_options(environment={"WANDB_NOTES": "a\nb"}))

    assert "environment.WANDB_NOTES" in errors


def test_unknown_artefact_name_is_refused():
    with pytest.raises(ArtefactError, match="unknown artefact"):
        render("slurm-conf", OPTIONS, NODES, deployment_name="h200-r04")
