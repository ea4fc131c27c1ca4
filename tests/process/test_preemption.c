/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process where dlsync is called before the framework that brings its GPU runtime is
 * loaded. The library path offers a CUDA runtime (libcudart.so.13, version 13000) and a
 * HIP runtime (libamdhip64.so.7); the framework links its own libcudart.so.13 (13020) by
 * RPATH $ORIGIN. The program first calls dlsync every way that could look for a runtime
 * (dl_sync_backend_runtime, an export and a tensor record on kDLCUDA with
 * dl_sync_cudart_backend() installed, the default CUDA driver backend, the HIP backend on
 * kDLROCM; all may fail), then loads the framework.
 *
 * What it catches: a runtime backend that loads a runtime itself. Had dlsync's first call
 * dlopen'ed "libcudart.so.13" from the library path, the framework's own runtime could
 * never load: its DT_NEEDED libcudart.so.13 matches the SONAME already in the process, so
 * it would get 13000 from the library path instead of its 13020 (streams and events of
 * one runtime are not the other's). The program checks with dl_iterate_phdr that no
 * libcudart or libamdhip64 is mapped before the framework is loaded, that the framework
 * gets its own 13020, and that dlsync then uses that one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static const DLDevice cuda0 = {kDLCUDA, 0}, rocm0 = {kDLROCM, 0};

/* Appends each mapped CUDA or HIP runtime to list, one a line. */
static int note(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  char *list = data;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base != NULL ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libcudart", 9) != 0 && strncmp(base, "libamdhip64", 11) != 0) return 0;
  size_t used = strlen(list);
  snprintf(list + used, 4096 - used, "  %s\n", info->dlpi_name);
  return 0;
}

static void check_no_runtime_mapped(const char *when) {
  static char list[4096];
  list[0] = '\0';
  dl_iterate_phdr(note, list);
  if (list[0] != '\0') FAIL("%s, these GPU runtimes are mapped:\n%s", when, list);
}

static void say(const char *what, int status) {
  printf("%-58s %s%s%s\n", what, dl_sync_status_name(status), status != DL_SYNC_OK ? ": " : "",
         status != DL_SYNC_OK ? dl_sync_last_error() : "");
}

/* Every dlsync call that could look for a runtime, before any is loaded: what each
   answered. */
typedef struct first_calls {
  int cudart_runtime, cudart_export, cudart_record, hip_runtime, hip_export;
  char cudart_runtime_message[512];
  void (*deleter_after_record)(DLManagedTensorVersioned *);
} first_calls;

static first_calls call_dlsync_first(void) {
  first_calls calls;
  dl_sync_runtime_info info;
  calls.cudart_runtime = dl_sync_backend_runtime(dl_sync_cudart_backend(), &info);
  snprintf(calls.cudart_runtime_message, sizeof calls.cudart_runtime_message, "%s",
           dl_sync_last_error());
  say("dl_sync_backend_runtime(dl_sync_cudart_backend()):", calls.cudart_runtime);

  CHECK_DL(dl_sync_set_backend(kDLCUDA, dl_sync_cudart_backend()));
  dl_sync_stream legacy = dl_sync_stream_view(cuda0, DL_SYNC_STREAM_LEGACY);
  calls.cudart_export = dl_sync_export(legacy, dl_sync_stream_arg_int(2));
  say("export on kDLCUDA, CUDA runtime backend:", calls.cudart_export);
  DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = cuda0;
  calls.cudart_record = dl_sync_tensor_record(&tensor, legacy);
  say("tensor record on kDLCUDA, CUDA runtime backend:", calls.cudart_record);
  calls.deleter_after_record = tensor.deleter;

  CHECK_DL(dl_sync_set_backend(kDLCUDA, NULL)); /* the default: the CUDA driver backend */
  say("export on kDLCUDA, CUDA driver backend:", dl_sync_export(legacy, dl_sync_stream_arg_int(2)));
  say("dl_sync_backend_runtime(dl_sync_cuda_backend()):",
      dl_sync_backend_runtime(dl_sync_cuda_backend(), &info));

  calls.hip_runtime = dl_sync_backend_runtime(dl_sync_hip_backend(), &info);
  say("dl_sync_backend_runtime(dl_sync_hip_backend()):", calls.hip_runtime);
  calls.hip_export = dl_sync_export(dl_sync_stream_view(rocm0, DL_SYNC_STREAM_PER_THREAD),
                                    dl_sync_stream_arg_int(0));
  say("export on kDLROCM, HIP backend:", calls.hip_export);
  return calls;
}

/* With no runtime loaded, the runtime backends had none to use. */
static void check_no_runtime_was_found(const first_calls *calls) {
  CHECK_INT(calls->cudart_runtime, DL_SYNC_ENODEV);
  CHECK_MENTIONS(calls->cudart_runtime_message, "never loads one itself");
  CHECK_INT(calls->cudart_export, DL_SYNC_ENODEV);
  CHECK_INT(calls->cudart_record, DL_SYNC_ENODEV);
  CHECK(calls->deleter_after_record == NULL);
  CHECK_INT(calls->hip_runtime, DL_SYNC_ENODEV);
  CHECK_INT(calls->hip_export, DL_SYNC_ENODEV);
}

typedef int (*version_fn)(void);
typedef const char *(*path_fn)(void);
typedef int (*runtime_version_fn)(int *version);

int main(void) {
  const char *variables[] = {"DL_SYNC_CUDART", "DL_SYNC_HIP", "DL_SYNC_LIBCUDA"};
  for (size_t i = 0; i < 3; i++)
    if (getenv(variables[i]) != NULL) FAIL("%s is set: the test needs it unset", variables[i]);
  const char *library_path = getenv("LD_LIBRARY_PATH");
  if (library_path == NULL || strstr(library_path, LIBRARY_PATH_RUNTIME_DIR) == NULL)
    FAIL("LD_LIBRARY_PATH must offer %s", LIBRARY_PATH_RUNTIME_DIR);
  check_no_runtime_mapped("at start");

  first_calls calls = call_dlsync_first();
  check_no_runtime_mapped("after dlsync's calls, before the framework is loaded");
  check_no_runtime_was_found(&calls);

  void *framework = dlopen(FRAMEWORK, RTLD_NOW | RTLD_LOCAL);
  if (framework == NULL) FAIL("dlopen %s: %s", FRAMEWORK, dlerror());
  version_fn version;
  path_fn path;
  *(void **)&version = dlsym(framework, "framework_runtime_version");
  *(void **)&path = dlsym(framework, "framework_runtime_path");
  CHECK(version != NULL && path != NULL);
  printf("the framework's runtime: %s, version %d\n", path(), version());
  CHECK_INT(version(), 13020);
  CHECK_MENTIONS(path(), FRAMEWORK_DIR);

  /* dlsync now uses the runtime the framework brought. */
  dl_sync_runtime_info info;
  CHECK_DL(dl_sync_backend_runtime(dl_sync_cudart_backend(), &info));
  CHECK_INT(info.version, 13020);
  CHECK_MENTIONS(info.path, FRAMEWORK_DIR);
  CHECK_DL(dl_sync_set_backend(kDLCUDA, dl_sync_cudart_backend()));
  CHECK_DL(
      dl_sync_export(dl_sync_stream_view(cuda0, DL_SYNC_STREAM_LEGACY), dl_sync_stream_arg_int(2)));
  CHECK_DL(dl_sync_shutdown());
  CHECK_DL(dl_sync_set_backend(kDLCUDA, NULL));

  /* The control: the library path's libcudart.so.13 is another runtime, 13000. */
  void *other = dlopen(LIBRARY_PATH_RUNTIME_DIR "/libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (other == NULL) FAIL("dlopen the library path's runtime: %s", dlerror());
  runtime_version_fn other_version;
  *(void **)&other_version = dlsym(other, "cudaRuntimeGetVersion");
  int other_runtime = 0;
  CHECK(other_version != NULL && other_version(&other_runtime) == 0);
  CHECK_INT(other_runtime, 13000);
  printf("passed\n");
  return 0;
}
