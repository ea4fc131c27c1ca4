/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dl_sync_backend.graph_retain for the runtimes' backends, written once: ownership of the
 * object moves in every outcome (backend.h). Until the runtime's user object exists, a
 * failure releases the object here; once it exists, dropping the user object's reference
 * is what releases it (the runtime calls release, now or later), so it is never released
 * twice. Each backend supplies its runtime's four calls.
 */
#ifndef DL_SYNC_USER_OBJECT_H_
#define DL_SYNC_USER_OBJECT_H_

/* Each answers the runtime's code: 0 on success. */
typedef struct dl_sync__user_object_calls {
  /* The graph that stream is capturing into; the runtime's "capture unmatched" when the
     stream captures none, DL_SYNC__NO_RUNTIME without the runtime. */
  int (*capturing_graph)(void *stream, void **graph);
  /* A user object with one reference whose destructor is release(object). */
  int (*create)(void **user_object, void *object, void (*release)(void *object));
  /* Moves that one reference to graph. */
  int (*move_to_graph)(void *graph, void *user_object);
  /* Drops the reference a failed move left with the caller. */
  void (*drop)(void *user_object);
} dl_sync__user_object_calls;

static inline int dl_sync__graph_retain_with(const dl_sync__user_object_calls *calls, void *stream,
                                             void *object, void (*release)(void *object)) {
  void *graph = NULL;
  void *user_object = NULL;
  int code = calls->capturing_graph(stream, &graph);
  if (code == 0) code = calls->create(&user_object, object, release);
  if (code != 0) {
    release(object);
    return code;
  }
  code = calls->move_to_graph(graph, user_object);
  if (code != 0) calls->drop(user_object); /* runs release */
  return code;
}

#endif
