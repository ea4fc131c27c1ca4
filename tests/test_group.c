/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_group call patterns, proven on a backend of cmocka mocks: any runtime call the
   test did not expect fails it, so every expectation list below is the exact set of
   runtime calls, in order. f(a, b, c) per tensor costs 6 capture queries, 3 records and
   3 waits; a group pays once per distinct producer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/counting_backend.h"
#include "support/mock_backend.h"
#include "support/error_message.h"

#define MOCK_EVENT_3 ((void *)0xE003)
#define MOCK_STREAM_D ((void *)0xD000)

static const DLDevice cuda0 = {kDLCUDA, 0};
static const DLDevice cuda1 = {kDLCUDA, 1};
static const DLDevice rocm0 = {kDLROCM, 0};
static const DLDevice cpu0 = {kDLCPU, 0};

static dl_sync_stream on(DLDevice device, void *handle) {
  return dl_sync_stream_view(device, handle);
}

static void expect_new_event(void *event) {
  expect_get_device(0, 0);
  expect_event_create(event, 0);
}

static dl_sync_group group_on(void *consumer) {
  dl_sync_group group;
  assert_int_equal(dl_sync_group_init(&group, on(cuda0, consumer)), DL_SYNC_OK);
  return group;
}

/* --- f(a, b, c): the runtime calls ---------------------------------------------------- */

static void test_three_tensors_from_one_stream_cost_one_record_one_wait_two_queries(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int tensor = 0; tensor < 3; tensor++)
    assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(0).acquired, 1);
}

static void test_the_group_is_reusable_after_a_wait(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int round = 0; round < 3; round++) {
    for (int tensor = 0; tensor < 3; tensor++)
      assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
    expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
    if (round == 0) expect_new_event(MOCK_EVENT_1);
    expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
    expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
    assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  }
  /* Emptied by the wait: another wait has nothing to order. */
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(0).created, 1);
}

static void test_two_producer_streams_cost_one_dependency_each_and_one_consumer_query(
    void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_C)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_capture_info(MOCK_STREAM_C, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_C, 0); /* the wait bound the first record */
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_one_handle_on_two_devices_is_two_streams(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda1, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_set_device(1, 0); /* device 1's pool makes its event there; device 0 is known */
  expect_event_create(MOCK_EVENT_2, 0);
  expect_event_record(MOCK_EVENT_2, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  expect_set_device(0, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_the_consumer_stream_costs_nothing(void **state) {
  (void)state;
  dl_sync_group group = group_on(NULL); /* the legacy stream, canonicalized */
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, DL_SYNC_STREAM_LEGACY)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, NULL)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(0).acquired, 0);
}

/* --- exchange tables ------------------------------------------------------------------ */

static int asked_a, asked_c;

static int current_stream_a(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  asked_a++;
  *out = MOCK_STREAM_A;
  return 0;
}

static int current_stream_c(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  asked_c++;
  *out = MOCK_STREAM_C;
  return 0;
}

static int current_stream_fails(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  (void)out;
  asked_c++;
  return -1;
}

static DLPackExchangeAPI table_of(int (*current)(DLDeviceType, int32_t, void **)) {
  DLPackExchangeAPI api = {.header = {{1, 3}, NULL}};
  api.current_work_stream = current;
  return api;
}

static void test_two_exchange_tables_are_asked_once_each(void **state) {
  (void)state;
  asked_a = asked_c = 0;
  DLPackExchangeAPI framework_a = table_of(current_stream_a);
  DLPackExchangeAPI framework_c = table_of(current_stream_c);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  /* f(a, b, c): a and b from one framework, c from another. */
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &framework_a, cuda0), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &framework_a, cuda0), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &framework_c, cuda0), DL_SYNC_OK);
  assert_int_equal(asked_a, 1);
  assert_int_equal(asked_c, 1);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_capture_info(MOCK_STREAM_C, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_C, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);

  /* After the wait the tables are asked again: their current stream may have changed. */
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &framework_a, cuda0), DL_SYNC_OK);
  assert_int_equal(asked_a, 2);
  /* Another device of one table is another question. */
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &framework_a, cuda1), DL_SYNC_OK);
  assert_int_equal(asked_a, 3);
}

