/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bad-input matrix: every public function x every bad input, with the status and the
 * message it gets. docs/errors.md is generated from this table
 * (test_bad_input --markdown) and a test checks that it is current.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"
#include "ordering/table_producer.h"

static const DLDevice cuda0 = {kDLCUDA, 0}, rocm0 = {kDLROCM, 0}, cpu0 = {kDLCPU, 0};
static const DLDevice unknown_type = {(DLDeviceType)42, 0}, negative_id = {kDLCUDA, -1};
static const DLDevice id_too_large = {kDLCUDA, DL_SYNC_MAX_DEVICES};
static dl_sync_stream out_stream;
static int needs_sync;
static dl_sync_stream_arg out_arg;
static DLManagedTensorVersioned *out_tensor;

static dl_sync_stream view(DLDevice d, void *h) {
  return dl_sync_stream_view(d, h);
}
static dl_sync_stream_arg none(void) {
  return dl_sync_stream_arg_none();
}
static dl_sync_stream_arg num(int64_t v) {
  return dl_sync_stream_arg_int(v);
}

/* Tensors: a CPU one, a corrupt one (dlsync's deleter, foreign manager_ctx), a foreign one,
   and events dlsync cannot use: of a later owner-record ABI, of the ROCm runtime on a
   CUDA tensor (their records are put back by teardown). */
static DLManagedTensorVersioned cpu_tensor, corrupt_tensor, foreign_tensor, cuda_tensor;
static DLManagedTensorVersioned future_abi_tensor, rocm_event_tensor;
static DLManagedTensor legacy_corrupt;
static int garbage[8];
static void *corrupt_owner, *legacy_corrupt_owner; /* restored by teardown */
static void foreign_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static void prepare_tensors(void) {
  cpu_tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  cpu_tensor.dl_tensor.device = cpu0;
  foreign_tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = foreign_deleter};
  foreign_tensor.dl_tensor.device = cuda0;
  cuda_tensor = foreign_tensor;
  corrupt_tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  corrupt_tensor.dl_tensor.device = cuda0;
  dl_sync_tensor_record(&corrupt_tensor, view(cuda0, NULL));
  corrupt_owner = corrupt_tensor.manager_ctx;
  corrupt_tensor.manager_ctx = garbage;
  legacy_corrupt = (DLManagedTensor){.dl_tensor = {.device = cuda0}};
  dl_sync_legacy_tensor_record(&legacy_corrupt, view(cuda0, NULL));
  legacy_corrupt_owner = legacy_corrupt.manager_ctx;
  legacy_corrupt.manager_ctx = garbage;
  future_abi_tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  future_abi_tensor.dl_tensor.device = cuda0;
  dl_sync_tensor_record(&future_abi_tensor, view(cuda0, NULL));
  ((dl_sync_tensor_event_owner *)future_abi_tensor.manager_ctx)->abi_major += 1;
  rocm_event_tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  rocm_event_tensor.dl_tensor.device = cuda0;
  dl_sync_tensor_record(&rocm_event_tensor, view(cuda0, NULL));
  ((dl_sync_tensor_event_owner *)rocm_event_tensor.manager_ctx)->runtime_family =
      DL_SYNC_RUNTIME_FAMILY_ROCM;
}

/* A tensor released twice: the first release waits for a held stream's work. */
static void release_gate(void *arg) {
  atomic_int *open = arg;
  while (!atomic_load(open)) continue;
}

static int released_twice(void) {
  static DLManagedTensorVersioned tensor;
  static atomic_int open;
  tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = foreign_deleter};
  tensor.dl_tensor.device = cuda0;
  atomic_store(&open, 0);
  dl_sync_sim_stream *s;
  dl_sync_sim_stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_launch(s, "gate", release_gate, &open, NULL, 0);
  dl_sync_tensor_release(&tensor, view(cuda0, s));
  int status = dl_sync_tensor_release(&tensor, view(cuda0, s));
  atomic_store(&open, 1); /* what follows succeeds: the message stays the second release's */
  dl_sync_sim_stream_synchronize(s);
  dl_sync_release_poll();
  dl_sync_sim_stream_destroy(s);
  return status;
}

