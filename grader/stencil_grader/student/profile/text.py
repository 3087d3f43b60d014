"""The terminal report of a profile: figures per kernel, then the ranked findings."""

from __future__ import annotations

from .common import show_figures

#: A kernel's lines per mode: (the figure the line needs, or "" for none; the line's template).
KERNEL_LINES = {
    "counters": (
        ("", "  kernel {label} (grid {grid}, block {block}): {duration_ms:.3f} ms, {time_share:.0%} of the "
             "profiled time"),
        ("", "    DRAM       {dram_read_bytes:MB} read + {dram_write_bytes:MB} written = {dram_over_compulsory:.2f}x "
             "the compulsory {compulsory_bytes:MB}; {dram_gbps:.0f} GB/s = {dram_of_copy:.2f} of copy"),
        ("", "    global     loads {gld_sectors_per_request:.1f} sectors/request (ideal {gld_ideal_sectors:.0f}), "
             "stores {gst_sectors_per_request:.1f} (ideal {gst_ideal_sectors:.0f}); loads fetch each DRAM byte "
             "{load_amplification:.1f} times through L1"),
        ("", "    shared     {smem_per_block:.0f} B per block; bank conflicts {shared_conflict_share:.0%} of "
             "wavefronts"),
        ("", "    occupancy  achieved {achieved_occupancy:.0f}%, theoretical {theoretical_occupancy:.0f}% (limited "
             "by {occupancy_limiter}); {registers:.0f} registers/thread, {block_size:.0f} threads/block"),
        ("", "    local      {local_bytes:.0f} B of local-memory traffic ({local_share:.1%} of L1 sectors); ptxas: "
             "{spill_bytes:.0f} B of spills per thread"),
        ("", "    div/rem    {div_rem_ptx:.0f} in the machine code, about {div_rem_per_cell:.3g} per cell; "
             "{xu_share:.1%} of instructions on the XU pipe")),
    "code": (
        ("", "  kernel {label} (grid {grid}, block {block}, as launched): {registers:.0f} registers/thread, "
             "{smem_per_block:,.0f} B of shared memory per block"),
        ("worst_global_line", "    global     about {gld_sectors_per_request:.1f} sectors per load request and "
                              "{gst_sectors_per_request:.1f} per store (ideal {gld_ideal_sectors:.0f}); worst: a "
                              "{worst_global_op} of {worst_global_width:.0f} B per lane with lanes "
                              "{worst_global_stride} apart, {worst_global_figure:.0f} sectors (kernel.ptx line "
                              "{worst_global_line:.0f})"),
        ("worst_shared_line", "    shared     bank-conflict replays {shared_conflict_share:.0%} of wavefronts on "
                              "average; worst: a {worst_shared_op} with lanes {worst_shared_stride} apart, "
                              "{worst_shared_figure:.0f}-way (kernel.ptx line {worst_shared_line:.0f})"),
        ("", "    occupancy  theoretical {theoretical_occupancy:.0f}% (limited by {occupancy_limiter})"),
        ("", "    spills     ptxas: {spill_bytes:.0f} B per thread"),
        ("", "    div/rem    {div_rem_ptx:.0f} in the machine code, about {div_rem_per_cell:.3g} per cell"),
        ("", "    analysed   {accesses_analysed} loads and stores of the PTX; {accesses_skipped} whose lanes' "
             "addresses it cannot follow")),
}


def handout_ref(finding: dict) -> str:
    """'handout 1, "Coalescing and the thread-to-data mapping" (handouts/01-naive-5pt.md)'."""
    number = finding["handout"].split("-", 1)[0].lstrip("0") or "0"
    return f'handout {number}, "{finding["section"]}" (handouts/{finding["handout"]})'


def render_text(result: dict) -> str:
    """The terminal report of analyse()'s result: figures per kernel, then the findings."""
    b = result["bench"]
    code_mode = result.get("mode") == "code"
    ncu_version = (result.get("ncu_version") or "?").removeprefix("Version ")
    how = (f"without counters ({result.get('no_counters')}): from the PTX, the machine code, ptxas's report and "
           "the launch audit" if code_mode else f"Nsight Compute {ncu_version}")
    out = [f"Profile of {result['lab']} ({result.get('impl')}) on {result.get('device')}, {how}",
           show_figures("  bench grid {nx} x {ny} x {nz}; copy bandwidth {copy_gbps:.0f} GB/s in this run; your "
                        "launcher {gbps:.0f} GB/s, ratio {ratio:.3f}, timed under the profiler (`make check`'s figure "
                        "is the one that counts", b) + (f"; the lab's target is {result['target_ratio']:.2f})"
                                                        if result.get("target_ratio") is not None else ")")]
    if b.get("output_ok") is False:
        out.append(f"  WARNING: the output under the profiler was wrong ({b.get('output_message')}): "
                   "fix correctness first (`make check`); these figures describe a wrong kernel")
    for k in result["kernels"]:
        values = {"accesses_analysed": 0, "accesses_skipped": 0} | k["figures"] | {x: k[x] for x in ("label", "grid",
                                                                                      "block")}
        out += [""] + [show_figures(line, values) for need, line in KERNEL_LINES["code" if code_mode else "counters"]
                       if values.get(need or "label") is not None]
        if not code_mode:
            out.append("    stalls     " + (", ".join(f"{r} {v:.1f}" for r, v in values["stalls"]) or "?")
                       + " (cycles per issued instruction)")
    out += ["", f"Diagnosis (ranked; rules: {result.get('rules')}, mode {result.get('mode', 'counters')}: "
                + ("what the kit sees without counters" if code_mode else "Nsight Compute's counters") + "):"]
    if not result["findings"]:
        out.append("  no finding: no rule of the table fired")
    for i, finding in enumerate(result["findings"], 1):
        out.append(f"  {i}. [{finding['severity']}] {finding['kernel']}: {finding['message']}")
        out.append(f"       read: {handout_ref(finding)}")
    if result["worst"] in (None, "info"):
        out.append("  nothing above info: " + ("nothing the PTX and the launch show points at a defect the handouts "
                                               "teach (DRAM traffic, redundant loads and stalls need the counters)"
                                               if code_mode else "no counter points at a defect the handouts teach"))
    if result.get("not_measured"):
        out.append(f"  not measured ({'not derivable here' if code_mode else 'this ncu or GPU gave no counter for'}): "
                   f"{', '.join(result['not_measured'])}")
    return "\n".join(out) + "\n"
