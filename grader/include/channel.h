/*
 * channel.h -- the private channel on which check and bench report to the
 * grader, and the small JSON writer the bench uses there.
 *
 * The grader starts check and bench with one extra pipe and names its file
 * descriptor in the environment (CHANNEL_FD_ENV, protocol.h).  Standard output
 * and standard error belong to the student's code: a kernel's printf lands on
 * stdout, and the grader shows it to the student as their program's output.
 * The student's code cannot reach the channel: it would need a system call or
 * a C library function that the symbol check forbids (grader/README.md,
 * section 6).  Run by hand, without the grader, there is no channel:
 * channel_open() then returns stdout, so `bench --json -` still works.
 */
#ifndef STENCIL_CHANNEL_H
#define STENCIL_CHANNEL_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file descriptor the environment variable `name` holds (a number from 3 to 1023), or -1 when it is
 * unset or holds anything else. */
int env_fd(const char *name);

/* The channel's file descriptor from the environment (CHANNEL_FD_ENV), or -1 when there is none. */
int channel_fd(void);

/* A stream on the channel (or stdout without one); the same stream on every call.
 * Never NULL. */
FILE *channel_open(void);

/* "/dev/fd/N" of the channel into buf (for Check's srunner_set_xml, which takes a
 * file name); returns 0, or -1 (buf unchanged) without a channel. */
int channel_path(char *buf, size_t n);

/*
 * A JSON object written field by field, e.g.
 *     json_writer w;
 *     json_begin(&w, f);
 *     json_string(&w, KEY_device, name);
 *     json_number(&w, KEY_ms_median, 0.358);
 *     json_end(&w);
 * Keys come from protocol.h, so they are the keys the grader reads.  Strings
 * are escaped (quotes, backslashes, control bytes); a number that is not
 * finite is written as null.  Nested objects and arrays: json_open_object /
 * json_open_array with a key (NULL inside an array), json_close.
 */
enum { JSON_MAX_DEPTH = 16 };
typedef struct {
    FILE *f;
    int depth;                    /* open levels, the top object included */
    int first[JSON_MAX_DEPTH];    /* nothing written yet at this level */
    char close[JSON_MAX_DEPTH];   /* the bracket that ends this level */
} json_writer;

void json_begin(json_writer *w, FILE *f);
void json_end(json_writer *w);           /* closes every open level, a newline, and flushes */
void json_open_object(json_writer *w, const char *key);
void json_open_array(json_writer *w, const char *key);
void json_close(json_writer *w);
void json_string(json_writer *w, const char *key, const char *value);
void json_number(json_writer *w, const char *key, double value);
void json_integer(json_writer *w, const char *key, long long value);
void json_bool(json_writer *w, const char *key, int value);

#ifdef __cplusplus
}
#endif

#endif /* STENCIL_CHANNEL_H */
