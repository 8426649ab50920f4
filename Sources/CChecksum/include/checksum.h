// CRC-32C (Castagnoli) of a buffer: SSE4.2 instructions when the CPU has them, a table
// otherwise. Used to verify every rendition read from the store.
#ifndef VIEWERD_CHECKSUM_H
#define VIEWERD_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

uint32_t viewerd_crc32c(uint32_t crc, const void *data, size_t length);

#endif
