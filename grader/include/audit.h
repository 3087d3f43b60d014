/*
 * audit.h -- the bench's launch audit: what the student's launcher really
 * started on the GPU, recorded by CUPTI's activity API (shipped with the
 * CUDA toolkit).
 *
 * Between audit_begin() and audit_end() every kernel, memcpy and memset that
 * reaches the GPU is recorded with its stream, its launch configuration
 * (grid, block, static and dynamic shared memory per block, registers per
 * thread) and its duration.  The bench audits untimed calls of the launcher
 * (both warm-up calls, and further calls at random among the timed ones) and
 * reports the records; the grader then checks that every one ran on the
 * stream the launcher was given, and reads the block sizes and shared memory
 * that the lab's constraints need from what was launched, not from what the
 * code declares (grader/stencil_grader/grading/launches.py).
 *
 * The audit never touches a timed call: CUPTI's activity records cost the
 * kernels they record a few percent.  That a launcher could behave
 * differently when audited gains it nothing in time: the timer covers every
 * stream the launcher can reach (device.cu, harness_timer_*).
 */
#ifndef STENCIL_AUDIT_H
#define STENCIL_AUDIT_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#include "channel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char kind;                  /* 'k' kernel, 'c' memcpy, 's' memset */
    char name[160];             /* the kernel's (mangled) name; "memcpy" or "memset" */
    unsigned stream;            /* CUPTI's stream id */
    unsigned correlation;       /* CUPTI's correlation id: the order of the API calls */
    int grid[3], block[3];      /* kernels */
    int static_smem, dynamic_smem;  /* bytes of shared memory per block (kernels) */
    int registers;              /* per thread (kernels) */
    unsigned long long bytes;   /* memcpy and memset */
    unsigned char src_memory, dst_memory;  /* memcpy and memset: CUpti_ActivityMemoryKind of each side
                                              (a memset's are both its memory's) */
    double ms;                  /* on the GPU, milliseconds */
} audit_record;

/* Starts CUPTI's activity recording machinery (nothing is recorded yet).
 * Returns 0, or -1 with the reason in why[0..n) when CUPTI is not usable. */
int audit_init(char *why, size_t n);

/* Waits for the device to be idle, turns the recording on, and launches the
 * harness's marker kernel on `stream` (its record names the stream's id). */
void audit_begin(cudaStream_t stream);

/*
 * Waits for the device, turns the recording off and hands over what was
 * recorded since audit_begin(), the marker left out, in the order of the API
 * calls: at most `max` records into out; *stream_id receives the id of the
 * stream given to audit_begin.  Returns the number of records (which may
 * exceed max: only max were stored; records CUPTI dropped count too), or -1
 * when the marker was not seen.
 */
int audit_end(audit_record *out, int max, unsigned *stream_id);

/* The harness's marker kernel, launched by audit_begin (device.cu). */
void harness_audit_marker(cudaStream_t stream);

/* ------------------------------------------------- the bench's log of audited calls */

enum { AUDIT_MAX_LAUNCHES = 256 };

/* What the audited calls of one launcher started: each distinct operation, with a count. */
typedef struct {
    audit_record r;
    int launcher, on_stream, count;
} audited_launch;

typedef struct {
    int available;              /* CUPTI works here (and --no-audit was not given) */
    char message[512];          /* why not */
    int calls;                  /* calls audited */
    int lost;                   /* records beyond AUDIT_MAX_LAUNCHES (distinct or not), records CUPTI
                                   dropped, or a window without its marker: the rules fail closed */
    int nlaunches;
    audited_launch launches[AUDIT_MAX_LAUNCHES];
} audit_log;

/* One audited call of launcher `launcher`: audit_begin(stream), the call, then
 * audit_end_into(log, launcher), which ends the window and adds what the call started. */
void audit_end_into(audit_log *log, int launcher);

/* The log as the bench JSON's "audit" object (protocol.h's KEY_audit_* and KEY_launch_*);
 * launcher_names[i] names launcher i. */
void audit_write(json_writer *w, const audit_log *log, const char *const *launcher_names);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_AUDIT_H */
