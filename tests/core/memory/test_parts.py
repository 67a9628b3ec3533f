"""The one memory vocabulary: parts per place, and the bill an engine's printed figures make."""

from __future__ import annotations

from vramtui.core.logs.diagnose import diagnose_text
from vramtui.core.memory.parts import HOST, JSON_KEYS, PARTS, MemoryBill, bill_from_figures
from vramtui.core.units import MIB

# Per-device buffer lines as llama.cpp prints them with experts on the host (--n-cpu-moe).
LOG = """\
load_tensors: offloaded 49/49 layers to GPU
load_tensors:        CUDA0 model buffer size =  9041.27 MiB
load_tensors:        CUDA1 model buffer size =  8120.00 MiB
load_tensors:   CPU_Mapped model buffer size = 11172.23 MiB
llama_kv_cache:      CUDA0 KV buffer size =   384.00 MiB
llama_kv_cache:      CUDA1 KV buffer size =   384.00 MiB
llama_context:      CUDA0 compute buffer size =   300.75 MiB
llama_context:  CUDA_Host compute buffer size =    72.01 MiB
"""


def test_parts_keep_the_json_keys_users_script_against() -> None:
    assert JSON_KEYS["weights"] == "weights_bytes"
    assert JSON_KEYS["kv_cache"] == "kv_cache_bytes"
    assert JSON_KEYS["compute"] == "compute_buffer_bytes"
    assert set(JSON_KEYS) == set(PARTS)


def test_bill_adds_by_place_and_part() -> None:
    bill = MemoryBill()
    bill.add(0, "weights", 100 * MIB)
    bill.add(0, "weights", 20 * MIB)
    bill.add(1, "kv_cache", 8 * MIB)
    bill.add(HOST, "weights", 50 * MIB)
    assert bill.get("weights") == 120 * MIB  # devices only
    assert bill.get("weights", HOST) == 50 * MIB
    assert bill.total() == 128 * MIB
    assert bill.devices() == [0, 1]
    assert bill.to_dict()["host_bytes"] == 50 * MIB
    assert bill.describe(0) == "weights 120.00 MiB"


def test_bill_from_a_printed_log_splits_devices_and_host() -> None:
    figures = diagnose_text(LOG, backend="llama.cpp").engine_figures
    bill = bill_from_figures(figures)
    assert bill.get("weights", 0) == round(9041.27 * MIB)
    assert bill.get("weights", 1) == int(8120.00 * MIB)
    assert bill.get("weights", HOST) == round(11172.23 * MIB)
    assert bill.get("kv_cache") == 768 * MIB
    assert bill.get("compute", HOST) == round(72.01 * MIB)
    assert bill.devices() == [0, 1]


def test_bill_by_place_is_json_ready_devices_first() -> None:
    bill = MemoryBill()
    bill.add(HOST, "output", 2 * MIB)
    bill.add(1, "kv_cache", 8 * MIB)
    bill.add(0, "weights", 100 * MIB)
    bill.add(0, "margin", 0)  # nothing to bill: no key
    assert bill.by_place() == {
        "0": {"weights_bytes": 100 * MIB},
        "1": {"kv_cache_bytes": 8 * MIB},
        "host": {"output_buffer_bytes": 2 * MIB},
    }
    assert list(bill.by_place()) == ["0", "1", "host"]
