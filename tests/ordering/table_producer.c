/* SPDX-License-Identifier: Apache-2.0 */
#include "table_producer.h"

#include <stdlib.h>
#include <string.h>

table_producer table_producers[TABLE_PRODUCERS];

/* Each producer's current stream, per thread. */
static _Thread_local void *current[TABLE_PRODUCERS];

void table_producer_use_stream(int i, void *stream) {
  current[i] = stream;
}

void table_array_init(table_array *array, DLDevice device) {
  memset(array, 0, sizeof *array);
  array->device = device;
}

/* A tensor the producer made: the array's block, one dimension of int32. */
typedef struct table_tensor {
  DLManagedTensorVersioned tensor;
  table_array *array;
  int64_t shape[1];
} table_tensor;

static void table_tensor_deleter(DLManagedTensorVersioned *t) {
  table_tensor *made = (table_tensor *)t;
  atomic_fetch_add(&made->array->deleted, 1);
  free(made);
}

static void describe(DLTensor *out, table_array *array, int64_t *shape) {
  *out = (DLTensor){.data = array->data.words,
                    .device = array->device,
                    .ndim = 1,
                    .dtype = {kDLInt, 32, 1},
                    .shape = shape};
}

static int current_work_stream(int i, DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  table_producer *p = &table_producers[i];
  atomic_fetch_add(&p->asked, 1);
  if (p->fault == TABLE_FAULT_STREAM_FAILS) return -1;
  *out = p->fault == TABLE_FAULT_STREAM_ANSWERS ? p->answer : current[i];
  return 0;
}

static int from_py_object(int i, void *object, DLManagedTensorVersioned **out) {
  table_producer *p = &table_producers[i];
  table_array *array = object;
  if (p->fault == TABLE_FAULT_CONVERSION_FAILS) return -1;
  if (p->fault == TABLE_FAULT_NO_TENSOR) return 0;
  table_tensor *made = calloc(1, sizeof *made);
  if (made == NULL) return -1;
  made->array = array;
  made->shape[0] = PATTERN_WORDS;
  made->tensor.version = (DLPackVersion){p->fault == TABLE_FAULT_TENSOR_MAJOR_2 ? 2 : 1, 3};
  made->tensor.deleter = table_tensor_deleter;
  describe(&made->tensor.dl_tensor, array, made->shape);
  if (p->fault == TABLE_FAULT_TENSOR_UNKNOWN_TYPE)
    made->tensor.dl_tensor.device.device_type = (DLDeviceType)42;
  if (p->name_reuse) { /* the block goes back to the pool on the current stream */
    dl_sync_stream stream = dl_sync_stream_view(array->device, current[i]);
    if (dl_sync_tensor_record_reuse(&made->tensor, stream, stream) != DL_SYNC_OK) {
      free(made);
      return -1;
    }
  }
  atomic_fetch_add(&array->taken, 1);
  *out = &made->tensor;
  return 0;
}

/* A non-owning view: the array's block, its shape in the array's own storage. */
static int dltensor_from_py_object(void *object, DLTensor *out) {
  static const int64_t shape[1] = {PATTERN_WORDS};
  describe(out, object, (int64_t *)shape);
  return 0;
}

/* One function of each kind per producer: the table's functions take no context. */
#define TABLE_FUNCTIONS(i)                                                        \
  static int current_work_stream_##i(DLDeviceType type, int32_t id, void **out) { \
    return current_work_stream(i, type, id, out);                                 \
  }                                                                               \
  static int from_py_object_##i(void *object, DLManagedTensorVersioned **out) {   \
    return from_py_object(i, object, out);                                        \
  }
TABLE_FUNCTIONS(0)
TABLE_FUNCTIONS(1)
TABLE_FUNCTIONS(2)

void table_producers_reset(void) {
  static const DLPackCurrentWorkStream streams[TABLE_PRODUCERS] = {
      current_work_stream_0, current_work_stream_1, current_work_stream_2};
  static const DLPackManagedTensorFromPyObjectNoSync conversions[TABLE_PRODUCERS] = {
      from_py_object_0, from_py_object_1, from_py_object_2};
  for (int i = 0; i < TABLE_PRODUCERS; i++) {
    table_producer *p = &table_producers[i];
    memset(p, 0, sizeof *p);
    p->api.header.version = (DLPackVersion){1, 3};
    p->api.managed_tensor_from_py_object_no_sync = conversions[i];
    p->api.dltensor_from_py_object_no_sync = dltensor_from_py_object;
    p->api.current_work_stream = streams[i];
    current[i] = NULL;
  }
}
