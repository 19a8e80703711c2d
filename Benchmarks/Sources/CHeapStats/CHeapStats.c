#include "CHeapStats.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>

int64_t cheapstats_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    /* uordblks: bytes in use in the arenas; hblkhd: bytes in mmap()ed chunks
       (large allocations, e.g. a big subscriber table, bypass the arenas). */
    return (int64_t)(info.uordblks + info.hblkhd);
}
#else
int64_t cheapstats_heap_bytes_in_use(void) {
    return -1;
}
#endif
