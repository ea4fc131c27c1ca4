/* SPDX-License-Identifier: Apache-2.0 */
/* A backend of cmocka mock objects: every call must be expected by the test, in order. */
#ifndef DL_SYNC_TEST_MOCK_BACKEND_H_
#define DL_SYNC_TEST_MOCK_BACKEND_H_

#include <stdint.h>

#include "dlsync/dlsync.h"

/* The mock's own error codes, named like a runtime's. */
enum {
  MOCK_ERROR_INVALID = 1,
  MOCK_ERROR_NO_DEVICE = 100,
  MOCK_ERROR_OOM = 2,
  MOCK_ERROR_CAPTURE = 905
};

extern dl_sync_backend mock_backend;

/* Fake native handles. */
#define MOCK_STREAM_A ((void *)0xA000)
#define MOCK_STREAM_B ((void *)0xB000)
#define MOCK_STREAM_C ((void *)0xC000)
#define MOCK_EVENT_1 ((void *)0xE001)
#define MOCK_EVENT_2 ((void *)0xE002)
#define MOCK_EVENT_3 ((void *)0xE003)

void expect_get_device(int32_t current, int code);
void expect_set_device(int32_t device, int code);
void expect_event_create(void *event, int code);
void expect_event_destroy(void *event, int code);
void expect_event_record(void *event, void *stream, int code);
void expect_stream_wait(void *stream, void *event, int code);
void expect_stream_wait_external(void *stream, void *event, int code);
void expect_event_query(void *event, int complete, int code);
void expect_capture_info(void *stream, int32_t status, uint64_t id, int code);
/* graph_retain keeps object and release for mock_graph_destroy(); when code != 0 it
   releases at once, as the contract requires. */
void expect_graph_retain(void *stream, int code);
/* Destroys the graph made by the last successful graph_retain: runs release. */
void mock_graph_destroy(void);

/* Contexts (off by default): the five context callbacks join the mock, each a mock call. */
void mock_backend_use_contexts(int on);
void expect_get_context(void *current, int code);
void expect_set_context(void *context, int code);
void expect_stream_context(void *stream, void *context, int code);
void expect_primary_context(int32_t device, void *context, int code);
void expect_context_id(void *context, uint64_t id, int code);
#define MOCK_CONTEXT_P0 ((void *)0xC0)
#define MOCK_CONTEXT_X0 ((void *)0xC1)
#define MOCK_CONTEXT_P1 ((void *)0xC2)

/* Installs the mock under kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost. */
void mock_backend_install(void);
/* Expects the destruction of every idle event, shuts dlsync down, restores defaults. */
void mock_backend_shutdown(void);
/* cmocka setup and teardown of a suite on the mock: installs it with the strict capture
   policy, and makes the first failed check end the suite (it may leave a dlsync lock
   held); shuts it down. */
int mock_suite_setup(void **state);
int mock_suite_teardown(void **state);
/* The mock's pool counters for device. */
dl_sync_pool_stats mock_pool_stats(int32_t device);

#endif
