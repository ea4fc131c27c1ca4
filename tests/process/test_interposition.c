/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Static copies of dlsync that must stay independent when the process makes their
 * symbols visible to each other:
 *
 *   test_process_interposition two-plugins: two libraries, each with its own static
 *     copy; the first is loaded RTLD_NOW | RTLD_GLOBAL (its symbols join the global
 *     scope), the second RTLD_LOCAL.
 *   test_process_interposition_exe: an executable linked with -rdynamic (its symbols are
 *     in the global scope) holding a static copy, which loads a library with another.
 *
 * Each copy is reached through its own function table (copy_plugin.c). Installing a
 * backend in one copy (dl_sync_set_backend) must not change what the other's
 * dl_sync_get_backend answers, and each copy's built-in backends are its own.
 *
 * What it catches: a static archive whose API has default visibility. A library (or a
 * -rdynamic executable) that links it then exports every dl_sync_ function, and the
 * dynamic linker binds the next copy's references, its function table included, to the
 * first definition in the global scope: the second copy's dl_sync_set_backend is the
 * first copy's, so one install changes both. With DL_SYNC_API hidden in the archives,
 * each copy's references bind within its own library. Fails without that, passes with it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CHECK_WITHOUT_DLSYNC
#include "check.h"
#include "copy_plugin.h"
#include "host_backend.h"

#ifdef EXE_COPY
const copy_table *copy_table_get(void); /* the executable's own copy (copy_plugin.c) */
#endif

static const copy_table *load_copy(const char *path, int flags) {
  void *handle = dlopen(path, RTLD_NOW | flags);
  if (handle == NULL) FAIL("dlopen %s: %s", path, dlerror());
  copy_table_get_fn get;
  *(void **)&get = dlsym(handle, COPY_TABLE_GET);
  if (get == NULL) FAIL("dlsym %s: %s", COPY_TABLE_GET, dlerror());
  return get();
}

static const char *file_of(const void *address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "(unknown)";
}

static const char *file_of_set_backend(const copy_table *table) {
  void *address;
  memcpy(&address, &table->set_backend, sizeof address);
  return file_of(address);
}

static const char *name_of(const dl_sync_backend *backend) {
  return backend == NULL             ? "(none)"
         : backend == host_backend() ? "the host backend"
                                     : backend->name;
}

/* What copy answers for device_type is expected, the one whose table is in file. */
static void check_answer(const char *copy, const copy_table *table, int32_t device_type,
                         const dl_sync_backend *expected) {
  const dl_sync_backend *answer = table->get_backend(device_type);
  if (answer != expected)
    FAIL("copy %s answers %s (%p, in %s) for device type %d, expected %s (%p, in %s)", copy,
         name_of(answer), (const void *)answer, file_of(answer), (int)device_type,
         name_of(expected), (const void *)expected, file_of(expected));
}

