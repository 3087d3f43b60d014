"""The terminal report of a profile: figures per kernel, then the ranked findings."""

from __future__ import annotations

def _fmt(value, spec: str = ".2f", unit: str = "") -> str:
    return "?" if value is None else f"{value:{spec}}{unit}"


def _pct(value, spec: str = ".0f") -> str:
    """A fraction as a percentage ('?' when not measured)."""
    return _fmt(None if value is None else value * 100, spec, "%")


def _mb(value) -> str:
    return _fmt(None if value is None else value / 1e6, ".0f", " MB")


def handout_ref(finding: dict) -> str:
    """'handout 1, "Coalescing and the thread-to-data mapping" (handouts/01-naive-5pt.md)'."""
    number = finding["handout"].split("-", 1)[0].lstrip("0") or "0"
    return f'handout {number}, "{finding["section"]}" (handouts/{finding["handout"]})'


def _ptx_kernel_lines(k: dict) -> list[str]:
    """One kernel of the diagnosis without counters (nocounters.py's figures)."""
    f = k["figures"]
    lines = [f"  kernel {k['label']} (grid {k['grid']}, block {k['block']}, as launched): "
             f"{_fmt(f.get('registers'), '.0f')} registers/thread, {_fmt(f.get('smem_per_block'), ',.0f')} B of "
             f"shared memory per block"]
    if f.get("worst_global_line") is not None:
        lines.append(f"    global     about {_fmt(f['gld_sectors_per_request'], '.1f')} sectors per load request and "
                     f"{_fmt(f['gst_sectors_per_request'], '.1f')} per store (ideal {_fmt(f['gld_ideal_sectors'], '.0f')}); "
                     f"worst: a {f['worst_global_op']} of {f['worst_global_width']:.0f} B per lane with lanes "
                     f"{f['worst_global_stride']} apart, {f['worst_global_figure']:.0f} sectors (kernel.ptx line "
                     f"{f['worst_global_line']:.0f})")
    if f.get("worst_shared_line") is not None:
        lines.append(f"    shared     bank-conflict replays {_pct(f['shared_conflict_share'])} of wavefronts on average; "
                     f"worst: a {f['worst_shared_op']} with lanes {f['worst_shared_stride']} apart, "
                     f"{f['worst_shared_figure']:.0f}-way (kernel.ptx line {f['worst_shared_line']:.0f})")
    lines += [f"    occupancy  theoretical {_fmt(f.get('theoretical_occupancy'), '.0f')}% (limited by "
              f"{f.get('occupancy_limiter') or '?'})",
              f"    spills     ptxas: {_fmt(f.get('spill_bytes'), '.0f')} B per thread",
              f"    div/rem    {_fmt(f.get('div_rem_ptx'), '.0f')} in the machine code, about {_fmt(f.get('div_rem_per_cell'), '.3g')} "
              "per cell",
              f"    analysed   {f.get('accesses_analysed', 0)} loads and stores of the PTX; "
              f"{f.get('accesses_skipped', 0)} whose lanes' addresses it cannot follow"]
    return lines