static void test_two_tables_on_one_stream_make_one_dependency(void **state) {
  (void)state;
  DLPackExchangeAPI first = table_of(current_stream_a);
  DLPackExchangeAPI second = table_of(current_stream_a);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &first, cuda0), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &second, cuda0), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_a_failing_table_is_named_and_asked_again_next_time(void **state) {
  (void)state;
  asked_c = 0;
  DLPackExchangeAPI broken = table_of(current_stream_fails);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &broken, cuda0), DL_SYNC_EBACKEND);
  assert_error_mentions("dl_sync_group_add_exchange_api: the producer's current_work_stream");
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &broken, cuda0), DL_SYNC_EBACKEND);
  assert_int_equal(asked_c, 2);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, NULL, cuda0), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK); /* nothing was added */
}

/* --- per-tensor events ---------------------------------------------------------------- */

static DLManagedTensorVersioned tensors[3];
static DLManagedTensor legacy_tensor;

static void record_tensor(DLManagedTensorVersioned *tensor, void *event) {
  *tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  tensor->dl_tensor.device = cuda0;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(event);
  expect_event_record(event, MOCK_STREAM_A, 0);
  assert_int_equal(dl_sync_tensor_record(tensor, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
}

static void delete_tensors(int count) {
  for (int i = 0; i < count; i++) tensors[i].deleter(&tensors[i]);
}

static void test_distinct_tensor_events_cost_one_wait_each_and_one_consumer_query(void **state) {
  (void)state;
  void *events[] = {MOCK_EVENT_1, MOCK_EVENT_2, MOCK_EVENT_3};
  for (int i = 0; i < 3; i++) record_tensor(&tensors[i], events[i]);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int i = 0; i < 3; i++)
    assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[i]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  for (int i = 0; i < 3; i++) expect_stream_wait(MOCK_STREAM_B, events[i], 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  delete_tensors(3);
}

static void test_a_shared_tensor_event_costs_one_wait(void **state) {
  (void)state;
  record_tensor(&tensors[0], MOCK_EVENT_1);
  record_tensor(&tensors[1], MOCK_EVENT_2);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  /* f(a, a, b): a's event once. */
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[1]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  delete_tensors(2);
}

static void test_streams_and_tensor_events_share_the_consumer_query(void **state) {
  (void)state;
  record_tensor(&tensors[0], MOCK_EVENT_2);
  legacy_tensor = (DLManagedTensor){.dl_tensor = {.device = cuda0}};
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_3);
  expect_event_record(MOCK_EVENT_3, MOCK_STREAM_A, 0);
  assert_int_equal(dl_sync_legacy_tensor_record(&legacy_tensor, on(cuda0, MOCK_STREAM_A)),
                   DL_SYNC_OK);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_C)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_legacy_tensor(&group, &legacy_tensor), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_C, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_C, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_3, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  delete_tensors(1);
  legacy_tensor.deleter(&legacy_tensor);
}

static void test_a_tensor_without_event_adds_nothing(void **state) {
  (void)state;
  DLManagedTensorVersioned plain = {.version = {1, 3}};
  plain.dl_tensor.device = cuda0;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_tensor(&group, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_tensor(&group, &plain), DL_SYNC_OK);
  assert_error_mentions("tensor must not be NULL");         /* a success writes no message */
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK); /* no runtime call expected */
}

/* --- the capture table, per producer -------------------------------------------------- */

