#ifndef CHEAPSTATS_H
#define CHEAPSTATS_H

#include <stdint.h>

/// Bytes currently allocated from the C heap: glibc's mallinfo2().uordblks + hblkhd
/// (arena bytes in use + mmap()ed chunks).
/// Returns -1 where mallinfo2 is not available (non-glibc platforms).
int64_t cheapstats_heap_bytes_in_use(void);

#endif