static int capturing_producer(void) {
  dl_sync_sim_stream *s;
  dl_sync_sim_stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_begin_capture(s, DL_SYNC_SIM_CAPTURE_GLOBAL);
  int status = dl_sync_tensor_record(&cuda_tensor, view(cuda0, s));
  dl_sync_sim_graph *g = NULL;
  dl_sync_sim_stream_end_capture(s, &g);
  dl_sync_sim_graph_destroy(g);
  return status;
}

static int stream_static(DLDeviceType t, int32_t i, void **o) {
  (void)t;
  (void)i;
  *o = NULL;
  return 0;
}
static int stream_fails(DLDeviceType t, int32_t i, void **o) {
  (void)t;
  (void)i;
  (void)o;
  return -1;
}

static int exchange(uint32_t major, uint32_t minor, int cyclic, DLPackCurrentWorkStream fn) {
  DLPackExchangeAPI api = {.header = {{major, minor}, NULL}, .current_work_stream = fn};
  if (cyclic) api.header.prev_api = &api.header;
  return dl_sync_stream_from_exchange_api(&api, cuda0, &out_stream);
}

static int missing_callback(void) {
  dl_sync_backend b = *dl_sync_sim_backend();
  b.stream_wait = NULL;
  return dl_sync_set_backend(kDLCUDA, &b);
}

static int after_shutdown(void) {
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, 0);
  dl_sync_sim_stream_create(&b, 0);
  dl_sync_push_dep(view(cuda0, a), view(cuda0, b));
  dl_sync_shutdown();
  return dl_sync_push_dep(view(cuda0, a), view(cuda0, b)); /* the pool is rebuilt */
}

/* A stream of the simulated device exported through a built-in backend (the simulator
   not installed for the device type): refused before any runtime call. */
static int sim_stream_given_to(DLDevice device, const dl_sync_backend *backend) {
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, 0);
  dl_sync_sim_stream_create(&b, 0);
  dl_sync_set_backend(device.device_type, backend);
  int status = dl_sync_export(view(device, a), num((int64_t)(intptr_t)b));
  dl_sync_set_backend(device.device_type, dl_sync_sim_backend());
  dl_sync_sim_stream_destroy(a);
  dl_sync_sim_stream_destroy(b);
  return status;
}

/* Imports through producer 0's table (ordering/table_producer.h) made to misbehave: the
   status, unless the failure broke its promise (the tensor made not given back, *out or
   the object written): then -100, which no row expects. */
static int checked_import(const DLPackExchangeAPI *api, table_array *array, dl_sync_stream consumer,
                          int grouped) {
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)array;
  array->canary = 0x5eed;
  int status;
  if (grouped) {
    dl_sync_group g;
    dl_sync_group_init(&g, consumer);
    status = dl_sync_group_add_exchange_import(&g, api, array, &t);
  } else {
    status = dl_sync_exchange_import(api, array, consumer, &t);
  }
  int kept = atomic_load(&array->taken) != atomic_load(&array->deleted);
  if (status < 0 && (kept || t != (DLManagedTensorVersioned *)array || array->canary != 0x5eed))
    return -100;
  if (status == DL_SYNC_OK) t->deleter(t);
  return status;
}

static int import_from(table_fault fault, DLDevice tensor_device, DLDevice consumer_device,
                       int grouped) {
  static table_array array;
  table_producers_reset();
  table_producers[0].fault = fault;
  dl_sync_sim_stream *s;
  dl_sync_sim_stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  table_producers[0].answer = s;
  if (fault == TABLE_FAULT_STREAM_ANSWERS) { /* a stream of device 1 */
    dl_sync_sim_set_device(1);
    dl_sync_sim_stream_create((dl_sync_sim_stream **)&table_producers[0].answer, 0);
    dl_sync_sim_set_device(0);
  }
  table_producer_use_stream(0, s);
  table_array_init(&array, tensor_device);
  return checked_import(&table_producers[0].api, &array, view(consumer_device, s), grouped);
}