def render_text(result: dict) -> str:
    """The terminal report of analyse()'s result: figures per kernel, then the findings."""
    b = result["bench"]
    ptx_mode = result.get("mode") == "ptx"
    how = (f"without counters ({result.get('no_counters')}): from the PTX, ptxas's report and the launch audit"
           if ptx_mode else f"Nsight Compute {(result.get('ncu_version') or '?').removeprefix('Version ')}")
    out = [f"Profile of {result['lab']} ({result.get('impl')}) on {result.get('device')}, {how}",
           f"  bench grid {b.get('nx')} x {b.get('ny')} x {b.get('nz')}; copy bandwidth "
           f"{_fmt(b.get('copy_gbps'), '.0f')} GB/s in this run; your launcher {_fmt(b.get('gbps'), '.0f')} GB/s, "
           f"ratio {_fmt(b.get('ratio'), '.3f')}, timed under the profiler (`make check`'s figure is the one "
           "that counts" + (f"; the lab's target is {result['target_ratio']:.2f})"
                            if result.get("target_ratio") is not None else ")")]
    if b.get("output_ok") is False:
        out.append(f"  WARNING: the output under the profiler was wrong ({b.get('output_message')}): "
                   "fix correctness first (`make check`); these figures describe a wrong kernel")
    for k in result["kernels"]:
        f = k["figures"]
        if ptx_mode:
            out += [""] + _ptx_kernel_lines(k)
            continue
        out += ["", f"  kernel {k['label']} (grid {k['grid']}, block {k['block']}): "
                    f"{_fmt(f['duration_ms'], '.3f')} ms, {_pct(f['time_share'])} of the profiled time",
                f"    DRAM       {_mb(f['dram_read_bytes'])} read + {_mb(f['dram_write_bytes'])} written = "
                f"{_fmt(f['dram_over_compulsory'])}x the compulsory {_mb(f['compulsory_bytes'])}; "
                f"{_fmt(f['dram_gbps'], '.0f')} GB/s = {_fmt(f['dram_of_copy'])} of copy",
                f"    global     loads {_fmt(f['gld_sectors_per_request'], '.1f')} sectors/request "
                f"(ideal {_fmt(f['gld_ideal_sectors'], '.0f')}), stores {_fmt(f['gst_sectors_per_request'], '.1f')} "
                f"(ideal {_fmt(f['gst_ideal_sectors'], '.0f')}); loads fetch each DRAM byte "
                f"{_fmt(f['load_amplification'], '.1f')} times through L1",
                f"    shared     {_fmt(f['smem_per_block'], '.0f')} B per block; bank conflicts "
                f"{_pct(f['shared_conflict_share'])} of wavefronts",
                f"    occupancy  achieved {_fmt(f['achieved_occupancy'], '.0f')}%, theoretical "
                f"{_fmt(f['theoretical_occupancy'], '.0f')}% (limited by {f['occupancy_limiter'] or '?'}); "
                f"{_fmt(f['registers'], '.0f')} registers/thread, {_fmt(f['block_size'], '.0f')} threads/block",
                f"    local      {_fmt(f['local_bytes'], '.0f')} B of local-memory traffic "
                f"({_pct(f['local_share'], '.1f')} of L1 sectors); ptxas: {_fmt(f['spill_bytes'], '.0f')} B of "
                "spills per thread",
                f"    div/rem    {_fmt(f['div_rem_ptx'], '.0f')} in the machine code, about {_fmt(f['div_rem_per_cell'], '.3g')} "
                f"per cell; {_pct(f['xu_share'], '.1f')} of instructions on the XU pipe",
                "    stalls     " + (", ".join(f"{r} {v:.1f}" for r, v in f["stalls"]) or "?")
                + " (cycles per issued instruction)"]
    out += ["", f"Diagnosis (ranked; rules: {result.get('rules')}, mode {result.get('mode', 'counters')}: "
                + ("what the kit sees without counters" if ptx_mode else "Nsight Compute's counters") + "):"]
    if not result["findings"]:
        out.append("  no finding: no rule of the table fired")
    for i, finding in enumerate(result["findings"], 1):
        out.append(f"  {i}. [{finding['severity']}] {finding['kernel']}: {finding['message']}")
        out.append(f"       read: {handout_ref(finding)}")
    if result["worst"] in (None, "info"):
        out.append("  nothing above info: " + ("nothing the PTX and the launch show points at a defect the handouts "
                                               "teach (DRAM traffic, redundant loads and stalls need the counters)"
                                               if ptx_mode else "no counter points at a defect the handouts teach"))
    if result.get("not_measured"):
        out.append(f"  not measured ({'not derivable here' if ptx_mode else 'this ncu or GPU gave no counter for'}): "
                   f"{', '.join(result['not_measured'])}")
    return "\n".join(out) + "\n"

