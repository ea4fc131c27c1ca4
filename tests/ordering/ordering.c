/* SPDX-License-Identifier: Apache-2.0 */
#include "ordering.h"

#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct job {
  pattern *p;
  int32_t value;
} job;

enum { JOB_RING = 1 << 12 };

/* Kernel arguments live until the kernel ran: a ring per thread, far larger than the
   work any suite keeps in flight. */
static _Thread_local job jobs[JOB_RING];
static _Thread_local unsigned next_job;

static job *new_job(pattern *p, int32_t value) {
  job *j = &jobs[next_job++ % JOB_RING];
  *j = (job){p, value};
  return j;
}

static void producer(void *arg) {
  job *j = arg;
  for (int i = 0; i < PATTERN_WORDS; i++) {
    if (j->p->racy)
      __atomic_store_n(&j->p->words[i], j->value + i, __ATOMIC_RELAXED);
    else
      j->p->words[i] = j->value + i;
  }
}

static void consumer(void *arg) {
  job *j = arg;
  for (int i = 0; i < PATTERN_WORDS; i++) {
    int32_t word = j->p->racy ? __atomic_load_n(&j->p->words[i], __ATOMIC_RELAXED) : j->p->words[i];
    if (word != j->value + i) j->p->mismatches++;
  }
}

int launch_producer(void *stream, pattern *p, int32_t value) {
  dl_sync_sim_access access = {p->words, DL_SYNC_SIM_WRITE};
  return dl_sync_sim_launch(stream, "producer", producer, new_job(p, value), &access, 1);
}

int launch_consumer(void *stream, pattern *p, int32_t expected) {
  dl_sync_sim_access accesses[] = {{p->words, DL_SYNC_SIM_READ},
                                   {&p->mismatches, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE}};
  return dl_sync_sim_launch(stream, "consumer", consumer, new_job(p, expected), accesses, 2);
}

static atomic_int gate_open;

static void gate(void *arg) {
  (void)arg;
  while (!atomic_load(&gate_open)) sched_yield();
}

int launch_gate(void *stream) {
  atomic_store(&gate_open, 0);
  return dl_sync_sim_launch(stream, "gate", gate, NULL, NULL, 0);
}

void open_gate(void) {
  atomic_store(&gate_open, 1);
}

dl_sync_stream sim_view(void *stream, int32_t device) {
  return dl_sync_stream_view((DLDevice){kDLCUDA, device}, stream);
}

static const int32_t stream_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};

int use_sim(void **state) {
  (void)state;
  dl_sync_sim_reset();
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
    dl_sync_set_backend(stream_types[i], dl_sync_sim_backend());
  dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT);
  return 0;
}

int leave_sim(void **state) {
  (void)state;
  open_gate(); /* a test that failed behind a closed gate would leave its stream held */
  dl_sync_sim_reset();
  dl_sync_shutdown();
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
    dl_sync_set_backend(stream_types[i], NULL);
  return 0;
}

void print_races(const char *what) {
  char report[1024];
  uint64_t races = dl_sync_sim_race_report(report, sizeof report);
  print_message("%s: %llu races%s%.300s", what, (unsigned long long)races,
                races ? ", first: " : "\n", races ? report : "");
}
