/* SPDX-License-Identifier: Apache-2.0 */
// What the Python GPU suite (python/tests/gpu) adds to kernels.cu, in the shared library
// it loads with ctypes (libdl_sync_gpu_test_kernels.so): the stream's flags (its producer
// streams must not synchronize with the legacy default stream), and a timer that opens a
// gate from a thread of its own, for a consumer call that blocks the host (and perhaps
// holds the GIL) while the gate holds the producer.
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kernels.h"

// 1 when the stream does not synchronize with the legacy default stream
// (cudaStreamNonBlocking), 0 when it does, negative (minus the runtime's error) on error.
extern "C" int gpu_stream_is_non_blocking(void *stream) {
  unsigned flags = 0;
  cudaError_t error = cudaStreamGetFlags((cudaStream_t)stream, &flags);
  if (error != cudaSuccess) return -(int)error;
  return (flags & cudaStreamNonBlocking) != 0;
}

// Blocks until the stream's work is done; the runtime's error code.
extern "C" int gpu_stream_synchronize(void *stream) {
  return (int)cudaStreamSynchronize((cudaStream_t)stream);
}

// Blocks until all work of the current device is done (every framework's streams: they
// share the device's primary context); the runtime's error code.
extern "C" int gpu_device_synchronize(void) {
  return (int)cudaDeviceSynchronize();
}

struct gpu_gate_timer {
  std::mutex lock;
  std::condition_variable stopped;
  bool stop = false;
  bool fired = false;
  std::thread thread;
};

// Opens the gate (flags->open = 1, flags being the host's pointer) after delay_ns unless
// gpu_gate_timer_stop comes first.
extern "C" gpu_gate_timer *gpu_gate_timer_start(gpu_flags *flags, long long delay_ns) {
  gpu_gate_timer *timer = new (std::nothrow) gpu_gate_timer;
  if (timer == nullptr) return nullptr;
  try {
    timer->thread = std::thread([timer, flags, delay_ns] {
      std::unique_lock<std::mutex> held(timer->lock);
      if (!timer->stopped.wait_for(held, std::chrono::nanoseconds(delay_ns),
                                   [timer] { return timer->stop; })) {
        __atomic_store_n(&flags->open, 1, __ATOMIC_SEQ_CST);
        timer->fired = true;
      }
    });
  } catch (...) {
    delete timer;
    return nullptr;
  }
  return timer;
}

// Stops and frees the timer; 1 if it had opened the gate, 0 if not.
extern "C" int gpu_gate_timer_stop(gpu_gate_timer *timer) {
  {
    std::lock_guard<std::mutex> held(timer->lock);
    timer->stop = true;
  }
  timer->stopped.notify_all();
  timer->thread.join();
  int fired = timer->fired;
  delete timer;
  return fired;
}

// Sets the gate's flag from the host with a full fence (Python's stores through ctypes
// are plain stores).
extern "C" void gpu_gate_set(gpu_flags *flags, int open) {
  __atomic_store_n(&flags->open, open, __ATOMIC_SEQ_CST);
}