enum { TABLE_MAJOR_2_ONLY, TABLE_CYCLE, TABLE_NO_CONVERSION, TABLE_NO_STREAM };

static int import_through(int which) {
  static table_array array;
  table_producers_reset();
  DLPackExchangeAPI api = table_producers[0].api;
  if (which == TABLE_MAJOR_2_ONLY || which == TABLE_CYCLE) api.header.version.major = 2;
  if (which == TABLE_CYCLE) api.header.prev_api = &api.header;
  if (which == TABLE_NO_CONVERSION) api.managed_tensor_from_py_object_no_sync = NULL;
  if (which == TABLE_NO_STREAM) api.current_work_stream = NULL;
  table_array_init(&array, cuda0);
  return checked_import(&api, &array, view(cuda0, NULL), 0);
}

static dl_sync_group group;

static dl_sync_group *cuda_group(void) {
  dl_sync_group_init(&group, view(cuda0, NULL));
  return &group;
}

static int uninitialized_group(void) {
  dl_sync_group blank;
  memset(&blank, 0, sizeof blank);
  return dl_sync_group_add_stream(&blank, view(cuda0, NULL));
}

static int too_many_producers(void) {
  static int handles[DL_SYNC_GROUP_MAX + 1];
  dl_sync_group *g = cuda_group();
  int status = DL_SYNC_OK;
  for (int i = 0; i <= DL_SYNC_GROUP_MAX && status == DL_SYNC_OK; i++)
    status = dl_sync_group_add_stream(g, view(cuda0, &handles[i]));
  return status;
}

typedef struct row {
  const char *function;
  const char *input;
  int status;
  const char *message; /* a part of dl_sync_last_error(), or NULL */
} row;

