/* SPDX-License-Identifier: Apache-2.0 */
// The C++ form of coexist.c.
#include "coexist.c"
