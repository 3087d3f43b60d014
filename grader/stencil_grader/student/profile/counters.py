"""The figures of one profiled launch from Nsight Compute's counters (derive names each figure's
counters; grader/README.md, section 8, what each means).  Units: bytes, GB/s (1 GB = 1e9 bytes),
milliseconds; shares are fractions.  Compulsory bytes: the kind's bytes per cell (grader/kinds.json)
of the kernel's launcher times the bench grid's cells.  The ideal sectors per request of a warp's 32
coalesced accesses of W bytes is W (CUDA C++ Best Practices Guide, "Coalesced Access to Global
Memory"); load amplification is L1 bytes loaded per DRAM byte read (about 1 when each input is loaded
once, about 5 when each thread loads its five neighbours itself)."""

from __future__ import annotations

import re

from .common import bench_cells, build_figures

#: What limits occupancy, from the blocks per SM each resource allows.
LIMITS = (("registers", "launch__occupancy_limit_registers"),
          ("shared memory", "launch__occupancy_limit_shared_mem"),
          ("block size (warps per SM)", "launch__occupancy_limit_warps"),
          ("blocks per SM", "launch__occupancy_limit_blocks"))
_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)_per_issue_active\.ratio$")
STALLS_SHOWN = 3


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def launcher_of(kernel: str, label: str, launchers: list[dict]) -> dict:
    """The launcher a kernel most likely belongs to: the one whose name shares a word of at least
    4 letters with the kernel's (lab 7: residual_kernel -> residual_norm2), else the only one, else
    the one with the most compulsory bytes per cell (the conservative choice: it makes no traffic
    look excessive)."""
    if len(launchers) == 1:
        return launchers[0]
    words = set(re.findall(r"[a-z]{4,}", label.lower()))
    for launcher in launchers:
        if words & set(re.findall(r"[a-z]{4,}", launcher["name"].lower())):
            return launcher
    return max(launchers, key=lambda x: x["bytes_per_cell"])


def derive(row: dict, fact: dict, inputs: dict, total_ms: float) -> dict:
    """{figure: value, None when its counters are missing} of one parse_raw_csv row; fact: its kernel's
    static_facts entry (or {}); total_ms: the profiled launches' summed time."""
    get = row["metrics"].get
    bench = inputs["bench"]
    cells = bench_cells(bench)
    launcher = launcher_of(row["name"], fact.get("label", row["name"]), inputs["launchers"])
    compulsory = launcher["bytes_per_cell"] * cells
    duration_ns = get("gpu__time_duration.sum")
    duration_ms = duration_ns / 1e6 if duration_ns else None
    dram_read, dram_write = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
    dram = dram_read + dram_write if dram_read is not None and dram_write is not None else None
    dram_gbps = _ratio(dram, duration_ms * 1e6 if duration_ms else None)

    gld_sectors = get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    gst_sectors = get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
    gld_spr = _ratio(gld_sectors, get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"))
    gst_spr = _ratio(gst_sectors, get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"))
    # A warp's 32 coalesced accesses of W bytes fill W 32-byte sectors.
    gld_ideal = float(max(4, fact.get("widest_load") or 4))
    gst_ideal = float(max(4, fact.get("widest_store") or 4))
    excesses = [x for x in (_ratio(gld_spr, gld_ideal), _ratio(gst_spr, gst_ideal)) if x is not None]

    def both(prefix: str) -> float | None:
        vals = [v for v in (get(f"{prefix}_op_ld.sum"), get(f"{prefix}_op_st.sum")) if v is not None]
        return sum(vals) if vals else None

    local_sectors = both("l1tex__t_sectors_pipe_lsu_mem_local")
    all_sectors = sum(x for x in (local_sectors, gld_sectors, gst_sectors) if x is not None)
    conflicts = both("l1tex__data_bank_conflicts_pipe_lsu_mem_shared")
    wavefronts = both("l1tex__data_pipe_lsu_wavefronts_mem_shared")

    limits = {what: get(metric) for what, metric in LIMITS if get(metric) is not None}
    least = min(limits.values()) if limits else None
    limiters = [what for what, v in limits.items() if v == least]

    stalls = {}
    for key, value in row["metrics"].items():
        if s := _STALL.match(key):
            stalls.setdefault(s.group(1), value)
    ranked = sorted(stalls.items(), key=lambda kv: -kv[1])
    total_inst = get("smsp__inst_executed.sum")
    threads = (get("launch__grid_size") or 0) * (get("launch__block_size") or 0)
    return {
        "duration_ms": duration_ms,
        "time_share": _ratio(duration_ms, total_ms),
        "cells": cells,
        "launcher": launcher["name"],
        "compulsory_bytes": compulsory,
        "dram_read_bytes": dram_read, "dram_write_bytes": dram_write, "dram_bytes": dram,
        "dram_over_compulsory": _ratio(dram, compulsory),
        "dram_gbps": dram_gbps,
        "copy_gbps": bench.get("copy_gbps"),
        "dram_of_copy": _ratio(dram_gbps, bench.get("copy_gbps")),
        "gld_sectors_per_request": gld_spr, "gld_ideal_sectors": gld_ideal,
        "gst_sectors_per_request": gst_spr, "gst_ideal_sectors": gst_ideal,
        "gld_excess": _ratio(gld_spr, gld_ideal), "gst_excess": _ratio(gst_spr, gst_ideal),
        "global_excess": max(excesses) if excesses else None,
        "load_amplification": _ratio(gld_sectors * 32 if gld_sectors is not None else None, dram_read),
        "local_bytes": local_sectors * 32 if local_sectors is not None else None,
        "local_share": _ratio(local_sectors, all_sectors) if local_sectors is not None else None,
        "shared_wavefronts": wavefronts,
        "shared_conflict_share": _ratio(conflicts, wavefronts) if wavefronts else (0.0 if wavefronts == 0 else None),
        "achieved_occupancy": get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical_occupancy": get("sm__maximum_warps_per_active_cycle_pct"),
        "registers": get("launch__registers_per_thread") or fact.get("registers"),
        "block_size": get("launch__block_size"),
        "smem_per_block": sum(v for v in (get("launch__shared_mem_per_block_static"),
                                          get("launch__shared_mem_per_block_dynamic")) if v is not None)
        if get("launch__shared_mem_per_block_static") is not None else None,
        "xu_share": _ratio(get("smsp__inst_executed_pipe_xu.sum"), total_inst),
        "top_stall": ranked[0][0] if ranked else None,
        "top_stall_cycles": ranked[0][1] if ranked else None,
        "stalls": ranked[:STALLS_SHOWN],
    } | build_figures(fact, limiters, threads / cells if threads and cells else None)

