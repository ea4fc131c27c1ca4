/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A producer framework written in C that exposes a DLPack exchange table, as a framework's
 * extension does (DLPack 1.3): its arrays are pattern blocks (ordering.h) that it writes on
 * its current work stream, which is per thread, as PyTorch's current stream is. The
 * "Python object" its conversions take is a table_array (dlsync never looks inside).
 * Several producers live side by side, each with its own table; faults are switches a
 * test sets, to see what a consumer gets from a producer that misbehaves.
 */
#ifndef DL_SYNC_TEST_TABLE_PRODUCER_H_
#define DL_SYNC_TEST_TABLE_PRODUCER_H_

#include <stdatomic.h>
#include <stdint.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"

enum { TABLE_PRODUCERS = 3 };

/** What a producer's functions do wrong. */
typedef enum table_fault {
  TABLE_FAULT_NONE,
  TABLE_FAULT_STREAM_FAILS,       /**< current_work_stream returns -1 */
  TABLE_FAULT_STREAM_ANSWERS,     /**< current_work_stream answers `answer`, whatever is current */
  TABLE_FAULT_CONVERSION_FAILS,   /**< managed_tensor_from_py_object_no_sync returns -1 */
  TABLE_FAULT_NO_TENSOR,          /**< ... returns 0 and no tensor */
  TABLE_FAULT_TENSOR_MAJOR_2,     /**< ... a tensor of DLPack version 2.0 */
  TABLE_FAULT_TENSOR_UNKNOWN_TYPE /**< ... a tensor of device type 42 */
} table_fault;

/** An array of a producer: the object its conversions take. */
typedef struct table_array {
  pattern data;       /**< the memory the tensors point to */
  DLDevice device;    /**< where it lives */
  atomic_int taken;   /**< tensors made from it by managed_tensor_from_py_object_no_sync */
  atomic_int deleted; /**< deleter calls of those tensors */
  uint64_t canary;    /**< the test's: the producer never writes it */
} table_array;

typedef struct table_producer {
  DLPackExchangeAPI api; /**< the table a consumer is given */
  table_fault fault;
  void *answer;     /**< TABLE_FAULT_STREAM_ANSWERS's stream */
  int name_reuse;   /**< tensors name the current stream as their reuse stream */
  atomic_int asked; /**< current_work_stream calls */
} table_producer;

extern table_producer table_producers[TABLE_PRODUCERS];

/** Every producer back to a version-1.3 table that behaves, its counters zero and its
    current stream NULL on the calling thread. */
void table_producers_reset(void);
/** Producer i's current work stream on the calling thread (NULL: the legacy stream). */
void table_producer_use_stream(int i, void *stream);
/** A new array on device (its pattern zero). */
void table_array_init(table_array *array, DLDevice device);

#endif