/* X(function, bad input, call, expected status, message part), one row per line: */
/* clang-format off */
#define MATRIX(X)                                                                                                   \
  X("dl_sync_stream_from_arg", "out is NULL", dl_sync_stream_from_arg(cuda0, none(), NULL, &needs_sync), DL_SYNC_EINVAL, "must not be NULL") \
  X("dl_sync_stream_from_arg", "out_needs_sync is NULL", dl_sync_stream_from_arg(cuda0, none(), &out_stream, NULL), DL_SYNC_EINVAL, "must not be NULL") \
  X("dl_sync_stream_from_arg", "unknown device type 42", dl_sync_stream_from_arg(unknown_type, none(), &out_stream, &needs_sync), DL_SYNC_EINVAL, "unknown device type 42") \
  X("dl_sync_stream_from_arg", "negative device id", dl_sync_stream_from_arg(negative_id, none(), &out_stream, &needs_sync), DL_SYNC_EINVAL, "device id -1 on cuda: expected 0 to 255") \
  X("dl_sync_stream_from_arg", "device id 256", dl_sync_stream_from_arg(id_too_large, none(), &out_stream, &needs_sync), DL_SYNC_EINVAL, "device id 256") \
  X("dl_sync_stream_from_arg", "CUDA stream=0", dl_sync_stream_from_arg(cuda0, num(0), &out_stream, &needs_sync), DL_SYNC_EINVAL, "stream=0 is ambiguous on cuda:0") \
  X("dl_sync_stream_from_arg", "CUDA stream=-2", dl_sync_stream_from_arg(cuda0, num(-2), &out_stream, &needs_sync), DL_SYNC_EINVAL, "stream=-2 is invalid on cuda:0") \
  X("dl_sync_stream_from_arg", "ROCm stream=1", dl_sync_stream_from_arg(rocm0, num(1), &out_stream, &needs_sync), DL_SYNC_EINVAL, "stream=1 is invalid on rocm:0") \
  X("dl_sync_stream_from_arg", "ROCm stream=2", dl_sync_stream_from_arg(rocm0, num(2), &out_stream, &needs_sync), DL_SYNC_EINVAL, "stream=2 is invalid on rocm:0") \
  X("dl_sync_stream_from_arg", "CPU stream=-1", dl_sync_stream_from_arg(cpu0, num(-1), &out_stream, &needs_sync), DL_SYNC_EINVAL, "which has no streams: expected None") \
  X("dl_sync_stream_to_arg", "out is NULL", dl_sync_stream_to_arg(view(cuda0, NULL), NULL), DL_SYNC_EINVAL, "out must not be NULL") \
  X("dl_sync_stream_to_arg", "unknown device type 42", dl_sync_stream_to_arg(view(unknown_type, NULL), &out_arg), DL_SYNC_EINVAL, "unknown device type 42") \
  X("dl_sync_stream_to_arg", "negative device id", dl_sync_stream_to_arg(view(negative_id, NULL), &out_arg), DL_SYNC_EINVAL, "device id -1") \
  X("dl_sync_stream_to_arg", "ROCm per-thread stream", dl_sync_stream_to_arg(view(rocm0, DL_SYNC_STREAM_PER_THREAD), &out_arg), DL_SYNC_EINVAL, "has no stream argument") \
  X("dl_sync_push_dep", "unknown device type 42", dl_sync_push_dep(view(unknown_type, NULL), view(cuda0, NULL)), DL_SYNC_EINVAL, "src has unknown device type 42") \
  X("dl_sync_push_dep", "negative device id", dl_sync_push_dep(view(cuda0, NULL), view(negative_id, NULL)), DL_SYNC_EINVAL, "dst has device id -1") \
  X("dl_sync_push_dep", "CUDA and ROCm streams", dl_sync_push_dep(view(cuda0, NULL), view(rocm0, NULL)), DL_SYNC_EINVAL, "different device families") \
  X("dl_sync_export", "CUDA stream=0", dl_sync_export(view(cuda0, NULL), num(0)), DL_SYNC_EINVAL, "stream=0 is ambiguous") \
  X("dl_sync_export", "CPU stream=1", dl_sync_export(view(cpu0, NULL), num(1)), DL_SYNC_EINVAL, "which has no streams") \
  X("dl_sync_export", "unknown device type 42", dl_sync_export(view(unknown_type, NULL), none()), DL_SYNC_EINVAL, "unknown device type 42") \
  X("dl_sync_export", "a simulated device's stream, CUDA driver backend", sim_stream_given_to(cuda0, NULL), DL_SYNC_EINVAL, "is a stream of dlsync's simulated device, given to the 'cuda' backend") \
  X("dl_sync_export", "a simulated device's stream, CUDA runtime backend", sim_stream_given_to(cuda0, dl_sync_cudart_backend()), DL_SYNC_EINVAL, "given to the 'cudart' backend") \
  X("dl_sync_export", "a simulated device's stream, HIP backend", sim_stream_given_to(rocm0, NULL), DL_SYNC_EINVAL, "given to the 'hip' backend") \
  X("dl_sync_set_backend", "unknown device type 5", dl_sync_set_backend(5, dl_sync_sim_backend()), DL_SYNC_EINVAL, "unknown device type 5") \
  X("dl_sync_set_backend", "device type without streams", dl_sync_set_backend(kDLCPU, dl_sync_sim_backend()), DL_SYNC_EINVAL, "has no streams") \
  X("dl_sync_set_backend", "backend missing a callback", missing_callback(), DL_SYNC_EINVAL, "lacks the required callback stream_wait") \
  X("dl_sync_set_capture_policy", "unknown policy 7", dl_sync_set_capture_policy(7), DL_SYNC_EINVAL, "policy 7") \
  X("dl_sync_pool_stats_get", "backend is NULL", dl_sync_pool_stats_get(NULL, 0, NULL), DL_SYNC_EINVAL, "must not be NULL") \
  X("dl_sync_pool_stats_get", "negative device id", dl_sync_pool_stats_get(dl_sync_sim_backend(), -1, &(dl_sync_pool_stats){0}), DL_SYNC_EINVAL, "device id -1") \
  X("dl_sync_tensor_record", "tensor is NULL", dl_sync_tensor_record(NULL, view(cuda0, NULL)), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_tensor_record", "CPU tensor, CUDA stream", dl_sync_tensor_record(&cpu_tensor, view(cuda0, NULL)), DL_SYNC_EINVAL, "but the producer stream is on cuda:0") \
  X("dl_sync_tensor_record", "CPU producer stream", dl_sync_tensor_record(&cpu_tensor, view(cpu0, NULL)), DL_SYNC_EINVAL, "which has no streams") \
  X("dl_sync_tensor_record", "corrupt tensor", dl_sync_tensor_record(&corrupt_tensor, view(cuda0, NULL)), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_tensor_record", "producer stream capturing", capturing_producer(), DL_SYNC_ECAPTURE, "is capturing a graph") \
  X("dl_sync_tensor_wait", "tensor is NULL", dl_sync_tensor_wait(NULL, view(cuda0, NULL)), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_tensor_wait", "corrupt tensor", dl_sync_tensor_wait(&corrupt_tensor, view(cuda0, NULL)), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_tensor_wait", "another producer's tensor", dl_sync_tensor_wait(&foreign_tensor, view(cuda0, NULL)), DL_SYNC_OK, NULL) \
  X("dl_sync_tensor_release", "tensor is NULL", dl_sync_tensor_release(NULL, view(cuda0, NULL)), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_tensor_release", "consumer stream of another device", dl_sync_tensor_release(&foreign_tensor, view((DLDevice){kDLCUDA, 1}, NULL)), DL_SYNC_EINVAL, "release it after the work of a stream of its own device") \
  X("dl_sync_tensor_release", "CPU consumer with a stream", dl_sync_tensor_release(&cpu_tensor, view(cpu0, &garbage)), DL_SYNC_EINVAL, "which has no streams: pass NULL") \
  X("dl_sync_tensor_release", "tensor already released", released_twice(), DL_SYNC_EINVAL, "is already released") \
  X("dl_sync_tensor_record_reuse", "per-thread reuse stream", dl_sync_tensor_record_reuse(&foreign_tensor, view(cuda0, NULL), view(cuda0, DL_SYNC_STREAM_PER_THREAD)), DL_SYNC_EINVAL, "is the per-thread default stream, a different stream on each thread") \
  X("dl_sync_tensor_record_reuse", "reuse stream of another device", dl_sync_tensor_record_reuse(&foreign_tensor, view(cuda0, NULL), view((DLDevice){kDLCUDA, 1}, NULL)), DL_SYNC_EINVAL, "the reuse stream is on cuda:1 and tensor") \
  X("dl_sync_tensor_wait", "event of a later owner-record ABI", dl_sync_tensor_wait(&future_abi_tensor, view(cuda0, NULL)), DL_SYNC_ENOTSUP, "expected tensor-event ABI major 1") \
  X("dl_sync_tensor_wait", "ROCm event, CUDA consumer stream", dl_sync_tensor_wait(&rocm_event_tensor, view(cuda0, NULL)), DL_SYNC_ENOTSUP, "the consumer stream on cuda:0 cannot wait on it") \
  X("dl_sync_tensor_synchronize", "tensor is NULL", dl_sync_tensor_synchronize(NULL), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_tensor_synchronize", "corrupt tensor", dl_sync_tensor_synchronize(&corrupt_tensor), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_tensor_has_event", "tensor is NULL", dl_sync_tensor_has_event(NULL), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_tensor_has_event", "corrupt tensor", dl_sync_tensor_has_event(&corrupt_tensor), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_tensor_has_event", "event of a later owner-record ABI", dl_sync_tensor_has_event(&future_abi_tensor), DL_SYNC_ENOTSUP, "expected tensor-event ABI major 1") \
  X("dl_sync_legacy_tensor_record", "tensor is NULL", dl_sync_legacy_tensor_record(NULL, view(cuda0, NULL)), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_legacy_tensor_wait", "corrupt tensor", dl_sync_legacy_tensor_wait(&legacy_corrupt, view(cuda0, NULL)), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_legacy_tensor_synchronize", "tensor is NULL", dl_sync_legacy_tensor_synchronize(NULL), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_legacy_tensor_has_event", "corrupt tensor", dl_sync_legacy_tensor_has_event(&legacy_corrupt), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_stream_from_exchange_api", "api is NULL", dl_sync_stream_from_exchange_api(NULL, cuda0, &out_stream), DL_SYNC_EINVAL, "must not be NULL") \
  X("dl_sync_stream_from_exchange_api", "prev_api cycle", exchange(2, 0, 1, stream_static), DL_SYNC_EINVAL, "cyclic or corrupt") \
  X("dl_sync_stream_from_exchange_api", "only major version 2", exchange(2, 0, 0, stream_static), DL_SYNC_ENOTSUP, "no exchange table of major version 1") \
  X("dl_sync_stream_from_exchange_api", "version 1.1", exchange(1, 1, 0, stream_static), DL_SYNC_EINVAL, "tables exist since DLPack 1.2") \
  X("dl_sync_stream_from_exchange_api", "no current_work_stream", exchange(1, 3, 0, NULL), DL_SYNC_ENOTSUP, "has no current_work_stream") \
  X("dl_sync_stream_from_exchange_api", "producer returns -1", exchange(1, 3, 0, stream_fails), DL_SYNC_EBACKEND, "failed with -1") \
  X("dl_sync_exchange_import", "api is NULL", dl_sync_exchange_import(NULL, &garbage, view(cuda0, NULL), &out_tensor), DL_SYNC_EINVAL, "api must not be NULL") \
  X("dl_sync_exchange_import", "py_object is NULL", dl_sync_exchange_import(&table_producers[0].api, NULL, view(cuda0, NULL), &out_tensor), DL_SYNC_EINVAL, "py_object must not be NULL") \
  X("dl_sync_exchange_import", "out is NULL", dl_sync_exchange_import(&table_producers[0].api, &garbage, view(cuda0, NULL), NULL), DL_SYNC_EINVAL, "out must not be NULL") \
  X("dl_sync_exchange_import", "a table of major version 2 only", import_through(TABLE_MAJOR_2_ONLY), DL_SYNC_ENOTSUP, "no exchange table of major version 1 in the chain (newest is 2.3)") \
  X("dl_sync_exchange_import", "prev_api cycle", import_through(TABLE_CYCLE), DL_SYNC_EINVAL, "cyclic or corrupt") \
  X("dl_sync_exchange_import", "no managed_tensor_from_py_object_no_sync", import_through(TABLE_NO_CONVERSION), DL_SYNC_ENOTSUP, "has no managed_tensor_from_py_object_no_sync: import through __dlpack__") \
  X("dl_sync_exchange_import", "no current_work_stream, a CUDA tensor", import_through(TABLE_NO_STREAM), DL_SYNC_ENOTSUP, "has no current_work_stream") \
  X("dl_sync_exchange_import", "current_work_stream returns -1", import_from(TABLE_FAULT_STREAM_FAILS, cuda0, cuda0, 0), DL_SYNC_EBACKEND, "the producer's current_work_stream(cuda, 0) failed with -1") \
  X("dl_sync_exchange_import", "current_work_stream answers a stream of device 1", import_from(TABLE_FAULT_STREAM_ANSWERS, cuda0, cuda0, 0), DL_SYNC_EBACKEND, "that the producer's current_work_stream answered for cuda:0 before the consumer's stream") \
  X("dl_sync_exchange_import", "the conversion returns -1", import_from(TABLE_FAULT_CONVERSION_FAILS, cuda0, cuda0, 0), DL_SYNC_EBACKEND, "managed_tensor_from_py_object_no_sync failed with -1") \
  X("dl_sync_exchange_import", "the conversion returns no tensor", import_from(TABLE_FAULT_NO_TENSOR, cuda0, cuda0, 0), DL_SYNC_EBACKEND, "returned 0 and no tensor") \
  X("dl_sync_exchange_import", "a tensor of DLPack 2.3", import_from(TABLE_FAULT_TENSOR_MAJOR_2, cuda0, cuda0, 0), DL_SYNC_EINVAL, "is of DLPack version 2.3: expected major version 1") \
  X("dl_sync_exchange_import", "a tensor of device type 42", import_from(TABLE_FAULT_TENSOR_UNKNOWN_TYPE, cuda0, cuda0, 0), DL_SYNC_EINVAL, "the producer's tensor has unknown device type 42") \
  X("dl_sync_exchange_import", "CUDA tensor, ROCm consumer stream", import_from(TABLE_FAULT_NONE, cuda0, rocm0, 0), DL_SYNC_EINVAL, "expected a consumer stream of the tensor's device family") \
  X("dl_sync_exchange_import", "unknown consumer device type 42", import_from(TABLE_FAULT_NONE, cuda0, unknown_type, 0), DL_SYNC_EINVAL, "the consumer's stream has unknown device type 42") \
  X("dl_sync_group_add_exchange_import", "out is NULL", dl_sync_group_add_exchange_import(cuda_group(), &table_producers[0].api, &garbage, NULL), DL_SYNC_EINVAL, "out must not be NULL") \
  X("dl_sync_group_add_exchange_import", "current_work_stream returns -1", import_from(TABLE_FAULT_STREAM_FAILS, cuda0, cuda0, 1), DL_SYNC_EBACKEND, "failed with -1") \
  X("dl_sync_group_add_exchange_import", "the conversion returns -1", import_from(TABLE_FAULT_CONVERSION_FAILS, cuda0, cuda0, 1), DL_SYNC_EBACKEND, "managed_tensor_from_py_object_no_sync failed with -1") \
  X("dl_sync_group_add_exchange_import", "CUDA tensor, ROCm group", import_from(TABLE_FAULT_NONE, cuda0, rocm0, 1), DL_SYNC_EINVAL, "expected a device of the consumer's family") \
  X("dl_sync_group_init", "group is NULL", dl_sync_group_init(NULL, view(cuda0, NULL)), DL_SYNC_EINVAL, "group must not be NULL") \
  X("dl_sync_group_init", "unknown device type 42", dl_sync_group_init(&group, view(unknown_type, NULL)), DL_SYNC_EINVAL, "unknown device type 42") \
  X("dl_sync_group_add_stream", "uninitialized group", uninitialized_group(), DL_SYNC_EINVAL, "was not initialized: call dl_sync_group_init first") \
  X("dl_sync_group_add_stream", "ROCm producer, CUDA consumer", dl_sync_group_add_stream(cuda_group(), view(rocm0, NULL)), DL_SYNC_EINVAL, "expected a device of the consumer's family") \
  X("dl_sync_group_add_stream", "17 distinct producer streams", too_many_producers(), DL_SYNC_EINVAL, "already holds 16 distinct producer streams") \
  X("dl_sync_group_add_exchange_api", "api is NULL", dl_sync_group_add_exchange_api(cuda_group(), NULL, cuda0), DL_SYNC_EINVAL, "must not be NULL") \
  X("dl_sync_group_add_tensor", "tensor is NULL", dl_sync_group_add_tensor(cuda_group(), NULL), DL_SYNC_EINVAL, "tensor must not be NULL") \
  X("dl_sync_group_add_tensor", "corrupt tensor", dl_sync_group_add_tensor(cuda_group(), &corrupt_tensor), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_group_add_tensor", "another producer's tensor", dl_sync_group_add_tensor(cuda_group(), &foreign_tensor), DL_SYNC_OK, NULL) \
  X("dl_sync_group_add_legacy_tensor", "corrupt tensor", dl_sync_group_add_legacy_tensor(cuda_group(), &legacy_corrupt), DL_SYNC_EINVAL, "the tensor is corrupt") \
  X("dl_sync_group_wait", "group is NULL", dl_sync_group_wait(NULL), DL_SYNC_EINVAL, "group must not be NULL") \
  X("dl_sync_push_dep", "after dl_sync_shutdown", after_shutdown(), DL_SYNC_OK, NULL)
