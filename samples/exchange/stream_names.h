/* SPDX-License-Identifier: Apache-2.0 */
/* Names for streams in the demo's timeline: each framework registers its own. */
#ifndef DEMO_STREAM_NAMES_H_
#define DEMO_STREAM_NAMES_H_

void stream_name_set(void *stream, const char *name);
const char *stream_name(void *stream);

#endif
