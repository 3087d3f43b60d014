"""`make profile` / `grade.py profile`: why a kernel is slow, from Nsight Compute's counters.

    grade.py profile LABDIR [--impl starter|reference|DIR] [--build-dir DIR] [--seed N] [--no-counters]
    grade.py profile LABDIR --from-inputs BUILD_DIR/profile-inputs.json     (no GPU: analyse again)

What it does, in order:

1. builds the lab (grading/build.py, the same build `make check` makes) and reads the student's
   kernels from the build's ptxas report (their mangled names, registers, spills) and machine code
   (integer divisions, the widest global load and store of each kernel: grading/sass.py);
2. runs the lab's bench program (grader/README.md, section 3) under Nsight Compute on the lab's
   bench grid:

       ncu --clock-control none --kernel-name-base mangled --kernel-name regex:^(K1|K2)$
           --filter-mode per-launch-config --launch-count 1 --section ... --metrics ...
           --export BUILD_DIR/profile BUILD_DIR/bench --json BUILD_DIR/profile-bench.json
           --seed N --reps 5 [--no-audit]

   Only the student's kernels are profiled (named from ptxas.log, so the harness's own kernels,
   fill_random, l2_read, ref_*, count_*, copy_float4, never are), and each distinct launch
   configuration once: one launch of a sweep kernel, not every one of a timed run.
   `--clock-control none` leaves the GPU's clocks as they are (ncu's default locks them, which
   virtualised GPUs refuse);
3. reads ncu's raw page back (`ncu --import ... --page raw --csv --print-units base`), derives per
   kernel the figures below, and runs the rule table (grader/profile_rules.json) on them;
4. prints the figures and the ranked findings, and writes BUILD_DIR/profile.json (the result),
   BUILD_DIR/profile-inputs.json (everything the analysis read: ncu's raw CSV, the bench JSON, the
   static facts, the device and date; `--from-inputs` analyses it again without a GPU, and the
   tests' fixtures are such files) and BUILD_DIR/profile.ncu-rep (open it in Nsight Compute's
   GUI, ncu-ui, for the full picture).  When BUILD_DIR/report.json exists, report.html is
   written again with the diagnosis in it.

The profile is never part of a grade: it reads a build and writes its own files, and no graded
figure changes.  It runs the student's code as the user who calls it, outside the grading sandbox
(Nsight Compute needs the GPU's performance counters, which the sandbox's user is usually
denied): profile only code you would run yourself.

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

Without counters
----------------
Where ncu may not read the counters (ERR_NVGPUCTRPERM), where ncu is missing, or when asked
(--no-counters, STENCIL_PROFILE_COUNTERS=off), the profile says so in one line and diagnoses from
what the kit sees itself: the PTX (how neighbouring lanes address global and shared memory), the
machine code (divisions), ptxas's registers and spills, the launch the audit saw (the bench run as make check
runs it) and the GPU's limits per SM (nocounters.py has the figures).  The result's "mode" says
which ("counters" or "ptx"), and the rules of grader/profile_rules.json are those of that mode.

The modules, one job each:

    ncu.py          finding ncu, the profiled run, reading its report back
    rawpage.py      ncu's raw page (CSV) as rows of metrics
    counters.py     the figures of a launch from its counters
    buildfacts.py   what ptxas.log, the machine code and kernel.ptx say of each kernel
    access.py       how the lanes of a warp address memory, from the PTX
    nocounters.py   the diagnosis without counters: the bench, the audit, the figures
    rules.py        the rule table and its findings
    text.py         the terminal report
    command.py      the command: build, collect, analyse, write
    common.py       exit statuses, the error, the inputs' format

Exit status: 0 profiled; 1 the build or the program failed (a compile error, a CUDA error in the
kernel); 2 nothing could be profiled here (no GPU, a debug build, no kernel of the student ran), with
what to do about it.  Never a diagnosis made from nothing.
"""

from .command import ProfileRun, analyse, profile_lab
from .rules import load_rules

__all__ = ["ProfileRun", "analyse", "load_rules", "profile_lab"]