/* clang-format on */

static const row rows[] = {
#define DL_SYNC__ROW(function, input, call, status, message) {function, input, status, message},
    MATRIX(DL_SYNC__ROW)
#undef DL_SYNC__ROW
};

static int run_row(size_t index) {
  size_t i = 0;
#define DL_SYNC__RUN(function, input, call, status, message) \
  if (i++ == index) return (call);
  MATRIX(DL_SYNC__RUN)
#undef DL_SYNC__RUN
  return -100;
}

static int setup(void **state) {
  (void)state;
  dl_sync_sim_reset();
  const int32_t stream_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
    dl_sync_set_backend(stream_types[i], dl_sync_sim_backend());
  prepare_tensors();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  corrupt_tensor.manager_ctx = corrupt_owner;
  corrupt_tensor.deleter(&corrupt_tensor);
  legacy_corrupt.manager_ctx = legacy_corrupt_owner;
  legacy_corrupt.deleter(&legacy_corrupt);
  ((dl_sync_tensor_event_owner *)future_abi_tensor.manager_ctx)->abi_major =
      DL_SYNC_TENSOR_EVENT_ABI_MAJOR;
  future_abi_tensor.deleter(&future_abi_tensor);
  ((dl_sync_tensor_event_owner *)rocm_event_tensor.manager_ctx)->runtime_family =
      DL_SYNC_RUNTIME_FAMILY_CUDA;
  rocm_event_tensor.deleter(&rocm_event_tensor);
  dl_sync_sim_reset();
  dl_sync_shutdown();
  return 0;
}