static void test_producers_in_the_consumers_capture_are_fork_join_edges(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_C)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_capture_info(MOCK_STREAM_C, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_C, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_a_capturing_consumer_gets_an_external_wait_per_producer_stream(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_graph_retain(MOCK_STREAM_B, 0);
  expect_stream_wait_external(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(0).outstanding, 1); /* the graph's */
  mock_graph_destroy();
  assert_int_equal(mock_pool_stats(0).outstanding, 0);
}

static void test_a_capturing_consumer_gets_an_external_wait_per_tensor_event(void **state) {
  (void)state;
  record_tensor(&tensors[0], MOCK_EVENT_1);
  record_tensor(&tensors[1], MOCK_EVENT_2);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[1]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_graph_retain(MOCK_STREAM_B, 1); /* fails: the graph releases its reference at once */
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_EBACKEND);
  assert_error_mentions("tensor event 1 of 2");
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[1]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_graph_retain(MOCK_STREAM_B, 0);
  expect_stream_wait_external(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
  delete_tensors(2);
  /* The graph keeps the second tensor's event after the tensor is gone. */
  assert_int_equal(mock_pool_stats(0).outstanding, 1);
  mock_graph_destroy();
  assert_int_equal(mock_pool_stats(0).outstanding, 0);
}

static void test_a_capturing_producer_with_a_plain_consumer_is_named(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_C)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_D)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_capture_info(MOCK_STREAM_C, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  /* D is not ordered: the group stops at the failing producer. */
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
  char expected[128]; /* %p as the library writes it: "0xc000" with glibc */
  snprintf(expected, sizeof expected,
           "dl_sync_group_wait: producer stream 2 of 3 (%p on cuda:0) failed", MOCK_STREAM_C);
  assert_error_mentions(expected);
  assert_error_mentions("Run the consumer on the producer's current work stream");
  /* The made dependency stays made, and the group is empty. */
  assert_int_equal(mock_pool_stats(0).acquired, 1);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_two_different_captures_are_ecapture(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 8, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
  assert_error_mentions("two different graphs");
}

static void test_an_invalidated_consumer_capture_is_ecapture_for_streams_and_events(void **state) {
  (void)state;
  record_tensor(&tensors[0], MOCK_EVENT_2);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_INVALIDATED, 3, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
  assert_error_mentions("invalidated graph capture");
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_INVALIDATED, 3, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
  assert_error_mentions("invalidated graph capture");
  delete_tensors(1);
}

static void test_a_legacy_consumer_under_capture_is_ecapture_without_asking_it(void **state) {
  (void)state;
  dl_sync_group group = group_on(NULL);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
  assert_error_mentions("legacy stream cannot join a capture");
  /* The stream=None policy is the producer's export rule; a group is the consumer's. */
  assert_int_equal(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_NONE_IS_NO_SYNC), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_ECAPTURE);
}

/* --- failures ------------------------------------------------------------------------- */

static void test_a_failing_wait_names_its_producer_and_keeps_earlier_dependencies(void **state) {
  (void)state;
  record_tensor(&tensors[0], MOCK_EVENT_2);
  record_tensor(&tensors[1], MOCK_EVENT_3);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &tensors[1]), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_3, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_EBACKEND);
  char expected[160];
  snprintf(expected, sizeof expected,
           "dl_sync_group_wait: tensor event 2 of 2 (%p on cuda:0) failed: "
           "[mockStreamWaitEvent][mockErrorInvalid]",
           MOCK_EVENT_3);
  assert_error_mentions(expected);
  delete_tensors(2);
}

static void test_a_failing_record_returns_the_event(void **state) {
  (void)state;
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_EBACKEND);
  assert_error_mentions("producer stream 1 of 1");
  assert_error_mentions("[mockEventRecord]");
  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.idle, 1);
}

