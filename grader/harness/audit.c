/* audit.c -- the launch audit on CUPTI's activity API (audit.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "audit.h"
#include "harness.h"
#include "protocol.h"

/* The newest record layouts of this CUPTI; the fields read here are in all of them. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kernel_record;
typedef CUpti_ActivityMemcpy6 memcpy_record;
#else
typedef CUpti_ActivityKernel9 kernel_record;
typedef CUpti_ActivityMemcpy5 memcpy_record;
#endif
typedef CUpti_ActivityMemset4 memset_record;

enum { MAX_RECORDS = 4096, BUFFER_BYTES = 1 << 20 };

static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
};

/* Records arrive through CUPTI's buffer callback, possibly on a thread of its own. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static audit_record records[MAX_RECORDS];
static int nrecords, overflow;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void keep(const audit_record *r)
{
    pthread_mutex_lock(&lock);
    if (nrecords < MAX_RECORDS)
        records[nrecords++] = *r;
    else
        overflow++;
    pthread_mutex_unlock(&lock);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *a = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
        audit_record r;
        memset(&r, 0, sizeof r);
        if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const kernel_record *k = (const kernel_record *)a;
            r.kind = 'k';
            snprintf(r.name, sizeof r.name, "%s", k->name ? k->name : "?");
            r.stream = k->streamId;
            r.correlation = k->correlationId;
            r.grid[0] = k->gridX; r.grid[1] = k->gridY; r.grid[2] = k->gridZ;
            r.block[0] = k->blockX; r.block[1] = k->blockY; r.block[2] = k->blockZ;
            r.static_smem = k->staticSharedMemory;
            r.dynamic_smem = k->dynamicSharedMemory;
            r.registers = k->registersPerThread;
            r.ms = (double)(k->end - k->start) / 1e6;
        } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const memcpy_record *m = (const memcpy_record *)a;
            r.kind = 'c';
            snprintf(r.name, sizeof r.name, "memcpy");
            r.stream = m->streamId;
            r.correlation = m->correlationId;
            r.bytes = m->bytes;
            r.src_memory = m->srcKind;
            r.dst_memory = m->dstKind;
            r.ms = (double)(m->end - m->start) / 1e6;
        } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const memset_record *m = (const memset_record *)a;
            r.kind = 's';
            snprintf(r.name, sizeof r.name, "memset");
            r.stream = m->streamId;
            r.correlation = m->correlationId;
            r.bytes = m->bytes;
            r.src_memory = r.dst_memory = (unsigned char)m->memoryKind;
            r.ms = (double)(m->end - m->start) / 1e6;
        } else {
            continue;           /* a kind not enabled (KINDS) */
        }
        keep(&r);
    }
    free(buffer);
}

static const char *cupti_error(CUptiResult result)
{
    const char *text = NULL;
    cuptiGetResultString(result, &text);
    return text ? text : "unknown CUPTI error";
}

int audit_init(char *why, size_t n)
{
    const CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (result != CUPTI_SUCCESS) {
        snprintf(why, n, "CUPTI's activity API is not usable here: %s", cupti_error(result));
        return -1;
    }
    return 0;
}

void audit_begin(cudaStream_t stream)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    pthread_mutex_lock(&lock);
    nrecords = overflow = 0;
    pthread_mutex_unlock(&lock);
    size_t before = 0;          /* records dropped before this window: not this call's */
    cuptiActivityGetNumDroppedRecords(NULL, 0, &before);
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        const CUptiResult result = cuptiActivityEnable(KINDS[i]);
        if (result != CUPTI_SUCCESS)
            harness_fail("CUDA error: the launch audit could not start (cuptiActivityEnable: %s)",
                         cupti_error(result));
    }
    harness_audit_marker(stream);
}

static int by_correlation(const void *a, const void *b)
{
    const unsigned x = ((const audit_record *)a)->correlation, y = ((const audit_record *)b)->correlation;
    return (x > y) - (x < y);
}

int audit_end(audit_record *out, int max, unsigned *stream_id)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        cuptiActivityDisable(KINDS[i]);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    /* Records CUPTI could not buffer are lost records: the rules fail closed on them. */
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) != CUPTI_SUCCESS)
        dropped = 1;
    pthread_mutex_lock(&lock);
    overflow += (int)dropped;
    qsort(records, (size_t)nrecords, sizeof records[0], by_correlation);
    /* The first API call of the window launched the marker: its record gives the stream's id. */
    int found = nrecords > 0 && records[0].kind == 'k' && strstr(records[0].name, "harness_audit_marker");
    const int total = found ? nrecords - 1 + overflow : -1;
    if (found) {
        *stream_id = records[0].stream;
        const int stored = nrecords - 1 < max ? nrecords - 1 : max;
        memcpy(out, records + 1, sizeof records[0] * (size_t)stored);
    }
    nrecords = overflow = 0;
    pthread_mutex_unlock(&lock);
    return total;
}