static void test_every_row_of_the_matrix(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    /* A known message first: a row that succeeds must leave it as it is. */
    dl_sync_set_capture_policy(-7);
    char before[512];
    snprintf(before, sizeof before, "%s", dl_sync_last_error());
    int status = run_row(i);
    if (status != rows[i].status)
      fail_msg("%s with %s: %s, expected %s (%s)", rows[i].function, rows[i].input,
               dl_sync_status_name(status), dl_sync_status_name(rows[i].status),
               dl_sync_last_error());
    if (rows[i].message != NULL && strstr(dl_sync_last_error(), rows[i].message) == NULL)
      fail_msg("%s with %s: message \"%s\" lacks \"%s\"", rows[i].function, rows[i].input,
               dl_sync_last_error(), rows[i].message);
    if (status >= 0 && strcmp(before, dl_sync_last_error()) != 0)
      fail_msg("%s with %s succeeded but wrote \"%s\"", rows[i].function, rows[i].input,
               dl_sync_last_error());
    if (status < 0 &&
        strncmp(dl_sync_last_error(), rows[i].function, strlen(rows[i].function)) != 0)
      fail_msg("%s with %s: message \"%s\" does not start with the function's name",
               rows[i].function, rows[i].input, dl_sync_last_error());
  }
  print_message("%lu rows checked\n", (unsigned long)(sizeof rows / sizeof rows[0]));
}