static void test_bad_input_is_einval(void **state) {
  (void)state;
  dl_sync_group group;
  memset(&group, 0, sizeof group);
  assert_int_equal(dl_sync_group_init(NULL, on(cuda0, MOCK_STREAM_B)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_EINVAL);
  assert_error_mentions("was not initialized: call dl_sync_group_init first");
  assert_int_equal(dl_sync_group_wait(NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_init(&group, on((DLDevice){kDLCUDA, -1}, MOCK_STREAM_B)),
                   DL_SYNC_EINVAL);
  group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on((DLDevice){kDLCUDA, 300}, MOCK_STREAM_A)),
                   DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_stream(&group, on(rocm0, MOCK_STREAM_A)), DL_SYNC_EINVAL);
  assert_error_mentions("the producer stream is on rocm:0 and the group's consumer on cuda:0");
  assert_int_equal(dl_sync_group_add_stream(&group, on(cpu0, NULL)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_tensor(&group, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_legacy_tensor(&group, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_add_tensor(NULL, &tensors[0]), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK); /* nothing was added */
}

static void test_more_than_the_maximum_distinct_producers_is_einval(void **state) {
  (void)state;
  static int handles[DL_SYNC_GROUP_MAX + 1];
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int i = 0; i < DL_SYNC_GROUP_MAX; i++)
    assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, &handles[i])), DL_SYNC_OK);
  /* A stream already in a full group still costs nothing. */
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, &handles[0])), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, &handles[DL_SYNC_GROUP_MAX])),
                   DL_SYNC_EINVAL);
  assert_error_mentions("already holds 16 distinct producer streams");
  /* Discarded without waiting: the group holds nothing, no runtime call. */
}

static void test_more_than_the_maximum_distinct_tables_is_einval(void **state) {
  (void)state;
  asked_a = 0;
  DLPackExchangeAPI tables[DL_SYNC_GROUP_MAX + 1];
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int i = 0; i <= DL_SYNC_GROUP_MAX; i++) tables[i] = table_of(current_stream_a);
  for (int i = 0; i < DL_SYNC_GROUP_MAX; i++)
    assert_int_equal(dl_sync_group_add_exchange_api(&group, &tables[i], cuda0), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &tables[0], cuda0), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_exchange_api(&group, &tables[DL_SYNC_GROUP_MAX], cuda0),
                   DL_SYNC_EINVAL);
  assert_error_mentions("already holds 16 distinct exchange tables and devices");
  assert_int_equal(asked_a, DL_SYNC_GROUP_MAX); /* the one too many was not asked */
}

static void test_more_than_the_maximum_distinct_tensor_events_is_einval(void **state) {
  (void)state;
  static DLManagedTensorVersioned many[DL_SYNC_GROUP_MAX + 1];
  for (int i = 0; i <= DL_SYNC_GROUP_MAX; i++)
    record_tensor(&many[i], (void *)(uintptr_t)(0xE100 + i));
  dl_sync_group group = group_on(MOCK_STREAM_B);
  for (int i = 0; i < DL_SYNC_GROUP_MAX; i++)
    assert_int_equal(dl_sync_group_add_tensor(&group, &many[i]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &many[0]), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_tensor(&group, &many[DL_SYNC_GROUP_MAX]), DL_SYNC_EINVAL);
  assert_error_mentions("already holds 16 distinct tensor events");
  for (int i = 0; i <= DL_SYNC_GROUP_MAX; i++) many[i].deleter(&many[i]);
}

static void test_a_tensor_event_of_another_family_is_einval(void **state) {
  (void)state;
  DLManagedTensorVersioned on_rocm = {.version = {1, 3}};
  on_rocm.dl_tensor.device = rocm0;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  assert_int_equal(dl_sync_tensor_record(&on_rocm, on(rocm0, MOCK_STREAM_A)), DL_SYNC_OK);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_tensor(&group, &on_rocm), DL_SYNC_EINVAL);
  assert_error_mentions("the tensor's event is on rocm:0 and the group's consumer on cuda:0");
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK); /* nothing was added */
  on_rocm.deleter(&on_rocm);
}

static void test_a_cpu_consumer_has_nothing_to_order(void **state) {
  (void)state;
  dl_sync_group group;
  assert_int_equal(dl_sync_group_init(&group, on(cpu0, NULL)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cpu0, NULL)), DL_SYNC_OK);
  assert_int_equal(dl_sync_group_add_stream(&group, on(cuda0, MOCK_STREAM_A)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_OK);
}