static void check_independent(const char *name_a, const copy_table *a, const char *name_b,
                              const copy_table *b) {
  printf("copy %s: dl_sync_set_backend in %s; copy %s: in %s\n", name_a, file_of_set_backend(a),
         name_b, file_of_set_backend(b));
  /* An install in one copy is that copy's only, both ways. */
  const dl_sync_backend *b_cuda = b->get_backend(kDLCUDA), *a_rocm = a->get_backend(kDLROCM);
  CHECK_INT(a->set_backend(kDLCUDA, host_backend()), DL_SYNC_OK);
  check_answer(name_a, a, kDLCUDA, host_backend());
  check_answer(name_b, b, kDLCUDA, b_cuda);
  CHECK_INT(b->set_backend(kDLROCM, host_backend()), DL_SYNC_OK);
  check_answer(name_b, b, kDLROCM, host_backend());
  check_answer(name_a, a, kDLROCM, a_rocm);

  /* Each copy's built-in backends are its own, and are its defaults. */
  if (a->cuda_backend() == b->cuda_backend())
    FAIL("copies %s and %s share one CUDA backend (%p, in %s)", name_a, name_b,
         (const void *)a->cuda_backend(), file_of(a->cuda_backend()));
  check_answer(name_b, b, kDLCUDA, b->cuda_backend());
  check_answer(name_a, a, kDLROCM, a->hip_backend());

  /* A tensor B records carries B's own deleter, whose record and pools are B's: the
     exported name, taken by address, would be the interposing copy's. */
  CHECK_INT(b->set_backend(kDLCUDA, host_backend()), DL_SYNC_OK);
  DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  CHECK_INT(b->tensor_record(&tensor, (dl_sync_stream){{kDLCUDA, 0}, (void *)0x100}), DL_SYNC_OK);
  Dl_info deleter;
  if (dladdr((const void *)(uintptr_t)tensor.deleter, &deleter) == 0 ||
      strcmp(deleter.dli_fname, file_of_set_backend(b)) != 0)
    FAIL("a tensor recorded by copy %s carries a deleter in %s, not in %s", name_b,
         dladdr((const void *)(uintptr_t)tensor.deleter, &deleter) ? deleter.dli_fname : "?",
         file_of_set_backend(b));
  tensor.deleter(&tensor);
  CHECK_INT(b->shutdown(), DL_SYNC_OK);
  CHECK_INT(b->set_backend(kDLCUDA, NULL), DL_SYNC_OK);

  /* Release ordering across copies: the reuse stream B's record names is ordered by A,
     the consumer, with one record and one wait of A's, and the deleter runs at once. */
  CHECK_INT(a->set_backend(kDLCUDA, host_backend()), DL_SYNC_OK);
  CHECK_INT(b->set_backend(kDLCUDA, host_backend()), DL_SYNC_OK);
  tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  dl_sync_stream producer = {{kDLCUDA, 0}, HOST_STREAM_A};
  CHECK_INT(b->tensor_record_reuse(&tensor, producer, producer), DL_SYNC_OK);
  long records = host_records(), waits = host_waits();
  CHECK_INT(a->tensor_release(&tensor, (dl_sync_stream){{kDLCUDA, 0}, HOST_STREAM_B}),
            DL_SYNC_RELEASED_ORDERED);
  CHECK_INT(host_records() - records, 1);
  CHECK_INT(host_waits() - waits, 1);
  if (tensor.deleter != NULL || tensor.manager_ctx != NULL)
    FAIL("copy %s's release of copy %s's tensor left its deleter %p (the producer's: NULL)", name_a,
         name_b, (void *)(uintptr_t)tensor.deleter);
  CHECK_INT(a->shutdown(), DL_SYNC_OK);
  CHECK_INT(b->shutdown(), DL_SYNC_OK);
  CHECK_INT(b->set_backend(kDLCUDA, NULL), DL_SYNC_OK);

  CHECK_INT(a->set_backend(kDLCUDA, NULL), DL_SYNC_OK);
  CHECK_INT(b->set_backend(kDLROCM, NULL), DL_SYNC_OK);
  check_answer(name_a, a, kDLCUDA, a->cuda_backend());
  check_answer(name_b, b, kDLROCM, b->hip_backend());
}

int main(int argc, char **argv) {
#ifdef EXE_COPY
  (void)argc;
  (void)argv;
  const copy_table *exe = copy_table_get();
  const copy_table *plugin = load_copy(COPY_B, RTLD_LOCAL);
  check_independent("executable (-rdynamic)", exe, "B (RTLD_LOCAL)", plugin);
#else
  if (argc != 2 || strcmp(argv[1], "two-plugins") != 0) FAIL("usage: %s two-plugins", argv[0]);
  const copy_table *a = load_copy(COPY_A, RTLD_GLOBAL);
  const copy_table *b = load_copy(COPY_B, RTLD_LOCAL);
  check_independent("A (RTLD_GLOBAL)", a, "B (RTLD_LOCAL)", b);
#endif
  printf("passed\n");
  return 0;
}
