/* The built-in CPU backend. A second instance with its own memory capacity can act as a
 * "device" so that the hybrid path is testable without a GPU. */
#ifndef PIB_CPU_BACKEND_H
#define PIB_CPU_BACKEND_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n_threads <= 0 means all hardware threads. memory_capacity 0 means "the machine's RAM";
 * otherwise buffer_alloc fails with PIB_ERR_OUT_OF_MEMORY once the capacity would be exceeded. */
int pib_cpu_backend_create(int32_t n_threads, size_t memory_capacity, pib_backend *out);

#ifdef __cplusplus
}
#endif

#endif