/* ------------------------------------------------- the bench's log of audited calls */

/* CUpti_ActivityMemoryKind, as the bench JSON names it (launches.py: DEVICE_MEMORY). */
static const char *memory_name(unsigned kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "device_static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed_static";
    default: return "unknown";
    }
}

static void log_add(audit_log *log, int launcher, const audit_record *r, unsigned harness_stream)
{
    const int on_stream = r->stream == harness_stream;
    for (int i = 0; i < log->nlaunches; i++) {
        audited_launch *a = &log->launches[i];
        if (a->launcher == launcher && a->on_stream == on_stream && a->r.kind == r->kind &&
            !strcmp(a->r.name, r->name) && !memcmp(a->r.grid, r->grid, sizeof r->grid) &&
            !memcmp(a->r.block, r->block, sizeof r->block) && a->r.static_smem == r->static_smem &&
            a->r.dynamic_smem == r->dynamic_smem && a->r.bytes == r->bytes &&
            a->r.src_memory == r->src_memory && a->r.dst_memory == r->dst_memory) {
            a->count++;
            return;
        }
    }
    if (log->nlaunches == AUDIT_MAX_LAUNCHES) {
        log->lost++;
        return;
    }
    audited_launch *a = &log->launches[log->nlaunches++];
    a->r = *r;
    a->launcher = launcher;
    a->on_stream = on_stream;
    a->count = 1;
}

void audit_end_into(audit_log *log, int launcher)
{
    static audit_record window[AUDIT_MAX_LAUNCHES];
    unsigned harness_stream = 0;
    const int n = audit_end(window, AUDIT_MAX_LAUNCHES, &harness_stream);
    if (n < 0) {
        log->lost++;
    } else {
        for (int i = 0; i < n && i < AUDIT_MAX_LAUNCHES; i++)
            log_add(log, launcher, &window[i], harness_stream);
        log->lost += n > AUDIT_MAX_LAUNCHES ? n - AUDIT_MAX_LAUNCHES : 0;
    }
    log->calls++;
}

void audit_write(json_writer *w, const audit_log *log, const char *const *launcher_names)
{
    json_open_object(w, KEY_audit);
    json_string(w, KEY_audit_status, log->available ? "ok" : "unavailable");
    json_string(w, KEY_audit_message, log->message);
    json_integer(w, KEY_audit_calls, log->calls);
    json_integer(w, KEY_audit_lost, log->lost);
    json_open_array(w, KEY_audit_launches);
    for (int i = 0; i < log->nlaunches; i++) {
        const audited_launch *a = &log->launches[i];
        const audit_record *r = &a->r;
        json_open_object(w, NULL);
        json_string(w, KEY_launch_launcher, launcher_names[a->launcher]);
        json_string(w, KEY_launch_kind, r->kind == 'k' ? "kernel" : r->kind == 'c' ? "memcpy" : "memset");
        json_string(w, KEY_launch_name, r->name);
        json_bool(w, KEY_launch_on_launcher_stream, a->on_stream);
        json_integer(w, KEY_launch_stream, r->stream);
        json_integer(w, KEY_launch_count, a->count);
        if (r->kind == 'k') {
            json_open_array(w, KEY_launch_grid);
            for (int d = 0; d < 3; d++)
                json_integer(w, NULL, r->grid[d]);
            json_close(w);
            json_open_array(w, KEY_launch_block);
            for (int d = 0; d < 3; d++)
                json_integer(w, NULL, r->block[d]);
            json_close(w);
            json_integer(w, KEY_launch_static_smem, r->static_smem);
            json_integer(w, KEY_launch_dynamic_smem, r->dynamic_smem);
            json_integer(w, KEY_launch_registers, r->registers);
        } else {
            json_integer(w, KEY_launch_bytes, (long long)r->bytes);
            json_string(w, KEY_launch_src_memory, memory_name(r->src_memory));
            json_string(w, KEY_launch_dst_memory, memory_name(r->dst_memory));
        }
        json_number(w, KEY_launch_ms, r->ms);
        json_close(w);
    }
    json_close(w);
    json_close(w);
}
