/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two copies of one GPU runtime in one process (two frameworks, each with its own, loaded
 * by the program with dlopen(RTLD_LOCAL)): HIP 5 and 7 (libamdhip64.so.5, .so.7), or CUDA
 * 12 and 13 (libcudart.so.12, .so.13, with dl_sync_cudart_backend() installed).
 *
 *   test_process_two_runtimes hip|cuda ambiguous: no runtime is chosen: an export is
 *     DL_SYNC_ENODEV naming both files, and touches neither; after
 *     dl_sync_bind_runtime(backend, NULL, <dlopen handle of the newer one>) exports work,
 *     on the newer one only, and dl_sync_backend_runtime reports its path.
 *   test_process_two_runtimes hip|cuda lookup: the same, bound by a lookup function: the
 *     path reported is the file the entry points live in.
 *   test_process_two_runtimes hip|cuda named: DL_SYNC_HIP / DL_SYNC_CUDART names the
 *     older one: dlsync uses it, and a later bind is refused (EINVAL, naming it).
 *
 * Each is its own process: dlsync finds a runtime once per process.
 *
 * What it catches: a backend that picks one of several loaded runtimes by itself (the
 * newest SONAME, the first found). The streams of one runtime are not the other's: an
 * export would record on one copy's handle with the other copy's calls. A silent pick
 * makes the first export DL_SYNC_OK (and moves the newer fake's counters) where the
 * test expects DL_SYNC_ENODEV and untouched counters.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static int cuda;
static const dl_sync_backend *backend;
static DLDevice device;
static void *older, *newer;
static const char *older_path, *newer_path;

static void *open_runtime(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) FAIL("dlopen %s: %s", path, dlerror());
  return handle;
}

static void *entry(void *runtime, const char *name) {
  char full[96];
  snprintf(full, sizeof full, "%s%s", cuda ? "cuda" : "hip", name);
  void *address = dlsym(runtime, full);
  if (address == NULL) FAIL("the runtime lacks %s", full);
  return address;
}

static long counter(void *runtime, const char *name) {
  long (*read)(const char *);
  *(void **)&read = dlsym(runtime, "fake_gpu_counter");
  CHECK(read != NULL);
  return read(name);
}

static long records(void *runtime) {
  return counter(runtime, "event_record");
}

static void *new_stream(void *runtime) {
  int (*create)(void **);
  *(void **)&create = entry(runtime, "StreamCreate");
  void *stream = NULL;
  CHECK_INT(create(&stream), 0);
  return stream;
}

/* An export from a stream of runtime to its default stream. */
static int export_on(void *runtime) {
  void *stream = new_stream(runtime);
  return dl_sync_export(dl_sync_stream_view(device, stream),
                        cuda ? dl_sync_stream_arg_int(1) : dl_sync_stream_arg_int(0));
}

static void check_refused_naming_both(int status, const char *what) {
  if (status != DL_SYNC_ENODEV)
    FAIL("%s with two runtimes loaded: %s (%s), expected DL_SYNC_ENODEV", what,
         dl_sync_status_name(status), dl_sync_last_error());
  CHECK_MENTIONS(dl_sync_last_error(), older_path);
  CHECK_MENTIONS(dl_sync_last_error(), newer_path);
}

static void check_uses(void *runtime, const char *path, long version) {
  dl_sync_runtime_info info;
  CHECK_DL(dl_sync_backend_runtime(backend, &info));
  printf("dlsync uses %s, version %d\n", info.path, (int)info.version);
  CHECK_MENTIONS(info.path, path);
  CHECK_INT(info.version, version);
  void *other = runtime == newer ? older : newer;
  long mine = records(runtime), theirs = records(other);
  CHECK_DL(export_on(runtime));
  CHECK_INT(records(runtime), mine + 1);
  CHECK_INT(records(other), theirs);
}

static void *lookup(void *user, const char *name) {
  return dlsym(user, name);
}

int main(int argc, char **argv) {
  if (argc != 3) FAIL("usage: %s hip|cuda ambiguous|lookup|named", argv[0]);
  cuda = strcmp(argv[1], "cuda") == 0;
  const char *scenario = argv[2];
  older_path = cuda ? CUDA_OLDER : HIP_OLDER;
  newer_path = cuda ? CUDA_NEWER : HIP_NEWER;
  long older_version = cuda ? 12030 : 50221153, newer_version = cuda ? 13000 : 70051831;
  device = (DLDevice){cuda ? kDLCUDA : kDLROCM, 0};
  backend = cuda ? dl_sync_cudart_backend() : dl_sync_hip_backend();
  CHECK_DL(dl_sync_set_backend(device.device_type, backend));
  older = open_runtime(older_path);
  newer = open_runtime(newer_path);

  if (strcmp(scenario, "named") == 0) {
    const char *variable = cuda ? "DL_SYNC_CUDART" : "DL_SYNC_HIP";
    if (getenv(variable) == NULL || strcmp(getenv(variable), older_path) != 0)
      FAIL("%s must name %s", variable, older_path);
    check_uses(older, older_path, older_version);
    CHECK_DL_STATUS(dl_sync_bind_runtime(backend, NULL, newer), DL_SYNC_EINVAL);
    CHECK_MENTIONS(dl_sync_last_error(), older_path);
    check_uses(older, older_path, older_version);
  } else {
    dl_sync_runtime_info info;
    check_refused_naming_both(dl_sync_backend_runtime(backend, &info), "dl_sync_backend_runtime");
    long before_older = records(older), before_newer = records(newer);
    check_refused_naming_both(export_on(newer), "an export");
    CHECK_INT(records(older), before_older);
    CHECK_INT(records(newer), before_newer);
    if (strcmp(scenario, "ambiguous") == 0)
      CHECK_DL(dl_sync_bind_runtime(backend, NULL, newer));
    else if (strcmp(scenario, "lookup") == 0)
      CHECK_DL(dl_sync_bind_runtime(backend, lookup, newer));
    else
      FAIL("unknown scenario %s", scenario);
    check_uses(newer, newer_path, newer_version);
    CHECK_DL(dl_sync_backend_runtime(backend, &info));
    if (strcmp(scenario, "lookup") == 0) CHECK_MENTIONS(info.path, "(bound by the caller)");
  }
  CHECK_DL(dl_sync_shutdown());
  CHECK_DL(dl_sync_set_backend(device.device_type, NULL));
  printf("%s %s: passed\n", argv[1], scenario);
  return 0;
}
