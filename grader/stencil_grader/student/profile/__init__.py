"""`make profile` / `grade.py profile`: why a kernel is slow, from Nsight Compute's counters.

    grade.py profile LABDIR [--impl starter|reference|DIR] [--build-dir DIR] [--seed N] [--no-counters]
    grade.py profile LABDIR --from-inputs BUILD_DIR/profile-inputs.json     (no GPU: analyse again)

What it runs (the ncu command line: only the student's kernels, named from ptxas.log, each launch
configuration once, the clocks left alone), what it writes (BUILD_DIR/profile.json, profile-inputs.json,
profile.ncu-rep, report.html again), the mode without counters and the modules: grader/README.md,
section 8.  It never changes a graded figure, and runs the student's code as the user who calls it,
outside the grading sandbox.  Exit status (common.EXIT_*): 0 profiled; 1 the build or the program
failed; 2 nothing could be profiled here (no GPU, a debug build, no kernel of the student ran), with
what to do about it.  Never a diagnosis made from nothing.

Figures per kernel (units: bytes; GB/s with 1 GB = 1e9 bytes; milliseconds)
--------------------------------------------------------------------------
- DRAM bytes read and written (dram__bytes_read.sum, dram__bytes_write.sum) against the compulsory
  bytes of one launch: the kind's bytes per cell (grader/kinds.json) of the launcher the kernel
  belongs to, times the bench grid's cells (one sweep per launch);
- achieved DRAM bandwidth, DRAM bytes / kernel time, against the copy bandwidth the bench measured
  in the same run;
- global load and store sectors per request (l1tex__t_sectors / l1tex__t_requests of
  pipe_lsu_mem_global_op_ld and _st) against the ideal of the kernel's widest access: a warp's 32
  coalesced accesses of W bytes fill 32 * W / 32 = W sectors of 32 bytes (4 for float, 16 for
  float4; CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory");
- load amplification: bytes the global loads fetch through L1 (sectors x 32) per byte read from
  DRAM: about 1 when each input is loaded once (a tile, a register window), about 5 when every
  thread loads its five neighbours itself;
- shared-memory bank conflicts as a share of shared-memory wavefronts (l1tex__data_bank_conflicts
  over l1tex__data_pipe_lsu_wavefronts, loads and stores);
- achieved and theoretical occupancy, and what limits it: the least of the blocks per SM that the
  registers, the shared memory, the block size (warps) and the SM's block slots allow
  (launch__occupancy_limit_*);
- local-memory traffic (l1tex__t_sectors_pipe_lsu_mem_local_op_ld/st: register spills, arrays
  indexed at run time) as a share of all L1 sectors, and ptxas's spill bytes per thread;
- the warp-stall reasons, in cycles per issued instruction
  (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio), the three largest;
- integer div/rem: the count of integer divisions in the kernel's machine code (and the device
  functions it calls), and the share of executed instructions on the XU pipe (conversions and the reciprocal
  that a division by a run-time value needs; smsp__inst_executed_pipe_xu / smsp__inst_executed).
"""

from .command import ProfileRun, analyse, profile_lab
from .rules import load_rules

__all__ = ["ProfileRun", "analyse", "load_rules", "profile_lab"]
