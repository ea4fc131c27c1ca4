/* SPDX-License-Identifier: Apache-2.0 */
/* A backend with no device behind it, for the process-shape programs: events are heap
   cells, records and waits only count, nothing is ever pending or capturing. It takes no
   lock, so it may be called from many threads and from a forked child. */
#ifndef DL_SYNC_TEST_PROCESS_HOST_BACKEND_H_
#define DL_SYNC_TEST_PROCESS_HOST_BACKEND_H_

#include "dlsync/dlsync.h"

/* Stream handles; any non-special value works. */
#define HOST_STREAM_A ((void *)0x1000)
#define HOST_STREAM_B ((void *)0x2000)

/* The backend; host_backend.name is "host". */
const dl_sync_backend *host_backend(void);
/* Events created and destroyed, records and waits made, by this process. */
long host_events_created(void);
long host_events_destroyed(void);
long host_records(void);
long host_waits(void);

#endif
