// Private to CVipsShim: the descriptor-reading VipsSource of vips_shim.c, for the other
// files of the target (hdr_still.c).
#ifndef VIEWERD_SOURCE_FD_H
#define VIEWERD_SOURCE_FD_H
#include <vips/vips.h>
#include "vips_shim.h"

/// A source reading the file open on `fd` from its start (pread); reads fail once `cancel`
/// (may be NULL) is requested. The caller unrefs it.
VipsSource *vs_source_fd(int fd, vs_cancel *cancel);
#endif
