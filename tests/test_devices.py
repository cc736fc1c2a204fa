import os

import pytest

from bench.spec import devices
from bench.spec.devices import Machine, place
from bench.spec.task import SpecError

TWO_CORES = Machine(cores=(0, 1))
EIGHT_GPUS = Machine(cores=tuple(range(16)), gpus=tuple(map(str, range(8))), gpu_names=("H100",) * 8)


def test_cpu_slots_are_one_core_each_and_disjoint():
    placement = place("cpu", 1, 2, TWO_CORES)
    assert placement.nodes[0].cpu_slots == ((0,), (1,))
    assert placement.nodes[0].cuda_visible is None
    assert not placement.oversubscribed


def test_more_slots_than_cores_is_allowed_and_flagged():
    placement = place("cpu", 1, 4, TWO_CORES)
    assert placement.oversubscribed and placement.warnings
    assert placement.nodes[0].cpu_slots == ((0,), (1,), (0,), (1,))


def test_cores_per_slot_sizes_threads():
    placement = place("cpu", 1, 2, Machine(cores=(0, 1, 2, 3)), cores_per_slot=2)
    assert placement.nodes[0].cpu_slots == ((0, 1), (2, 3))
    assert placement.nodes[0].threads == 2


def test_single_process_variant_gets_all_its_slots_cores():
    placement = place("cpu", 1, 2, Machine(cores=(0, 1, 2, 3)), processes_per_node=1)
    assert placement.nodes[0].cpu_slots == ((0, 1),)


def test_fake_nodes_split_gpus_and_cores():
    placement = place("cuda", 2, 4, EIGHT_GPUS)
    assert [n.cuda_visible for n in placement.nodes] == [("0", "1", "2", "3"), ("4", "5", "6", "7")]
    cores = [c for n in placement.nodes for slot in n.cpu_slots for c in slot]
    assert len(cores) == len(set(cores)) == 16  # every process its own cores, none shared


def test_more_gpus_than_exist_is_refused():
    with pytest.raises(SpecError, match="asked for 16 GPUs but 8 are visible"):
        place("cuda", 2, 8, EIGHT_GPUS)


@pytest.mark.parametrize("listing, names, memory", [
    ("0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA H100 80GB HBM3, 81559\n", ("NVIDIA H100 80GB HBM3",) * 2, (81559, 81559)),
    ("0, GRID A100-40C, [N/A]\n", ("GRID A100-40C",), ()),  # a GPU whose size nvidia-smi cannot say still counts
    ("WARNING: infoROM is corrupted at gpu 0000:04:00.0\n0, Tesla T4, 15360\n", ("Tesla T4",), (15360,)),
])
def test_discovery_reads_each_gpu_and_its_memory_from_nvidia_smi(tmp_path, monkeypatch, listing, names, memory):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    machine = devices.discover()
    assert machine.gpus == tuple(str(i) for i in range(len(names)))
    assert machine.gpu_names == names and machine.gpu_memory_mib == memory