static void print_markdown(void) {
  printf(
      "# Bad input: what each public function answers\n\n"
      "Generated by `tests/test_bad_input --markdown`; every row is checked by the test\n"
      "`bad_input`, and the test `errors_doc_is_current` fails when this page is stale.\n"
      "Messages start with the function's name; the column gives a part of each. A call\n"
      "that succeeds writes no message: `dl_sync_last_error()` keeps the last failure's.\n"
      "The Python API's rows are in [errors-python.md](errors-python.md).\n\n"
      "| function | bad input | status | Python exception | message contains |\n"
      "|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const char *exception = dl_sync_python_exception(rows[i].status);
    printf("| `%s` | %s | `%s` | %s | %s |\n", rows[i].function, rows[i].input,
           dl_sync_status_name(rows[i].status), exception ? exception : "-",
           rows[i].message ? rows[i].message : "-");
  }
  printf(
      "\nLifecycle: `dl_sync_shutdown()` destroys the idle pooled events and frees the pools;\n"
      "later calls re-initialize them on demand (last row). At exit (or when the library\n"
      "holding dlsync is unloaded) dlsync only deletes its thread-cache key, so a process\n"
      "may exit with pooled and per-tensor events outstanding without any runtime call\n"
      "after `main` returns. The idle events a thread keeps in its\n"
      "cache go back to the pool when the thread exits (no runtime call) and at\n"
      "`dl_sync_shutdown()`.\n");
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--markdown") == 0) {
    print_markdown();
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_row_of_the_matrix, setup, teardown),
  };
  return cmocka_run_group_tests_name("bad_input", tests, NULL, NULL);
}
