/* SPDX-License-Identifier: Apache-2.0 */
// The C++ form of macros.c.
#include "macros.c"