static void test_a_producer_of_another_backend_is_einval(void **state) {
  (void)state;
  assert_int_equal(dl_sync_set_backend(kDLCUDAHost, &counting_backend), DL_SYNC_OK);
  dl_sync_group group = group_on(MOCK_STREAM_B);
  assert_int_equal(dl_sync_group_add_stream(&group, on((DLDevice){kDLCUDAHost, 0}, MOCK_STREAM_A)),
                   DL_SYNC_OK);
  assert_int_equal(dl_sync_group_wait(&group), DL_SYNC_EINVAL);
  assert_error_mentions("producer stream 1 of 1");
  assert_error_mentions("served by the 'counting' backend and the consumer by 'mock'");
  assert_int_equal(dl_sync_set_backend(kDLCUDAHost, &mock_backend), DL_SYNC_OK);
}

/* Callers hold the struct by value: its size is part of the ABI of this major version. */
static void test_the_group_layout_is_pinned(void **state) {
  (void)state;
  if (sizeof(void *) != 8) skip();
  assert_int_equal(DL_SYNC_GROUP_MAX, 16);
  assert_int_equal(sizeof(dl_sync_group), 936);
}

#define GROUP_TEST(name) \
  cmocka_unit_test_setup_teardown(name, mock_suite_setup, mock_suite_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      GROUP_TEST(test_three_tensors_from_one_stream_cost_one_record_one_wait_two_queries),
      GROUP_TEST(test_the_group_is_reusable_after_a_wait),
      GROUP_TEST(test_two_producer_streams_cost_one_dependency_each_and_one_consumer_query),
      GROUP_TEST(test_one_handle_on_two_devices_is_two_streams),
      GROUP_TEST(test_the_consumer_stream_costs_nothing),
      GROUP_TEST(test_two_exchange_tables_are_asked_once_each),
      GROUP_TEST(test_two_tables_on_one_stream_make_one_dependency),
      GROUP_TEST(test_a_failing_table_is_named_and_asked_again_next_time),
      GROUP_TEST(test_distinct_tensor_events_cost_one_wait_each_and_one_consumer_query),
      GROUP_TEST(test_a_shared_tensor_event_costs_one_wait),
      GROUP_TEST(test_streams_and_tensor_events_share_the_consumer_query),
      GROUP_TEST(test_a_tensor_without_event_adds_nothing),
      GROUP_TEST(test_producers_in_the_consumers_capture_are_fork_join_edges),
      GROUP_TEST(test_a_capturing_consumer_gets_an_external_wait_per_producer_stream),
      GROUP_TEST(test_a_capturing_consumer_gets_an_external_wait_per_tensor_event),
      GROUP_TEST(test_a_capturing_producer_with_a_plain_consumer_is_named),
      GROUP_TEST(test_two_different_captures_are_ecapture),
      GROUP_TEST(test_an_invalidated_consumer_capture_is_ecapture_for_streams_and_events),
      GROUP_TEST(test_a_legacy_consumer_under_capture_is_ecapture_without_asking_it),
      GROUP_TEST(test_a_failing_wait_names_its_producer_and_keeps_earlier_dependencies),
      GROUP_TEST(test_a_failing_record_returns_the_event),
      GROUP_TEST(test_bad_input_is_einval),
      GROUP_TEST(test_more_than_the_maximum_distinct_producers_is_einval),
      GROUP_TEST(test_more_than_the_maximum_distinct_tables_is_einval),
      GROUP_TEST(test_more_than_the_maximum_distinct_tensor_events_is_einval),
      GROUP_TEST(test_a_tensor_event_of_another_family_is_einval),
      GROUP_TEST(test_a_cpu_consumer_has_nothing_to_order),
      GROUP_TEST(test_a_producer_of_another_backend_is_einval),
      cmocka_unit_test(test_the_group_layout_is_pinned),
  };
  return cmocka_run_group_tests_name("group", tests, NULL, NULL);
}
